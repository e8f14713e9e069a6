"""--wait_for_eval_secs: the chief stays until the eval job has recorded the final checkpoint,
or gives up after the wait with one line and exits 0 (issue 25, items 3 and 7); a worker leaves
when training has finished and its parameter servers with it. The parameter servers' own end is
tested with the loopback cluster (test_cluster.py)."""
import datetime
import json
import re
import time

import pytest

from common import atomic_writes
from helpers import run_module, run_together, start_module, wait_for_log
from tests.s3_server import free_port
from trainer.model_dir import run_files
from trainer.model_dir.ledger import Ledger
from trainer.run import job_end

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


def test_a_worker_left_waiting_by_its_departed_parameter_servers_leaves(digit_shards, tmp_path,
                                                                        monkeypatch):
    """The chief's train_finished.json ends the parameter servers; a worker that was creating its
    session then would wait for them for ever in TensorFlow's C++ runtime (a loopback cluster on
    gs:// hung so). Here the chief never starts: the worker waits for it, then for the ps."""
    model_dir = tmp_path / 'model'
    cluster = {role: [f'127.0.0.1:{free_port()}'] for role in ('chief', 'worker', 'ps')}
    args = ['--mode=train_and_evaluate', f'--model_dir={model_dir}', '--train_steps=6',
            f'--train_files={digit_shards.train_pattern}', '--batch_size=16',
            f'--eval_files={digit_shards.validation_pattern}']
    processes = {}
    for role in ('ps', 'worker'):
        monkeypatch.setenv('TF_CONFIG', json.dumps({'cluster': cluster,
                                                    'task': {'type': role, 'index': 0}}))
        processes[role] = start_module('trainer.main', *args, log_path=tmp_path / f'{role}.log')
    try:
        wait_for_log(tmp_path / 'worker.log', r'Graph was finalized', processes['worker'])
        finished = run_files.TrainFinished(step=6, train_steps=6, early_stopped=False,
                                           reason='reached train_steps',
                                           time='2026-11-26T00:00:00+0000')
        atomic_writes.write_json_atomic(str(model_dir / run_files.TRAIN_FINISHED_FILE),
                                        finished.to_json())
        written = time.time()
        assert processes['ps'].wait(timeout=60) == 0
        assert processes['worker'].wait(timeout=job_end.WORKER_GRACE_SECS + 60) == 0
        assert time.time() - written >= job_end.WORKER_GRACE_SECS
        assert re.search(r'training finished at step 6 \(the chief wrote train_finished.json\) '
                         r'and this worker is still running 20 s later, its parameter servers '
                         r'gone: worker done', (tmp_path / 'worker.log').read_text())
    finally:
        for process in processes.values():
            process.kill()


def test_a_worker_started_after_training_finished_leaves_at_once(digit_shards, tmp_path,
                                                                 monkeypatch):
    """Restarted by the operator after the job ended, or started late: nobody is left to train
    with (the chief and the parameter servers have gone), so it says so and exits 0 rather than
    wait for them for ever; with a higher --train_steps the training is not over."""
    model_dir = tmp_path / 'model'
    model_dir.mkdir()
    finished = run_files.TrainFinished(step=6, train_steps=6, early_stopped=False,
                                       reason='reached train_steps', time='2026-12-01T00:00:00+0000')
    atomic_writes.write_json_atomic(str(model_dir / run_files.TRAIN_FINISHED_FILE),
                                    finished.to_json())
    cluster = {role: [f'127.0.0.1:{free_port()}'] for role in ('chief', 'worker', 'ps')}
    monkeypatch.setenv('TF_CONFIG', json.dumps({'cluster': cluster,
                                                'task': {'type': 'worker', 'index': 0}}))
    args = ['--mode=train', f'--model_dir={model_dir}', f'--train_files={digit_shards.train_pattern}',
            '--batch_size=16']
    worker = start_module('trainer.main', *args, '--train_steps=6', log_path=tmp_path / 'late.log')
    try:
        assert worker.wait(timeout=60) == 0
    finally:
        worker.kill()
    assert re.search(r'training already finished at step 6 \(.*model/train_finished.json, '
                     r'--train_steps=6\): worker done', (tmp_path / 'late.log').read_text())
    more = start_module('trainer.main', *args, '--train_steps=12', log_path=tmp_path / 'more.log')
    try:
        wait_for_log(tmp_path / 'more.log', r'Graph was finalized', more)  # waits for its chief
        assert more.poll() is None
    finally:
        more.kill()
