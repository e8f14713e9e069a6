"""A model_dir is never overwritten or damaged by a bad command, a second trainer or a bad file.

Issue 11, cases 2, 3, 4, 8, 9, 11 (NaN loss, a truncated checkpoint, Ctrl-C) and 13 (folders a
kill mid-save leaves): each runs the CLI in real processes on a real model_dir.
"""
import glob
import json
import os
import signal
import subprocess

import pytest
import tensorflow as tf

from helpers import (assert_fragments, assert_one_line_error, copy_model_dir, run_module,
                     start_module, trainer_user_error, wait_for_log)
from common import atomic_writes, files
from trainer.model_dir import checkpoints
from trainer.model_dir.ledger import Ledger


SLOW = pytest.mark.slow  # ./run.sh test-slow


def train_args(model_dir, shards, steps, *extra):
    return ['--mode=train', f'--model_dir={model_dir}', f'--train_files={shards.train_pattern}',
            f'--train_steps={steps}', '--batch_size=16', '--save_checkpoints_steps=2',
            '--keep_checkpoint_max=0', *extra]


def file_bytes(paths):
    return {path: open(path, 'rb').read() if os.path.exists(path) else None for path in paths}


def test_damaged_checkpoint_state_file_resumes_from_newest_complete_checkpoint(
        trained_model, digit_shards, tmp_path):
    model_dir = copy_model_dir(trained_model, tmp_path / 'model')
    with open(os.path.join(model_dir, 'checkpoint'), 'w') as f:
        f.write('garbage\n')
    # Estimator saves the step it resumes from again as it starts (same variables, a new
    # meta graph): every other checkpoint file must stay as it was.
    before = file_bytes(path for path in glob.glob(f'{model_dir}/model.ckpt-*')
                        if not path.endswith('model.ckpt-4.meta'))
    # A kill mid-save leaves a temporary folder; a new run clears it.
    os.makedirs(f'{model_dir}/model.ckpt-6_temp/part-00000-of-00001')
    result = run_module('trainer.main', *train_args(model_dir, digit_shards, 6))
    assert 'checkpoint state file' in result.stderr and 'model.ckpt-4' in result.stderr
    assert f'Restoring parameters from {model_dir}/model.ckpt-4' in result.stderr
    assert 'Saving checkpoints for 0 ' not in result.stderr
    assert file_bytes(before) == before  # every earlier checkpoint file as it was
    assert [step for step, _ in checkpoints.list_checkpoints(model_dir)] == [0, 2, 4, 6]
    assert not os.path.exists(f'{model_dir}/model.ckpt-6_temp')


def test_a_bucket_state_file_rewritten_names_the_checkpoints_in_the_bucket(s3_bucket):
    """The rewritten state file names each checkpoint relative to the model_dir, as Estimator's
    Saver does (TF's public update_checkpoint_state wrote '../../../model.ckpt-4' there)."""
    model_dir = f'{s3_bucket}/model'
    # A write cut off, a kill:
    atomic_writes.write_text_atomic(f'{model_dir}/checkpoint', 'garbage\n')
    for step in (2, 4):
        tf.train.Checkpoint(v=tf.Variable(float(step))).write(f'{model_dir}/model.ckpt-{step}')
    checkpoints.prepare_to_resume(model_dir)
    state = tf.train.get_checkpoint_state(model_dir)
    assert state.model_checkpoint_path == f'{model_dir}/model.ckpt-4'
    assert list(state.all_model_checkpoint_paths) == [f'{model_dir}/model.ckpt-{step}'
                                                      for step in (2, 4)]
    assert 'model_checkpoint_path: "model.ckpt-4"' in files.read_text(f'{model_dir}/checkpoint')


def test_truncated_latest_checkpoint_is_one_line_error_naming_it(trained_model, digit_shards,
                                                                 tmp_path):
    model_dir = copy_model_dir(trained_model, tmp_path / 'model')
    [data_file] = glob.glob(f'{model_dir}/model.ckpt-4.data-*')
    with open(data_file, 'r+b') as f:
        f.truncate(10)
    result = run_module('trainer.main', *train_args(model_dir, digit_shards, 6), check=False)
    assert_one_line_error(result, 2, f'{model_dir}/model.ckpt-4')
    assert os.path.getsize(data_file) == 10  # not replaced by a fresh step-4 checkpoint


