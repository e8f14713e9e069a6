"""The training step every model shares: optimizers, the learning-rate schedule, summaries."""
import numpy as np
import pytest
import tensorflow as tf

from models import training
from trainer.config import flags


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
    assert flags.OPTIMIZER_NAMES == 'adam, sgd or momentum'
    assert list(training.OPTIMIZERS) == ['adam', 'sgd', 'momentum']
