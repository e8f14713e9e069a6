"""--warm_start_from and --warm_start_vars (issue 70): a new model_dir starts from another model's
weights and batch-norm statistics (a model_dir's, a SavedModel's), counting its own steps; a
stopped run resumes from its own checkpoint, never the source's; a head for other classes starts
afresh; a source that is not there or does not fit is one line. (Not tests/test_warm_start.py's
pre-forked test processes.)"""
import importlib.util
import os
import signal

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from helpers import REPO, make_digit_arrays, start_module, wait_until
import keras_models
from keras_models import CNN
from models import registry
from trainer.config.settings import Settings
from trainer.model_dir import checkpoints
from trainer.run import experiment, warm_starting
from trainer.run.mode_runners import RUNNERS


@pytest.fixture(autouse=True, scope='module')
def keras_test_models():
    with keras_models.registered():
        yield

KERNEL, MOVING_MEAN = 'conv2d/kernel', 'batch_normalization/moving_mean'


def train(model_dir, train_files, steps, **overrides):
    RUNNERS['train'](Settings(**{**dict(model=CNN, mode='train', model_dir=str(model_dir),
                                        train_files=train_files, train_steps=steps, batch_size=16,
                                        save_checkpoints_steps=2, keep_checkpoint_max=0),
                                 **overrides}), [])


def value(model_dir, step, name):
    return tf.train.load_variable(os.path.join(str(model_dir), f'model.ckpt-{step}'), name)


@pytest.fixture(scope='module')
def source(digit_shards, tmp_path_factory):
    """A 10-class model_dir trained to step 4."""
    model_dir = tmp_path_factory.mktemp('source') / 'model'
    train(model_dir, digit_shards.train_pattern, 4)
    return model_dir


def test_a_warm_start_then_a_stopped_run_resumes_from_its_own_checkpoint(digit_shards, source,
                                                                         tmp_path):
    model_dir, train_files = tmp_path / 'model', digit_shards.train_pattern
    train(model_dir, train_files, 2, warm_start_from=str(source))  # stops at its checkpoint 2
    for name in (KERNEL, MOVING_MEAN):  # weights and batch-norm statistics, at its step 0
        np.testing.assert_array_equal(value(model_dir, 0, name), value(source, 4, name))
    assert value(model_dir, 0, 'global_step') == 0  # its own steps, not the source's
    assert not value(model_dir, 0, f'{KERNEL}/Adam').any()  # nor the source's optimizer state
    trained = value(model_dir, 2, KERNEL)
    assert not np.array_equal(trained, value(source, 4, KERNEL))
    # Resumed with the same flags at a learning rate of 0: it goes on from its own step 2 with
    # its own weights; a warm start over them would have brought back the source's.
    train(model_dir, train_files, 4, warm_start_from=str(source),
          model_param_overrides={'learning_rate': 0.0})
    np.testing.assert_array_equal(value(model_dir, 4, KERNEL), trained)
    # status says where the run started from, as its first run recorded it.
    from trainer.observe import status
    started = status.render_text(status.summarize(status.read_snapshot(str(model_dir))))
    assert (f'started     from {source}/model.ckpt-4 (--warm_start_from={source}, '
            '--warm_start_vars=.*)') in started.splitlines()


@pytest.fixture(scope='module')
def three_classes(tmp_path_factory):
    from input_fns.prepare import command as prepare
    out = str(tmp_path_factory.mktemp('three_classes'))
    images, labels = make_digit_arrays(60, seed=3)
    prepare.write_digit_splits(out, 'three', {'train': (images, labels % 3, ['synthetic'])},
                               num_shards=2, num_eval_shards=1, seed=0)
    return os.path.join(out, 'train-*')


def test_fine_tuning_a_ten_class_export_onto_three_classes(source, three_classes, tmp_path,
                                                          monkeypatch):
    """From a SavedModel, without a flag more: the network carries over, its 10-class head
    (logits/, another shape here) starts afresh for 3 classes, and the log names it."""
    export_dir = tmp_path / 'exports'
    RUNNERS['export'](Settings(model=CNN, mode='export', model_dir=str(source),
                               export_dir=str(export_dir)), [])
    model_dir, three = tmp_path / 'model', {'keras_test_classes': 3}
    said = []  # the line itself: absl's level is whatever an earlier test in the worker left
    monkeypatch.setattr(warm_starting.logging, 'info',
                        lambda message, *args: said.append(message % args))
    train(model_dir, three_classes, 2, warm_start_from=str(export_dir / '4'),
          model_param_overrides=three)
    np.testing.assert_array_equal(value(model_dir, 0, KERNEL), value(source, 4, KERNEL))
    assert value(model_dir, 2, 'logits/kernel').shape == (8, 3)
    assert any(line.endswith('2 start afresh: logits/bias ([10] there), logits/kernel '
                             '([8, 10] there)') for line in said), said