def test_second_trainer_on_one_model_dir_stops_naming_the_first(digit_shards, tmp_path):
    model_dir = tmp_path / 'model'
    args = train_args(model_dir, digit_shards, 1_000_000, '--save_checkpoints_steps=1000',
                      '--log_every_n_steps=1')
    first = start_module('trainer.main', *args, log_path=tmp_path / 'first.log')
    try:
        wait_for_log(tmp_path / 'first.log', r'step [\d,]+/[\d,]+ \(\d+%\), loss', first)
        second = run_module('trainer.main', *args, check=False, timeout=90)
        assert_one_line_error(second, 2, f'--model_dir={model_dir}', f'pid {first.pid}')
        assert first.poll() is None  # the first trainer goes on
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()


# test_cli's test_ctrl_c_exits_130_and_says_how_to_resume is this path in the default suite.
@pytest.mark.slow  # ./run.sh test-slow
def test_ctrl_c_during_training_is_one_line(digit_shards, tmp_path):
    args = train_args(tmp_path / 'model', digit_shards, 1_000_000, '--log_every_n_steps=1')
    trainer = start_module('trainer.main', *args, log_path=tmp_path / 'train.log')
    try:
        wait_for_log(tmp_path / 'train.log', r'step [\d,]+/[\d,]+ \(\d+%\), loss', trainer)
        trainer.send_signal(signal.SIGINT)
        assert trainer.wait(timeout=60) == 130
    finally:
        if trainer.poll() is None:
            trainer.kill()
            trainer.wait()
    log = open(tmp_path / 'train.log').read()
    assert 'Traceback' not in log
    assert 'resume with the same command' in log.strip().splitlines()[-1]


def test_nan_loss_is_one_line_error(digit_shards, tmp_path):
    result = run_module('trainer.main', *train_args(tmp_path / 'model', digit_shards, 50),
                        '--learning_rate=1e8', '--optimizer=sgd', check=False)
    assert_one_line_error(result, 1, 'NaN', '--learning_rate')


def test_failed_train_leaves_the_model_dir_as_it_was(trained_model, tmp_path):
    model_dir = copy_model_dir(trained_model, tmp_path / 'model')
    kept = file_bytes([f'{model_dir}/flags.txt', f'{model_dir}/train_finished.json'])
    assert_fragments(trainer_user_error('--mode=train', f'--model_dir={model_dir}',
                                        '--train_files=typo/*', '--train_steps=8'), '--train_files')
    assert file_bytes(kept) == kept


def test_a_train_run_whose_restore_would_fail_leaves_flags_txt_as_the_earlier_run_wrote_it(
        trained_model, digit_shards, tmp_path):
    """The checkpoint (adam's) lacks the slots --optimizer=momentum restores: refused, naming the
    variable and the flags.txt it was trained with, which still says so."""
    model_dir = copy_model_dir(trained_model, tmp_path / 'model')
    kept = file_bytes([f'{model_dir}/flags.txt'])
    result = run_module('trainer.main', *train_args(model_dir, digit_shards, 6),
                        '--optimizer=momentum', check=False)
    assert_one_line_error(result, 2, 'model.ckpt-4 lacks', '/Momentum',
                          f'(see {model_dir}/flags.txt)')
    assert file_bytes(kept) == kept


# --mode=evaluate's case in the slow suite: evaluate, export and the eval job each call
# Experiment.check_model first, and test_eval_job_started_before_its_trainer_reads_the_flags_it_writes
# shows it for the eval job.
@pytest.mark.parametrize('mode', ['export', pytest.param('evaluate', marks=SLOW)])
def test_export_and_evaluate_check_the_model_against_the_model_dir(trained_model, digit_shards,
                                                                   tmp_path, mode):
    line = trainer_user_error(f'--mode={mode}', '--model=csv_mlp', f'--model_dir={trained_model}',
                              f'--export_dir={tmp_path}/exports',
                              f'--eval_files={digit_shards.validation_pattern}')
    assert_fragments(line, '--model=csv_mlp', 'mnist_cnn', f'{trained_model}/flags.txt')
    assert not os.path.exists(tmp_path / 'exports')


def save_with_one_weight_changed(model_dir, step, change):
    """Saves model.ckpt-STEP: the latest checkpoint's variables with the first weight matrix
    wider ('widen': as a model built for a larger input holds it) or left out ('drop': as a
    model with fewer layers holds them); returns that matrix's name."""
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
    shapes = reader.get_variable_to_shape_map()
    changed = next(name for name in sorted(shapes) if name.endswith('kernel')
                   and len(shapes[name]) == 2)
    with tf.Graph().as_default():
        variables = [tf.compat.v1.Variable(
            tf.zeros([shapes[name][0] + 8] + shapes[name][1:], reader.get_variable_to_dtype_map()[
                name]) if name == changed else reader.get_tensor(name), name=name)
            for name in shapes if not (name == changed and change == 'drop')]
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            tf.compat.v1.train.Saver(variables).save(session, f'{model_dir}/model.ckpt',
                                                     global_step=step)
    return changed


