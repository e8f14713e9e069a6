"""--wait_for_eval_secs: the chief stays until the eval job has recorded the final checkpoint,
or gives up after the wait with one line and exits 0 (issue 25, items 3 and 7). The
parameter servers' own end is tested with the loopback cluster (test_cluster.py)."""
import datetime
import re

import pytest

from helpers import run_module, run_together
from trainer.model_dir.ledger import Ledger

pytestmark = pytest.mark.slow  # a chief and a real eval job in processes: ./run.sh test-slow


def train_args(model_dir, shards, *extra):
    return ['--mode=train', f'--model_dir={model_dir}', f'--train_files={shards.train_pattern}',
            '--train_steps=6', '--batch_size=16', '--save_checkpoints_steps=3', *extra]


def log_time(line):
    """The time of an absl log line ('I1125 14:54:07.121327 ...')."""
    return datetime.datetime.strptime(line.split()[1], '%H:%M:%S.%f')


def test_chief_waiting_for_an_eval_job_that_never_comes_gives_up_after_the_wait(digit_shards,
                                                                                tmp_path):
    model_dir = tmp_path / 'model'
    result = run_module('trainer.main', *train_args(model_dir, digit_shards,
                                                    '--wait_for_eval_secs=3', '--eval_name=val'))
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    waiting = next(line for line in lines if 'waiting up to 3 s (--wait_for_eval_secs)' in line)
    notices = [line for line in lines if 'has no entry for the final checkpoint' in line]
    assert len(notices) == 1 and notices[0].endswith(
        f'eval job val has no entry for the final checkpoint (step 6) in '
        f'{model_dir}/eval_val/results after 3 s (--wait_for_eval_secs); ending without it')
    assert 3 <= (log_time(notices[0]) - log_time(waiting)).total_seconds() < 10
    assert (model_dir / 'train_finished.json').exists()  # written before the wait
    assert 'Traceback' not in result.stderr


def test_chief_waits_until_the_eval_job_records_the_final_checkpoint(digit_shards, tmp_path):
    model_dir = tmp_path / 'model'
    logs = run_together(tmp_path, {
        'trainer': train_args(model_dir, digit_shards, '--wait_for_eval_secs=300',
                              '--eval_name=val'),
        'eval': ['--mode=continuous_eval', f'--model_dir={model_dir}', '--eval_name=val',
                 f'--eval_files={digit_shards.validation_pattern}', '--train_steps=6',
                 '--eval_timeout_secs=120'],
    })
    trainer_lines = logs['trainer'].splitlines()
    waiting = next(i for i, line in enumerate(trainer_lines) if 'waiting up to 300 s' in line)
    assert re.search(r'eval job val recorded the final checkpoint \(step 6\)$',
                     trainer_lines[-1]), logs['trainer'][-2000:]
    assert waiting < len(trainer_lines) - 1
    assert Ledger(str(model_dir), 'val').last_step() == 6