def saver_checkpoint(path, **variables):
    with tf.Graph().as_default():
        for name, initial in variables.items():
            tf.compat.v1.get_variable(name, initializer=initial)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return tf.compat.v1.train.Saver().save(session, str(path))


def test_a_source_that_is_not_there_or_does_not_fit_is_one_line(digit_shards, source, tmp_path):
    def build(**flags):
        return experiment.build(Settings(model=CNN, mode='train', model_dir=str(tmp_path / 'm'),
                                         train_files=digit_shards.train_pattern, **flags),
                                registry.get(CNN))

    with pytest.raises(UserError, match=rf'--warm_start_from={tmp_path}/none: no such checkpoint, '
                                        'model_dir or SavedModel; give a trained model_dir'):
        build(warm_start_from=str(tmp_path / 'none'))
    (tmp_path / 'empty').mkdir()
    with pytest.raises(UserError, match=r'empty: holds no checkpoint and no SavedModel'):
        build(warm_start_from=str(tmp_path / 'empty'))
    with pytest.raises(UserError, match=r'--warm_start_vars=\[: not a regular expression'):
        build(warm_start_from=str(source), warm_start_vars='[')
    other = saver_checkpoint(tmp_path / 'other' / 'model.ckpt-1', unrelated=[1.0])
    with pytest.raises(UserError, match=rf'--warm_start_from={other} holds none of the variables '
                                        r'--warm_start_vars=.\* matches \(batch_normalization/beta'
                                        r'.*\); it holds unrelated'):
        with build(warm_start_from=other).training():
            pass
    resized = saver_checkpoint(tmp_path / 'resized' / 'model.ckpt-1', **{
        'logits/kernel': np.zeros([3, 3], np.float32)})
    with pytest.raises(UserError, match=rf'--warm_start_from={resized} holds the variables '
                                        r'--warm_start_vars=.\* matches in other shapes only '
                                        r'\(logits/kernel \(\[3, 3\] there\)\)'):
        with build(warm_start_from=resized).training():
            pass
    with pytest.raises(UserError, match=r"--warm_start_vars=nothing matches none of the model's "
                                        r'variables \(batch_normalization/beta, '):
        with build(warm_start_from=str(source), warm_start_vars='nothing').training():
            pass
    assert not (tmp_path / 'm').exists()


def test_a_killed_warm_started_job_resumes_from_its_own_checkpoint(digit_shards, tmp_path):
    """docs/your-model.md's keras_cnn (a --usr_dir's Keras model), warm-started in a trainer
    process killed (SIGKILL, a preemption) after its first checkpoint: run again, it goes on
    from its own checkpoint and reads no source at all (one gone since is no error)."""
    folder = os.path.join(REPO, 'docs', 'your-model', 'keras_cnn')
    if 'keras_cnn' not in registry.names():
        module_spec = importlib.util.spec_from_file_location(
            'keras_cnn', os.path.join(folder, 'keras_cnn.py'))
        module_spec.loader.exec_module(importlib.util.module_from_spec(module_spec))
    source, model_dir = tmp_path / 'source', tmp_path / 'model'
    train(source, digit_shards.train_pattern, 2, model='keras_cnn',
          model_param_overrides={'keras_cnn_filters': 4})
    job = start_module('trainer.main', f'--usr_dir={folder}', '--model=keras_cnn', '--mode=train',
                       f'--model_dir={model_dir}', f'--train_files={digit_shards.train_pattern}',
                       '--train_steps=100000', '--save_checkpoints_steps=2', '--batch_size=16',
                       '--keras_cnn_filters=4', f'--warm_start_from={source}',
                       log_path=tmp_path / 'job.log')
    try:
        wait_until(lambda: tf.train.latest_checkpoint(str(model_dir)) or job.poll() is not None,
                   timeout=120)
    finally:
        job.kill()
        job.wait()
    assert job.returncode == -signal.SIGKILL, (tmp_path / 'job.log').read_text()[-3000:]
    np.testing.assert_array_equal(value(model_dir, 0, KERNEL), value(source, 2, KERNEL))
    reached = checkpoints.latest_saved_step(str(model_dir))
    at_kill = tf.train.load_variable(tf.train.latest_checkpoint(str(model_dir)), KERNEL)
    train(model_dir, digit_shards.train_pattern, reached + 2,
          warm_start_from=str(tmp_path / 'gone'), model='keras_cnn',
          model_param_overrides={'keras_cnn_filters': 4, 'learning_rate': 0.0})
    np.testing.assert_array_equal(value(model_dir, reached + 2, KERNEL), at_kill)
    assert value(model_dir, reached + 2, 'global_step') == reached + 2
