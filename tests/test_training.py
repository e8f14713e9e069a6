"""The training step every model shares: optimizers, the learning-rate schedule, summaries."""
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from models import precision, training
from tests.helpers import REPO
from trainer.cluster import devices
from trainer.config import flag_checks


def run_steps(params, steps):
    """(learning rate, weight) after each of `steps` steps minimizing (w - 3)^2 from w = 0."""
    with tf.Graph().as_default():
        weight = tf.compat.v1.get_variable('w', initializer=0.0)
        loss = tf.square(weight - 3.0)
        train_op = training.train_op(loss, params, batch_accuracy=tf.constant(0.5))
        rate = tf.compat.v1.get_default_graph().get_tensor_by_name('learning_rate:0')
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            history = []
            for _ in range(steps):
                session.run(train_op)
                history.append(session.run([rate, weight]))
            step = session.run(tf.compat.v1.train.get_global_step())
    return np.array(history), step


@pytest.mark.parametrize('optimizer', sorted(training.OPTIMIZERS))
def test_each_optimizer_steps_towards_the_minimum(optimizer):
    history, step = run_steps({'optimizer': optimizer, 'learning_rate': 0.1}, 3)
    assert step == 3
    distances = np.abs(history[:, 1] - 3.0)
    assert distances[-1] < distances[0] < 3.0


def test_learning_rate_decays_10x_every_decay_steps():
    history, _ = run_steps({'optimizer': 'sgd', 'learning_rate': 0.1,
                               'learning_rate_decay_steps': 2}, 4)
    # Read after step n (global step n): 0.1 * 0.1 ** (n / 2).
    np.testing.assert_allclose(history[:, 0], 0.1 * 0.1 ** (np.arange(1, 5) / 2), rtol=1e-5)
    constant, _ = run_steps({'optimizer': 'sgd', 'learning_rate': 0.1}, 3)
    np.testing.assert_allclose(constant[:, 0], 0.1)


def test_the_optimizer_flag_names_every_optimizer():
    assert flag_checks.OPTIMIZER_NAMES == 'adam, sgd or momentum'
    assert list(training.OPTIMIZERS) == ['adam', 'sgd', 'momentum']


def learning_rates(params, steps):
    """The learning rate at global steps 0..steps-1."""
    with tf.Graph().as_default():
        rate = training.learning_rate(params)
        step = tf.compat.v1.train.get_global_step()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return np.array([session.run(rate) for n in range(steps)
                             if session.run(step.assign(n)) == n])


def test_cosine_schedule_after_a_linear_warm_up():
    rates = learning_rates({'learning_rate': 0.1, 'learning_rate_schedule': 'cosine',
                            'learning_rate_decay_steps': 10, 'warmup_steps': 4}, 11)
    cosine = 0.1 * 0.5 * (1 + np.cos(np.pi * np.arange(11) / 10))
    warm = np.minimum(1.0, (np.arange(11) + 1) / 4)
    np.testing.assert_allclose(rates, cosine * warm, rtol=1e-5, atol=1e-7)
    assert rates[-1] == 0.0 and rates[3] > rates[2] > rates[0] > 0


@pytest.mark.parametrize('params, message', [
    ({'learning_rate_schedule': 'linear'}, r'--learning_rate_schedule=linear: use exponential or '
                                           r'cosine'),
    ({'learning_rate_schedule': 'cosine'}, r'cosine needs --learning_rate_decay_steps')])
def test_a_schedule_that_cannot_run_is_named(params, message):
    with tf.Graph().as_default(), pytest.raises(UserError, match=message):
        training.learning_rate({'learning_rate': 0.1, **params})


