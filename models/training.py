"""The training step every model shares: optimizer, learning-rate schedule, label smoothing and
an exponential moving average of the weights, all from params (so the tuners reach each one)."""
import tensorflow as tf

from common.errors import UserError
from models import precision

OPTIMIZERS = {
    'adam': lambda rate: tf.compat.v1.train.AdamOptimizer(rate),
    'sgd': lambda rate: tf.compat.v1.train.GradientDescentOptimizer(rate),
    'momentum': lambda rate: tf.compat.v1.train.MomentumOptimizer(rate, momentum=0.9),
}
SCHEDULES = ('exponential', 'cosine')
# The params every model's training step reads: each model's DEFAULT_PARAMS starts from these.
TRAINING_PARAMS = {
    'learning_rate': 1e-3,
    'optimizer': 'adam',  # adam | sgd | momentum
    # exponential: decayed by learning_rate_decay_rate every learning_rate_decay_steps (constant
    # when those are 0); cosine: from the rate to 0 over learning_rate_decay_steps.
    'learning_rate_schedule': 'exponential',
    'learning_rate_decay_steps': 0,
    'learning_rate_decay_rate': 0.1,
    # The rate rises linearly from 0 over the first warmup_steps (with cosine: one-cycle's shape).
    'warmup_steps': 0,
    'label_smoothing': 0.0,  # training's targets: (1 - s) * one-hot + s / classes
    # > 0: training keeps an exponential moving average of the weights (this decay), and
    # evaluation and exports use the averaged weights (with_weight_averaging).
    'moving_average_decay': 0.0,
    # > 0: each step every kernel (a weight of rank 2 or more: not a bias, a batch norm's scale
    # or offset, a learned scalar) shrinks by the learning rate times this, apart from the
    # gradient's step: AdamW's decoupled weight decay (Loshchilov and Hutter, 2019), which Adam's
    # L2 penalty is not; with sgd it is an L2 penalty of half this.
    'weight_decay': 0.0,
}


def learning_rate(params):
    """params['learning_rate'] on params['learning_rate_schedule'], after the warm-up; past
    params['freeze_backbone_steps'] (when given), params['fine_tune_learning_rate'] instead."""
    rate, step = params['learning_rate'], tf.compat.v1.train.get_or_create_global_step()
    frozen_steps = params.get('freeze_backbone_steps') or 0
    if frozen_steps:  # a backbone frozen, then fine-tuned at its own rate (models/backbones.py)
        rate = tf.where(step < frozen_steps, float(rate), float(params['fine_tune_learning_rate']))
    schedule = params.get('learning_rate_schedule', 'exponential')
    decay_steps = params.get('learning_rate_decay_steps') or 0
    if schedule not in SCHEDULES:
        raise UserError(f'--learning_rate_schedule={schedule}: use {" or ".join(SCHEDULES)}')
    if schedule == 'cosine':
        if not decay_steps:
            raise UserError('--learning_rate_schedule=cosine needs --learning_rate_decay_steps '
                            '(the steps it decays over, usually --train_steps)')
        rate = tf.compat.v1.train.cosine_decay(rate, step, decay_steps)
    elif decay_steps:
        rate = tf.compat.v1.train.exponential_decay(
            rate, step, decay_steps, params.get('learning_rate_decay_rate', 0.1))
    warmup_steps = params.get('warmup_steps') or 0
    if warmup_steps:
        warmed = tf.minimum(1.0, tf.cast(step + 1, tf.float32) / float(warmup_steps))
        rate = rate * warmed
    return tf.identity(rate, name='learning_rate')


def label_smoothing(params, mode) -> float:
    """Label smoothing shapes training's targets only: evaluation's loss is the plain one."""
    return params.get('label_smoothing', 0.0) if mode == tf.estimator.ModeKeys.TRAIN else 0.0


def softmax_losses(labels, logits, smoothing: float = 0.0):
    """Per-example cross entropy of integer labels against logits [N, classes]."""
    if not smoothing:
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    classes = tf.shape(logits)[-1]
    targets = (tf.one_hot(labels, classes) * (1.0 - smoothing)
               + smoothing / tf.cast(classes, tf.float32))
    return tf.nn.softmax_cross_entropy_with_logits(labels=targets, logits=logits)


def sigmoid_losses(labels, logits, smoothing: float = 0.0):
    """Per-example logistic loss of 0/1 float labels, smoothed towards 1/2."""
    targets = labels * (1.0 - smoothing) + 0.5 * smoothing if smoothing else labels
    return tf.nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=logits)


def with_weight_averaging(model_fn):
    """model_fn that, when params['moving_average_decay'] > 0, keeps an exponential moving
    average of the trainable weights in training, and evaluates and exports the averages: the
    Saver of evaluation and export graphs restores each weight from its average
    (ExponentialMovingAverage.variables_to_restore), so the SavedModel holds them as the
    weights themselves and serving needs nothing of it."""
    def model_fn_averaging(features, labels, mode, params):  # the names Estimator reads
        decay = (params or {}).get('moving_average_decay') or 0.0
        if decay and tf.distribute.has_strategy():
            raise UserError('--moving_average_decay: not with a distribution strategy (several '
                            'GPUs, replicas or workers); train without it, or on one device')
        spec = model_fn(features, labels, mode, params)
        if not decay:
            return spec
        average = tf.compat.v1.train.ExponentialMovingAverage(
            decay, num_updates=tf.compat.v1.train.get_or_create_global_step())
        if mode == tf.estimator.ModeKeys.TRAIN:
            with tf.control_dependencies([spec.train_op]):
                train_op = average.apply(tf.compat.v1.trainable_variables())
            return spec._replace(train_op=train_op)
        saver = tf.compat.v1.train.Saver(average.variables_to_restore(), sharded=True)
        return spec._replace(scaffold=tf.compat.v1.train.Scaffold(saver=saver))

    return model_fn_averaging


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


