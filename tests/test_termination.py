"""SIGTERM, as Kubernetes and Vertex AI stop a task, to real processes: training saves the
step it reached and exits 143, also as pid 1 of a pid namespace; the same command resumes;
an eval job, an export and prepare leave nothing half-done (issue 25, items 1 and 7)."""
import os
import re
import signal
import time

import pytest
import tensorflow as tf

from common import files
from helpers import (copy_model_dir, make_digit_arrays, run_module, start_module,
                      wait_for_log)
from input_fns.prepare import command as prepare
from pid_namespace import start_as_pid1, unavailable_reason
from trainer.model_dir import checkpoints
from trainer.model_dir.ledger import Ledger

pytestmark = pytest.mark.slow  # real processes stopped by signals, then resumed: ./run.sh test-slow

TRAIN_STEPS = 300
STOPPED = r'SIGTERM: stopping training at step (\d+); its checkpoint is saved before the exit'


def train_args(model_dir, shards):
    # No periodic checkpoint falls due: only the stop can save the step reached.
    return ['--mode=train', f'--model_dir={model_dir}', f'--train_files={shards.train_pattern}',
            f'--train_steps={TRAIN_STEPS}', '--batch_size=16', '--log_every_n_steps=10',
            '--save_checkpoints_steps=100000']


def terminate(process, target_pid, timeout=60):
    """SIGTERM to target_pid; the seconds until process exited, and its status."""
    started = time.monotonic()
    os.kill(target_pid, signal.SIGTERM)
    code = process.wait(timeout=timeout)
    return time.monotonic() - started, code


@pytest.mark.parametrize('as_pid1', [False, True], ids=['plain', 'pid1'])
def test_sigterm_mid_training_saves_the_step_reached_and_the_same_command_resumes(
        as_pid1, digit_shards, tmp_path):
    if as_pid1 and unavailable_reason():
        pytest.skip(unavailable_reason())
    model_dir, log = tmp_path / 'model', tmp_path / 'stopped.log'
    args = train_args(model_dir, digit_shards)
    if as_pid1:
        process, target = start_as_pid1('trainer.main', *args, log_path=log)
    else:
        process = start_module('trainer.main', *args, log_path=log)
        target = process.pid
    seen = int(wait_for_log(log, r'step (\d+)/300 \(', process).group(1))
    secs, code = terminate(process, target)

    text = open(log).read()
    assert code == 143, text[-3000:]
    assert secs < 30
    reached = int(re.search(STOPPED, text).group(1))
    saved = checkpoints.list_checkpoints(str(model_dir))[-1][0]
    print(f'\n{"pid 1" if as_pid1 else "plain process"}: SIGTERM to exit {secs:.2f} s; '
          f'step reached {reached}, checkpoint saved at step {saved}')
    assert saved == reached and seen <= reached < TRAIN_STEPS
    assert int(tf.train.load_variable(f'{model_dir}/model.ckpt-{saved}', 'global_step')) == saved
    assert 'Traceback' not in text
    assert text.strip().splitlines()[-1].startswith(
        'terminated: --mode=train stopped; resume with the same command')
    assert not (model_dir / 'train_finished.json').exists()  # training did not finish

    resumed = run_module('trainer.main', *args)
    assert f'Restoring parameters from {model_dir}/model.ckpt-{reached}\n' in resumed.stderr
    assert checkpoints.list_checkpoints(str(model_dir))[-1][0] == TRAIN_STEPS
    assert files.read_json(str(model_dir / 'train_finished.json'))['step'] == TRAIN_STEPS


def test_a_second_sigterm_during_the_final_save_leaves_a_whole_checkpoint(digit_shards,
                                                                          tmp_path):
    model_dir, log = tmp_path / 'model', tmp_path / 'twice.log'
    trainer = start_module('trainer.main', *train_args(model_dir, digit_shards), log_path=log)
    wait_for_log(log, r'step \d+/300 \(', trainer)
    trainer.send_signal(signal.SIGTERM)
    reached = int(wait_for_log(log, STOPPED, trainer).group(1))
    wait_for_log(log, rf'Saving checkpoints for {reached} ', trainer)
    trainer.send_signal(signal.SIGTERM)  # while the save runs
    assert trainer.wait(timeout=60) == 143

    text = open(log).read()
    # Seen during the save (the handler runs once the save returns to Python), and ignored.
    during = text[text.index(f'Saving checkpoints for {reached} '):
                  text.index(f'after saving checkpoint {reached}...')]
    assert 'SIGTERM again: already stopping (saving the checkpoint of the step reached)' in during
    path = f'{model_dir}/model.ckpt-{reached}'
    assert checkpoints.list_checkpoints(str(model_dir))[-1] == (reached, path)
    assert checkpoints.damage(path) is None
    assert int(tf.train.load_variable(path, 'global_step')) == reached
    assert 'Traceback' not in text