def test_label_smoothing_moves_the_targets_off_the_corners():
    logits = tf.constant([[2.0, 0.0, -1.0]])
    plain = training.softmax_losses(tf.constant([0]), logits).numpy()
    smoothed = training.softmax_losses(tf.constant([0]), logits, 0.3).numpy()
    log_p = tf.nn.log_softmax(logits).numpy()[0]
    targets = np.array([0.7 + 0.1, 0.1, 0.1])
    np.testing.assert_allclose(smoothed, [-(targets * log_p).sum()], rtol=1e-5)
    np.testing.assert_allclose(plain, [-log_p[0]], rtol=1e-5)
    binary = training.sigmoid_losses(tf.constant([1.0]), tf.constant([3.0]), 0.2).numpy()
    np.testing.assert_allclose(binary, [-(0.9 * np.log(sigmoid(3.0)) + 0.1 * np.log(sigmoid(-3.0)))],
                               rtol=1e-5)
    assert training.label_smoothing({'label_smoothing': 0.3}, tf.estimator.ModeKeys.EVAL) == 0.0


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def one_weight_model_fn(features, labels, mode, params):
    """Predicts its one weight, trained towards 3 by SGD."""
    weight = tf.compat.v1.get_variable('w', initializer=0.0)
    prediction = tf.zeros_like(features['x']) + weight
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=prediction, export_outputs={
            'serving_default': tf.estimator.export.PredictOutput({'weight': prediction})})
    loss = tf.reduce_mean(tf.square(prediction - 3.0))
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=training.train_op(
        loss, {**params, 'optimizer': 'sgd', 'learning_rate': 0.1}, tf.constant(0.0)))


def test_moving_average_of_the_weights_is_what_prediction_and_the_export_use(tmp_path):
    estimator = tf.estimator.Estimator(
        training.with_weight_averaging(one_weight_model_fn), model_dir=str(tmp_path / 'model'),
        params={'moving_average_decay': 0.9})
    def features():
        return {'x': tf.zeros([1])}, tf.zeros([1])
    estimator.train(features, max_steps=5)
    checkpoint = tf.train.load_checkpoint(str(tmp_path / 'model'))
    weight, average = checkpoint.get_tensor('w'), checkpoint.get_tensor('w/ExponentialMovingAverage')
    assert 0 < average < weight < 3  # the average lags the weight
    evaluated = estimator.evaluate(lambda: ({'x': tf.zeros([1])}, tf.zeros([1])), steps=1)
    np.testing.assert_allclose(evaluated['loss'], (average - 3) ** 2, rtol=1e-5)

    def receiver():
        x = tf.compat.v1.placeholder(tf.float32, [None], name='x')
        return tf.estimator.export.ServingInputReceiver({'x': x}, {'x': x})
    export = estimator.export_saved_model(str(tmp_path / 'export'), receiver).decode()
    served = tf.saved_model.load(export).signatures['serving_default'](x=tf.zeros([1]))
    np.testing.assert_allclose(served['weight'].numpy(), [average])
    # Without the param it is the model as it was: evaluation reads the weights.
    plain = tf.estimator.Estimator(training.with_weight_averaging(one_weight_model_fn),
                                   model_dir=str(tmp_path / 'model'), params={})
    evaluated = plain.evaluate(lambda: ({'x': tf.zeros([1])}, tf.zeros([1])), steps=1)
    np.testing.assert_allclose(evaluated['loss'], (weight - 3) ** 2, rtol=1e-5)


def test_moving_average_is_refused_under_a_distribution_strategy():
    averaged = training.with_weight_averaging(one_weight_model_fn)
    with tf.Graph().as_default(), tf.distribute.OneDeviceStrategy('/cpu:0').scope():
        with pytest.raises(UserError, match=r'--moving_average_decay: not with a distribution'):
            averaged({'x': tf.zeros([1])}, tf.zeros([1]), tf.estimator.ModeKeys.TRAIN,
                     {'moving_average_decay': 0.9})