def regularized(loss, regularization_losses=()):
    """The training loss with the layers' regularization losses (a Keras model's `losses`)
    added: what training minimizes and reports; evaluation's loss stays the data's alone, so
    it compares across models."""
    if not regularization_losses:
        return loss
    return tf.add_n([loss, *(precision.float32(term) for term in regularization_losses)],
                    name='regularized_loss')


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


def train_spec(loss, params, correct, update_ops=(), regularization_losses=()):
    """The TRAIN EstimatorSpec every head ends in: loss plus regularization_losses (a Keras
    model's `losses`), minimized by train_op, with the batch accuracy (the mean of correct, a
    bool [batch]) summarized under evaluation's tag."""
    batch_accuracy = tf.reduce_mean(tf.cast(correct, tf.float32), name='train_accuracy')
    loss = regularized(loss, regularization_losses)
    return tf.estimator.EstimatorSpec(tf.estimator.ModeKeys.TRAIN, loss=loss,
                                      train_op=train_op(loss, params, batch_accuracy, update_ops))


def train_op(loss, params, batch_accuracy=None, update_ops=()):
    """Minimizes loss with params['optimizer'] at params['learning_rate'] (decayed as
    learning_rate says), loss-scaled under --precision=mixed_float16, with params['weight_decay']
    decoupled from it; summarizes the learning rate and, when given, the batch accuracy.

    update_ops (e.g. a Keras model's batch-norm moving averages) run with each step.
    """
    mark_model_variables()
    rate = learning_rate(params)
    scalar_summary('learning_rate', rate)
    if batch_accuracy is not None:
        scalar_summary('accuracy', batch_accuracy)  # the tag evaluation uses: one chart for both
    # Decay inside the optimizer's apply: the loss scaler skips it with the update.
    optimizer = precision.loss_scaled(WeightDecayed(OPTIMIZERS[params['optimizer']](rate), rate,
                                                    params.get('weight_decay') or 0.0))
    with tf.control_dependencies(list(update_ops)):
        return optimizer.apply_gradients(
            optimizer.compute_gradients(loss),
            global_step=tf.compat.v1.train.get_or_create_global_step())


class WeightDecayed(tf.compat.v1.train.Optimizer):
    """A v1 optimizer whose apply_gradients also shrinks the kernels (decayed_kernels): one step,
    so a step the loss scaler skips (non-finite gradients) leaves every weight as it was.

    The optimizer given does the update, under its own name: its slots keep their names."""

    def __init__(self, optimizer: tf.compat.v1.train.Optimizer, rate, weight_decay: float):
        super().__init__(use_locking=False, name=optimizer.get_name())
        self._optimizer, self._rate, self._weight_decay = optimizer, rate, weight_decay

    def compute_gradients(self, *args, **kwargs):
        return self._optimizer.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = list(grads_and_vars)
        # The decay reads each kernel after the gradient has: the step is taken at one point.
        trained = [(gradient, variable) for gradient, variable in grads_and_vars
                   if gradient is not None]
        with tf.control_dependencies([gradient for gradient, _ in trained]):
            decay = decayed_kernels([variable for _, variable in trained], self._rate,
                                    self._weight_decay)
        with tf.control_dependencies(decay):
            return self._optimizer.apply_gradients(grads_and_vars, global_step, name)

    def get_slot(self, var, name):
        return self._optimizer.get_slot(var, name)

    def get_slot_names(self):
        return self._optimizer.get_slot_names()

    def variables(self):
        return self._optimizer.variables()


def mark_model_variables():
    """Puts the graph's variables so far, but the global step, in the MODEL_VARIABLES
    collection: the model's own (weights, batch-norm statistics), not the optimizer's slots,
    loss scale and averages that train_op and its wrappers make after. A warm start
    (--warm_start_from) fills these, and only these."""
    marked = {variable.name for variable in
              tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.MODEL_VARIABLES)}
    step = tf.compat.v1.train.get_global_step()
    for variable in tf.compat.v1.global_variables():
        if variable is not step and variable.name not in marked:
            tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.MODEL_VARIABLES, variable)


def decayed_kernels(variables, rate, weight_decay: float):
    """Ops that multiply each kernel among variables by 1 - rate * weight_decay (none at 0).

    Through the replica context's merge_call, as an optimizer applies its update: under a
    distribution strategy each mirrored copy is updated once, by its own device."""
    kernels = [variable for variable in variables if variable.shape.rank >= 2]
    if not kernels or not weight_decay:
        return []

    def scale(kernel, factor):
        return kernel.assign(kernel * tf.cast(factor, kernel.dtype), read_value=False)

    def update_all(strategy, factor):
        return [strategy.extended.update(kernel, scale, args=(factor,), group=True)
                for kernel in kernels]

    factor = 1.0 - rate * weight_decay
    return tf.distribute.get_replica_context().merge_call(update_all, args=(factor,))
