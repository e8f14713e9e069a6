"""kill -9 of a trainer and of an eval job mid-evaluation, then the same command again."""
import glob
import os
import signal

import pytest

from helpers import make_digit_arrays, run_module, start_module, wait_for_log
from input_fns.prepare import command as prepare
from trainer.model_dir import checkpoints
from trainer.model_dir.ledger import Ledger

pytestmark = pytest.mark.slow  # kill -9 and rerun, whole CLI runs: ./run.sh test-slow


def test_trainer_killed_then_rerun_resumes_and_finishes(digit_shards, tmp_path):
    model_dir = tmp_path / 'model'
    args = ['--mode=train', f'--model_dir={model_dir}', f'--train_files={digit_shards.train_pattern}',
            '--train_steps=100', '--batch_size=16', '--save_checkpoints_steps=5']
    trainer = start_module('trainer.main', *args, log_path=tmp_path / 'killed.log')
    # Killed as it starts saving step 10: it may die mid-save.
    wait_for_log(tmp_path / 'killed.log', r'Saving checkpoints for 10 ', trainer)
    trainer.send_signal(signal.SIGKILL)
    trainer.wait()
    step_at_kill = checkpoints.list_checkpoints(str(model_dir))[-1][0]
    assert 5 <= step_at_kill < 100

    rerun = run_module('trainer.main', *args)
    assert f'Restoring parameters from {model_dir}/model.ckpt-{step_at_kill}' in rerun.stderr
    assert checkpoints.list_checkpoints(str(model_dir))[-1][0] == 100
    assert 'Loss for final step' in rerun.stderr


def test_eval_job_killed_mid_evaluation_leaves_each_checkpoint_once(digit_shards, tmp_path):
    # Enough eval data that an evaluation takes a while, to be killed in the middle of.
    images, labels = make_digit_arrays(5000, seed=3)
    prepare.write_digit_splits(str(tmp_path / 'big'), 'test_digits',
                               {'validation': (images, labels, ['synthetic'])},
                               num_shards=1, num_eval_shards=2, seed=0)
    model_dir = tmp_path / 'model'
    run_module('trainer.main', '--mode=train', f'--model_dir={model_dir}',
               f'--train_files={digit_shards.train_pattern}', '--train_steps=6', '--batch_size=16',
               '--save_checkpoints_steps=2', '--keep_checkpoint_max=0')
    args = ['--mode=continuous_eval', f'--model_dir={model_dir}', '--eval_name=big',
            f'--eval_files={tmp_path}/big/validation-*', '--eval_timeout_secs=120']
    ledger = Ledger(str(model_dir), 'big')

    job = start_module('trainer.main', *args, log_path=tmp_path / 'killed.log')
    wait_for_log(tmp_path / 'killed.log', r'Restoring parameters from .*model\.ckpt-2$', job)
    job.send_signal(signal.SIGKILL)
    job.wait()
    assert [e.step for e in ledger.entries()] == [0]  # killed while evaluating step 2

    # Restarted; checkpoint 4 is deleted (as keep_checkpoint_max does) while it evaluates step 2.
    job = start_module('trainer.main', *args, log_path=tmp_path / 'restarted.log')
    wait_for_log(tmp_path / 'restarted.log', r'Restoring parameters from .*model\.ckpt-2$', job)
    for path in glob.glob(f'{model_dir}/model.ckpt-4.*'):
        os.remove(path)
    assert job.wait(timeout=120) == 0
    log = open(tmp_path / 'restarted.log').read()
    assert 'resuming after step 0' in log and 'skipped step 4' in log
    assert [(e.step, e.status) for e in ledger.entries()] == [
        (0, 'evaluated'), (2, 'evaluated'), (4, 'skipped'), (6, 'evaluated')]