def test_mnist_cnn_with_batch_norm_and_other_widths_trains_its_norm_statistics(tmp_path):
    from models import mnist_cnn
    params = {**mnist_cnn.DEFAULT_PARAMS, 'batch_norm': True, 'conv_filters': (8, 16),
              'dense_units': 32}
    estimator = tf.estimator.Estimator(mnist_cnn.model_fn, model_dir=str(tmp_path), params=params)
    images = np.random.RandomState(0).rand(8, 28, 28, 1).astype(np.float32)
    def unknown_shape():  # as augmentation leaves them
        return tf.compat.v1.placeholder_with_default(images, [None, None, None, None])
    estimator.train(lambda: ({'image': unknown_shape()}, tf.range(8) % 10), max_steps=2)
    checkpoint = tf.train.load_checkpoint(str(tmp_path))
    shapes = checkpoint.get_variable_to_shape_map()
    assert shapes['mnist_cnn/conv2d/kernel'] == [5, 5, 1, 8]
    assert shapes['mnist_cnn/dense/kernel'] == [7 * 7 * 16, 32]
    assert 'mnist_cnn/conv2d/bias' not in shapes  # the norm's offset stands in for it
    moving_mean = checkpoint.get_tensor('mnist_cnn/batch_normalization/moving_mean')
    assert np.abs(moving_mean).sum() > 0


def conv_kernel_shapes(network):
    return [layer.kernel.shape.as_list() for layer in network.layers
            if isinstance(layer, tf.keras.layers.Conv2D)]


def test_mnist_cnn_kernel_sizes_are_per_block_and_must_match_the_blocks():
    from models import blocks, mnist_cnn
    params = {**mnist_cnn.DEFAULT_PARAMS, 'conv_filters': (8, 16, 32),
              'conv_kernel_sizes': (5, 5, 3), 'dense_units': 32}
    network = mnist_cnn.build_network(params)
    network.build([None, *mnist_cnn.IMAGE_SHAPE])
    assert conv_kernel_shapes(network) == [[5, 5, 1, 8], [5, 5, 8, 16], [3, 3, 16, 32]]
    assert blocks.per_block({**params, 'conv_kernel_sizes': ()}, 'conv_kernel_sizes',
                            5) == [5, 5, 5]
    for sizes in [(5, 3), (5, 5, 2.5)]:
        with pytest.raises(UserError, match=r'conv_kernel_sizes=\[(5,3|5,5,2.5)\] must give a '
                                            r'whole number, 1 or more, for each of the 3 blocks'):
            mnist_cnn.build_network({**params, 'conv_kernel_sizes': sizes})


def test_mnist_cnn_blocks_can_stack_convolutions_before_their_pool():
    from models import mnist_cnn
    params = {**mnist_cnn.DEFAULT_PARAMS, 'conv_filters': (8, 16), 'conv_kernel_sizes': (5, 3),
              'convs_per_block': (1, 2), 'dense_units': 32}
    network = mnist_cnn.build_network(params)
    network.build([None, *mnist_cnn.IMAGE_SHAPE])
    assert conv_kernel_shapes(network) == [[5, 5, 1, 8], [3, 3, 8, 16], [3, 3, 16, 16]]
    assert network.layers[-3].kernel.shape.as_list()[0] == 7 * 7 * 16  # one pool per block
    for convs in [(1, 0), (2,)]:
        with pytest.raises(UserError, match=r'convs_per_block=\[.*\] must give a whole number'):
            mnist_cnn.build_network({**params, 'convs_per_block': convs})


def still_model_fn(features, labels, mode, params):
    """A kernel and a bias the loss does not move (zero gradients): only weight decay can; and
    a kernel the loss does not read (no gradient), which nothing trains."""
    tf.compat.v1.get_variable('idle', initializer=tf.ones([2, 2]))
    kernel = tf.compat.v1.get_variable('kernel', initializer=tf.ones([2, 3]))
    bias = tf.compat.v1.get_variable('bias', initializer=tf.ones([3]))
    loss = 0.0 * (tf.reduce_sum(kernel) + tf.reduce_sum(bias) + tf.reduce_sum(features['x']))
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=training.train_op(loss, params))