def test_train_and_evaluate_on_one_machine_skips_its_final_evaluation_after_sigterm(
        digit_shards, tmp_path):
    model_dir, log = tmp_path / 'model', tmp_path / 'stopped.log'
    args = train_args(model_dir, digit_shards)
    args[0] = '--mode=train_and_evaluate'
    trainer = start_module('trainer.main', *args, f'--eval_files={digit_shards.validation_pattern}',
                           '--eval_throttle_secs=0', log_path=log)
    wait_for_log(log, r'step \d+/300 \(', trainer)
    secs, code = terminate(trainer, trainer.pid)
    text = open(log).read()
    assert code == 143 and secs < 30, text[-3000:]
    reached = int(re.search(STOPPED, text).group(1))
    assert checkpoints.list_checkpoints(str(model_dir))[-1][0] == reached
    after_stop = text[text.index('SIGTERM: stopping training'):]
    assert 'Starting evaluation' not in after_stop  # tf.estimator's end-of-training one
    assert 'Traceback' not in text


def test_sigterm_mid_evaluation_abandons_that_checkpoint_then_resumes(trained_model, tmp_path):
    # Enough eval data that an evaluation takes a while, to be stopped in the middle of.
    images, labels = make_digit_arrays(5000, seed=3)
    prepare.write_digit_splits(str(tmp_path / 'big'), 'test_digits',
                               {'validation': (images, labels, ['synthetic'])},
                               num_shards=1, num_eval_shards=2, seed=0)
    model_dir = copy_model_dir(trained_model, tmp_path / 'model')  # checkpoints 0, 2, 4
    args = ['--mode=continuous_eval', f'--model_dir={model_dir}', '--eval_name=big',
            f'--eval_files={tmp_path}/big/validation-*', '--eval_timeout_secs=120']
    log = tmp_path / 'stopped.log'
    job = start_module('trainer.main', *args, log_path=log)
    wait_for_log(log, r'Restoring parameters from .*model\.ckpt-2$', job)
    secs, code = terminate(job, job.pid)
    text = open(log).read()
    assert code == 143 and secs < 30, text[-3000:]
    assert 'Traceback' not in text
    assert text.strip().splitlines()[-1].startswith(
        'terminated: --mode=continuous_eval stopped; resume with the same command')
    ledger = Ledger(model_dir, 'big')
    assert [e.step for e in ledger.entries()] == [0]  # step 2 abandoned, no entry

    resumed = run_module('trainer.main', *args)
    assert 'resuming after step 0' in resumed.stderr
    assert [(e.step, e.status) for e in ledger.entries()] == [
        (0, 'evaluated'), (2, 'evaluated'), (4, 'evaluated')]


def test_sigterm_during_export_leaves_no_half_written_export(trained_model, tmp_path):
    export_dir, log = tmp_path / 'exports', tmp_path / 'export.log'
    args = ['--mode=export', f'--model_dir={trained_model}', f'--export_dir={export_dir}']
    exporter = start_module('trainer.main', *args, log_path=log)
    wait_for_log(log, r'Signatures INCLUDED in export', exporter)  # building the SavedModel
    secs, code = terminate(exporter, exporter.pid)
    assert code == 143 and secs < 30, open(log).read()[-3000:]
    assert not export_dir.exists() or os.listdir(export_dir) == []  # no staging, no version

    result = run_module('trainer.main', *args)
    assert sorted(os.listdir(export_dir)) == ['4', 'latest']  # --mode=export points latest
    assert (export_dir / '4' / 'export_complete.json').exists()
    assert f'"saved_model": "{export_dir}/4"' in result.stdout


@pytest.mark.parametrize('store', ['local', 's3'])
def test_sigterm_during_prepare_leaves_no_half_written_shard(store, request, tmp_path):
    output_dir = (request.getfixturevalue('s3_bucket') + '/csv' if store == 's3'
                  else str(tmp_path / 'csv'))
    args = ['csv_example', f'--output_dir={output_dir}', '--num_shards=4', '--num_eval_shards=1',
            '--rows_per_shard=20000', '--num_features=64']
    log = tmp_path / 'prepare.log'
    preparer = start_module('input_fns.prepare', *args, log_path=log)
    wait_for_log(log, r'train: wrote train-00000-of-00004\.csv', preparer)  # then mid-shard 1
    secs, code = terminate(preparer, preparer.pid)
    text = open(log).read()
    assert code == 143 and secs < 30, text[-3000:]
    assert text.strip().splitlines()[-1] == (
        'terminated: no half-written shard is left (a split\'s shards are put in place once all '
        'are written, or removed); run the same command again')

    left = sorted(os.path.basename(path) for path in files.glob(f'{output_dir}/*'))
    # No shard is left: locally they are renamed into place once all are written; in a bucket
    # they are written in place once the split is unlisted, and removed when stopped.
    assert left == ([] if store == 'local' else ['manifest.json'])
    if store != 'local':
        assert 'train' not in files.read_json(f'{output_dir}/manifest.json')['splits']

    run_module('input_fns.prepare', *args)
    splits = files.read_json(f'{output_dir}/manifest.json')['splits']
    assert {split: entry['num_records'] for split, entry in splits.items()} == {
        'train': 80000, 'validation': 20000}
