"""The model_fn's checkpoint check compares the model with the checkpoint in use (the one an eval
job evaluates or an export exports, not the model_dir's newest), and reads it once."""
import collections

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from trainer.evaluation import eval_job
from trainer.model_dir import checkpoint_fit, ledger
from trainer.serving import export


def units_model_fn(features, labels, mode, params):
    """x [N, 2] times a kernel [2, units]: a checkpoint of another width does not fit."""
    kernel = tf.compat.v1.get_variable('kernel', initializer=tf.ones([2, params['units']]))
    outputs = tf.matmul(features['x'], kernel)
    step = tf.compat.v1.train.get_or_create_global_step()
    return tf.estimator.EstimatorSpec(mode, predictions={'outputs': outputs},
                                      loss=tf.reduce_mean(outputs), train_op=step.assign_add(1))


def save_checkpoints(model_dir, units_by_step):
    """model.ckpt-STEP with a kernel [2, units] for each, the last named by the state file."""
    for step, units in units_by_step.items():
        with tf.Graph().as_default():
            tf.compat.v1.get_variable('kernel', initializer=tf.ones([2, units]))
            global_step = tf.compat.v1.train.get_or_create_global_step()
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                session.run(global_step.assign(step))
                tf.compat.v1.train.Saver().save(session, f'{model_dir}/model.ckpt',
                                                global_step=step)


def x_input_fn():
    return tf.data.Dataset.from_tensors(({'x': tf.ones([1, 2])}, tf.zeros([1])))


def receiver_fn():
    x = tf.compat.v1.placeholder(tf.float32, [None, 2], name='x')
    return tf.estimator.export.ServingInputReceiver({'x': x}, {'x': x})


def evaluated_and_exported(model_dir, units, step):
    """The eval job's evaluation of model.ckpt-STEP (with the kind's predictions on it), then its
    export, by the model of that width."""
    estimator = tf.estimator.Estimator(
        checkpoint_fit.with_checkpoint_check(units_model_fn, 'units'), params={'units': units},
        config=tf.estimator.RunConfig(model_dir=str(model_dir), log_step_count_steps=None))

    def predictions_on(path):  # as the face kinds' pair protocol does
        predicted = estimator.predict(x_input_fn, checkpoint_path=path)
        return {'mean_output': float(np.mean(next(predicted)['outputs']))}
    job = eval_job.EvalJob(estimator, x_input_fn, 'x-*', ledger.Ledger(str(model_dir), 'val'),
                           extra_metrics=predictions_on)
    path = f'{model_dir}/model.ckpt-{step}'
    entry = job.evaluate(step, path)
    saved_model = export.export_saved_model(
        estimator, receiver_fn, str(model_dir / 'exports'), path,
        export.ServingExtras({}, {'x': np.ones([1, 2], np.float32)}))
    return entry, saved_model


@pytest.fixture
def reads(monkeypatch):
    """How many times each checkpoint is read through tf.train.load_checkpoint."""
    counts = collections.Counter()
    real = tf.train.load_checkpoint

    def counting(path):
        counts[str(path)] += 1
        return real(path)
    monkeypatch.setattr(tf.train, 'load_checkpoint', counting)
    return counts


def test_an_older_checkpoint_that_fits_is_evaluated_and_exported_though_the_newest_does_not(
        tmp_path):
    save_checkpoints(tmp_path, {1: 1, 2: 3})  # the newest saved by a wider model
    entry, saved_model = evaluated_and_exported(tmp_path, units=1, step=1)
    assert (entry.status, entry.metrics['global_step'], entry.metrics['mean_output']) == (
        ledger.EVALUATED, 1, 2.0)
    assert saved_model == str(tmp_path / 'exports' / '1')


def test_the_checkpoint_in_use_is_read_once_for_evaluation_predictions_and_export(tmp_path,
                                                                                   reads):
    save_checkpoints(tmp_path, {1: 1, 2: 1})
    evaluated_and_exported(tmp_path, units=1, step=1)
    assert reads == {str(tmp_path / 'model.ckpt-1'): 1}  # and the newest not at all


def test_an_older_checkpoint_that_does_not_fit_is_named_though_the_newest_does(tmp_path):
    save_checkpoints(tmp_path, {1: 1, 2: 3})
    with pytest.raises(UserError) as raised:
        evaluated_and_exported(tmp_path, units=3, step=1)
    assert str(raised.value).startswith(
        f'checkpoint {tmp_path}/model.ckpt-1 does not fit --model=units as it is built now: '
        'kernel: [2, 1] in the checkpoint, [2, 3] in the model; ')
    assert f'(see {tmp_path}/flags.txt)' in str(raised.value)


def test_outside_an_evaluation_or_export_the_check_compares_with_the_newest(tmp_path):
    save_checkpoints(tmp_path, {1: 1, 2: 3})
    check = checkpoint_fit.with_checkpoint_check(units_model_fn, 'units')
    config = tf.estimator.RunConfig(model_dir=str(tmp_path))
    with tf.Graph().as_default():  # as training's check aside, and training, build it
        with pytest.raises(UserError, match=r'^checkpoint .*model\.ckpt-2 does not fit'):
            check({'x': tf.ones([1, 2])}, None, 'train', {'units': 1}, config)