# Each mode and each change is in the default suite; the other pairs of them in the slow one.
@pytest.mark.parametrize('change, mode', [('widen', 'evaluate'), ('widen', 'export'),
                                          pytest.param('widen', 'train', marks=SLOW),
                                          pytest.param('drop', 'evaluate', marks=SLOW),
                                          ('drop', 'train')])
def test_checkpoint_that_does_not_fit_is_one_line_error_naming_it(trained_model, digit_shards,
                                                                  tmp_path, change, mode):
    model_dir = copy_model_dir(trained_model, tmp_path / 'model')
    changed = save_with_one_weight_changed(model_dir, 6, change)
    kept = file_bytes(glob.glob(f'{model_dir}/*'))
    result = run_module('trainer.main', *train_args(model_dir, digit_shards, 8), f'--mode={mode}',
                        f'--eval_files={digit_shards.validation_pattern}',
                        f'--export_dir={tmp_path}/exports', check=False)
    assert_one_line_error(result, 2, f'{model_dir}/model.ckpt-6', changed,
                          'in the checkpoint' if change == 'widen' else 'not in the checkpoint',
                          '--model_dir')
    assert file_bytes(kept) == kept
    assert not (tmp_path / 'exports').exists()  # no SavedModel, whole or in part, no empty folder


def test_eval_job_on_a_missing_model_dir_stops_without_creating_it(digit_shards, tmp_path):
    typo = tmp_path / 'modle'
    line = trainer_user_error('--mode=continuous_eval', f'--model_dir={typo}',
                              f'--eval_files={digit_shards.validation_pattern}',
                              '--eval_timeout_secs=2')
    assert_fragments(line, f'--model_dir={typo}', 'no such folder')
    assert not typo.exists()


def test_eval_job_that_never_saw_a_checkpoint_fails(digit_shards, tmp_path):
    model_dir = tmp_path / 'model'
    model_dir.mkdir()
    result = run_module('trainer.main', '--mode=continuous_eval', f'--model_dir={model_dir}',
                        f'--eval_files={digit_shards.validation_pattern}',
                        '--eval_timeout_secs=1', check=False)
    assert_one_line_error(result, 1, f'--model_dir={model_dir}', '--eval_timeout_secs')


def test_eval_job_started_before_its_trainer_reads_the_flags_it_writes(digit_shards, tmp_path):
    model_dir, log_path = tmp_path / 'model', tmp_path / 'eval.log'
    model_dir.mkdir()
    job = start_module('trainer.main', '--mode=continuous_eval', '--model=mnist_cnn',
                       f'--model_dir={model_dir}', f'--eval_files={digit_shards.validation_pattern}',
                       '--eval_timeout_secs=60', log_path=log_path)
    wait_for_log(log_path, 'waiting for a trainer to write', job)
    (model_dir / 'flags.txt').write_text('--model=csv_mlp\n--mode=train\n')
    job.wait(timeout=60)
    result = subprocess.CompletedProcess(job.args, job.returncode, '', log_path.read_text())
    assert_one_line_error(result, 2, '--model=mnist_cnn', 'csv_mlp', f'{model_dir}/flags.txt')


def test_eval_job_records_a_damaged_checkpoint_and_goes_on(trained_model, digit_shards, tmp_path):
    model_dir = copy_model_dir(trained_model, tmp_path / 'model')
    for path in glob.glob(f'{model_dir}/model.ckpt-2.data-*'):
        os.remove(path)
    result = run_module('trainer.main', '--mode=continuous_eval', f'--model_dir={model_dir}',
                        f'--eval_files={digit_shards.validation_pattern}', '--eval_name=val',
                        '--eval_timeout_secs=30')
    assert f'{model_dir}/model.ckpt-2' in result.stderr
    statuses = [(e.step, e.status) for e in Ledger(model_dir, 'val').entries()]
    assert statuses == [(0, 'evaluated'), (2, 'damaged'), (4, 'evaluated')]
    assert json.load(open(f'{model_dir}/train_finished.json'))['step'] == 4
    assert tf.train.latest_checkpoint(model_dir).endswith('model.ckpt-4')