def trained_kernel_and_bias(model_dir, params, steps, plan=None):
    config = tf.estimator.RunConfig(model_dir=str(model_dir), log_step_count_steps=None)
    estimator = tf.estimator.Estimator(still_model_fn, params=params,
                                       config=plan.run_config(config) if plan else config)
    estimator.train(lambda: tf.data.Dataset.from_tensors(
        ({'x': tf.zeros([2])}, tf.zeros([2]))).repeat(), max_steps=steps)
    checkpoint = tf.train.load_checkpoint(str(model_dir))
    np.testing.assert_allclose(checkpoint.get_tensor('idle'), np.ones([2, 2]))
    return checkpoint.get_tensor('kernel'), checkpoint.get_tensor('bias')


@pytest.mark.parametrize('optimizer', sorted(training.OPTIMIZERS))
def test_weight_decay_shrinks_kernels_by_the_rate_apart_from_the_gradient(tmp_path, optimizer):
    # Adam's L2 penalty would move each weight by about the rate a step whatever its size; the
    # decoupled decay takes 5% of it a step (0.1 x 0.5), biases untouched.
    kernel, bias = trained_kernel_and_bias(tmp_path / 'decayed', {
        'optimizer': optimizer, 'learning_rate': 0.1, 'weight_decay': 0.5}, steps=4)
    np.testing.assert_allclose(kernel, np.full([2, 3], 0.95 ** 4), rtol=1e-5)
    np.testing.assert_allclose(bias, np.ones(3))
    kernel, _ = trained_kernel_and_bias(tmp_path / 'plain', {
        'optimizer': optimizer, 'learning_rate': 0.1}, steps=4)
    np.testing.assert_allclose(kernel, np.ones([2, 3]))


def mirrored_decay_checked(model_dir):
    plan = devices.plan('mirrored', cpu_replicas=2, batch_size=2,
                        devices=devices.Devices(cpu_cores=2, gpus=()))
    kernel, bias = trained_kernel_and_bias(model_dir, {
        'optimizer': 'adam', 'learning_rate': 0.1, 'weight_decay': 0.5}, steps=3, plan=plan)
    np.testing.assert_allclose(kernel, np.full([2, 3], 0.95 ** 3), rtol=1e-5)
    np.testing.assert_allclose(bias, np.ones(3))


def test_weight_decay_under_a_mirrored_strategy_shrinks_each_kernel_once_a_step(tmp_path):
    """In a process of its own: a session shows one CPU as two devices only where no earlier
    test in the process has started TensorFlow's eager context (which has one)."""
    code = ('from tests.test_training import mirrored_decay_checked; '
            f'mirrored_decay_checked({str(tmp_path / "mirrored")!r})')
    result = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True,
                            text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]


def test_a_step_the_loss_scaler_skips_under_mixed_float16_skips_the_weight_decay_too():
    """An infinite gradient: the loss scaler skips the step, decay and all, so every weight stays
    as it was; a finite (here zero) gradient's step still shrinks the kernel by 5%."""
    params = {'optimizer': 'sgd', 'learning_rate': 0.1, 'weight_decay': 0.5}
    with tf.Graph().as_default():
        scale = tf.compat.v1.placeholder(tf.float32, [])
        kernel = tf.compat.v1.get_variable('kernel', initializer=tf.ones([2, 3]))
        bias = tf.compat.v1.get_variable('bias', initializer=tf.ones([3]))

        def model_fn(features, labels, mode, params):
            return training.train_op(scale * (tf.reduce_sum(kernel) + tf.reduce_sum(bias)), params)
        step = precision.with_policy(model_fn, 'mixed_float16')(None, None, 'train', params)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(step, {scale: np.inf})
            np.testing.assert_array_equal(session.run(kernel), np.ones([2, 3]))
            np.testing.assert_array_equal(session.run(bias), np.ones(3))
            session.run(step, {scale: 0.0})
            np.testing.assert_allclose(session.run(kernel), np.full([2, 3], 0.95), rtol=1e-6)
            np.testing.assert_array_equal(session.run(bias), np.ones(3))
