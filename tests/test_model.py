"""The MNIST CNN model_fn in each mode, and the registry."""
import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from models import mnist_cnn, registry

BATCH = 4


def spec_for(mode, params=None):
    with tf.Graph().as_default():
        features = {'image': tf.random.uniform([BATCH, 28, 28, 1])}
        labels = tf.constant([0, 1, 2, 3], tf.int32)
        return mnist_cnn.model_fn(features, labels if mode != tf.estimator.ModeKeys.PREDICT else None,
                                  mode, {**mnist_cnn.DEFAULT_PARAMS, **(params or {})})


def test_train_spec():
    spec = spec_for(tf.estimator.ModeKeys.TRAIN, {'optimizer': 'momentum', 'learning_rate': 0.1})
    assert spec.train_op is not None
    assert spec.loss.shape == ()
    graph = spec.loss.graph
    for name in ('cross_entropy:0', 'train_accuracy:0', 'logits:0', 'learning_rate:0'):
        graph.get_tensor_by_name(name)  # hooks look these up by name
    weights = [v for v in graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)]
    assert sorted(tuple(v.shape) for v in weights if len(v.shape) > 1) == sorted(
        [(5, 5, 1, 32), (5, 5, 32, 64), (7 * 7 * 64, 1024), (1024, 10)])


def test_eval_spec():
    spec = spec_for(tf.estimator.ModeKeys.EVAL)
    assert set(spec.eval_metric_ops) == {'accuracy', 'most_confident_mistakes', 'confusion_matrix'}
    assert spec.loss.shape.rank is None  # per example: see training.estimator_loss


def test_predict_spec():
    spec = spec_for(tf.estimator.ModeKeys.PREDICT)
    assert spec.predictions['classes'].shape.as_list() == [BATCH]
    assert spec.predictions['probabilities'].shape.as_list() == [BATCH, 10]
    assert 'serving_default' in spec.export_outputs


def test_estimator_trains_two_steps_and_evaluates(tmp_path):
    images = np.random.RandomState(0).rand(16, 28, 28, 1).astype(np.float32)
    labels = np.arange(16, dtype=np.int32) % 10

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({'image': images}, labels)).batch(8).repeat()

    estimator = tf.estimator.Estimator(mnist_cnn.model_fn, model_dir=str(tmp_path),
                                       params=mnist_cnn.DEFAULT_PARAMS)
    estimator.train(input_fn, steps=2)
    assert estimator.get_variable_value('global_step') == 2
    metrics = estimator.evaluate(input_fn, steps=2)
    assert np.isfinite(metrics['loss'])
    predictions = list(estimator.predict(lambda: tf.data.Dataset.from_tensor_slices(
        {'image': images[:3]}).batch(3)))
    assert len(predictions) == 3
    assert abs(predictions[0]['probabilities'].sum() - 1.0) < 1e-5


def test_eval_loss_weighs_every_example_once_whatever_the_batch_size(tmp_path):
    rng = np.random.RandomState(1)
    images = rng.rand(23, 28, 28, 1).astype(np.float32)
    labels = np.arange(23, dtype=np.int32) % 10
    estimator = tf.estimator.Estimator(mnist_cnn.model_fn, model_dir=str(tmp_path),
                                       params=mnist_cnn.DEFAULT_PARAMS)
    estimator.train(lambda: tf.data.Dataset.from_tensor_slices(
        ({'image': images}, labels)).batch(8).repeat(), steps=3)

    def loss_with_batches_of(size):
        return estimator.evaluate(lambda: tf.data.Dataset.from_tensor_slices(
            ({'image': images}, labels)).batch(size))['loss']

    probabilities = np.stack([p['probabilities'] for p in estimator.predict(
        lambda: tf.data.Dataset.from_tensor_slices({'image': images}).batch(23))])
    expected = -np.mean(np.log(probabilities[np.arange(23), labels]))
    # 23 = 2 x 10 + 3: a mean of batch means would count the last 3 examples as 10.
    for size in (10, 23, 4):
        assert abs(loss_with_batches_of(size) - expected) < 1e-4 * max(1.0, expected)


def test_registry():
    assert 'mnist_cnn' in registry.names()
    spec = registry.get('mnist_cnn')
    assert spec.model_fn is mnist_cnn.model_fn and spec.image_shape == (28, 28, 1)
    with pytest.raises(UserError, match='unknown model'):
        registry.get('no_such_model')
