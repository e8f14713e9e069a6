"""The training step every model shares: optimizer and learning-rate schedule from params."""
import tensorflow as tf

from models import precision

# The params train_op reads, with the values a model starts from unless it sets its own
# (each also a trainer flag: --learning_rate, --optimizer, --learning_rate_decay_steps).
TRAINING_PARAMS = {
    'learning_rate': 1e-3,
    'optimizer': 'adam',  # adam | sgd | momentum
    'learning_rate_decay_steps': 0,  # 0: constant
}
OPTIMIZERS = {
    'adam': lambda rate: tf.compat.v1.train.AdamOptimizer(rate),
    'sgd': lambda rate: tf.compat.v1.train.GradientDescentOptimizer(rate),
    'momentum': lambda rate: tf.compat.v1.train.MomentumOptimizer(rate, momentum=0.9),
}


def learning_rate(params):
    """params['learning_rate'], decayed 10x every learning_rate_decay_steps when that is set."""
    rate = params['learning_rate']
    if params.get('learning_rate_decay_steps'):
        rate = tf.compat.v1.train.exponential_decay(
            rate, tf.compat.v1.train.get_or_create_global_step(),
            params['learning_rate_decay_steps'], params.get('learning_rate_decay_rate', 0.1))
    return tf.identity(rate, name='learning_rate')


def estimator_loss(per_example_losses, mode):
    """The loss an EstimatorSpec takes: the batch mean, except in evaluation.

    Estimator's evaluation `loss` is the mean of the loss it is given over batches, so a
    batch-mean loss counts the last, partial batch as much as a full one and the result
    changes with --batch_size. Given the per-example losses, that mean weighs every example
    once. Their rank is hidden: EstimatorSpec would reshape a known vector to a scalar.
    """
    per_example_losses = tf.reshape(per_example_losses, [-1])
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.compat.v1.placeholder_with_default(per_example_losses, shape=None)
    return tf.reduce_mean(per_example_losses)


def scalar_summary(tag, value):
    """A training summary under exactly `tag`, like Estimator's own `loss`.

    tf.compat.v1.summary.scalar takes its tag from a unique op name, so a tensor of the
    same name (learning_rate, or the accuracy metric's scope) would make it `tag_1`.
    Under MirroredStrategy every replica builds the model_fn; a tag may appear once in a
    step's summaries, so only the first replica writes it.
    """
    replica = tf.distribute.get_replica_context()
    if replica is not None and tf.get_static_value(replica.replica_id_in_sync_group) not in (0, None):
        return
    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SUMMARIES,
                                   tf.raw_ops.ScalarSummary(tags=tag, values=value))


def train_op(loss, params, batch_accuracy=None, update_ops=()):
    """Minimizes loss with params['optimizer'] at params['learning_rate'] (decayed as
    learning_rate says), loss-scaled under --precision=mixed_float16; summarizes the learning
    rate and, when given, the batch accuracy.

    update_ops (e.g. a Keras model's batch-norm moving averages) run with each step.
    """
    rate = learning_rate(params)
    scalar_summary('learning_rate', rate)
    if batch_accuracy is not None:
        scalar_summary('accuracy', batch_accuracy)  # the tag evaluation uses: one chart for both
    optimizer = precision.loss_scaled(OPTIMIZERS[params['optimizer']](rate))
    with tf.control_dependencies(list(update_ops)):
        return optimizer.minimize(loss, global_step=tf.compat.v1.train.get_or_create_global_step())
