"""Pictures of a whole evaluation, as eval_metric_ops that Estimator writes to TensorBoard.

Each picture is a streaming metric: its update op gathers state over every batch (the K
examples with the highest score, or a confusion matrix) in local variables, and
its value is a serialized image Summary drawn once at the end (models/drawing.py,
through tf.numpy_function). Estimator writes a metric whose value is a Summary
under the metric's name in the eval run; trainer.evaluation.eval_job keeps such values out
of the ledger (they are pictures, not numbers).
"""
import numpy as np
import tensorflow as tf
from tensorboard.plugins.image import summary as image_summary
from tensorboard.plugins.pr_curve import summary as pr_curve_summary

from models import drawing

MISTAKES_TO_SHOW = 24
PAIRS_TO_SHOW = 10


def _local_variable(name, shape, dtype, initial):
    return tf.compat.v1.get_variable(
        name, shape=shape, dtype=dtype, trainable=False,
        initializer=tf.compat.v1.constant_initializer(initial),
        collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES,
                     tf.compat.v1.GraphKeys.METRIC_VARIABLES])


def streaming_top_k(scores, tensors, k, name):
    """The k examples with the highest score over all batches; -inf scores are never kept.

    tensors: {key: [batch, ...] tensor with a fully known shape past the batch}.
    Returns ({'score': [k], key: [k, ...]}, update_op); unfilled slots have score -inf.
    """
    with tf.compat.v1.variable_scope(None, default_name=name):
        kept = {'score': _local_variable('score', [k], tf.float32, -np.inf)}
        for key, tensor in tensors.items():
            kept[key] = _local_variable(key, [k] + tensor.shape[1:].as_list(), tensor.dtype, 0)
        new = {'score': tf.cast(scores, tf.float32), **tensors}
        joined = {key: tf.concat([kept[key], new[key]], axis=0) for key in kept}
        _, best = tf.math.top_k(joined['score'], k=k, sorted=True)
        update = tf.group(*[kept[key].assign(tf.gather(joined[key], best)) for key in kept])
        return {key: variable.read_value() for key, variable in kept.items()}, update


def image_metric(name, draw, inputs, description):
    """(Summary of the picture draw(*inputs) returns as uint8 [H, W, 3], a no-op update)."""
    picture = tf.numpy_function(draw, inputs, tf.uint8, stateful=False)
    picture = tf.reshape(picture, tf.concat([[1], tf.shape(picture)], axis=0))
    return image_summary.op(name, picture, max_outputs=1, description=description,
                            collections=[])


def class_legend(class_names) -> str:
    """' Classes: 0 cat, 1 dog.': what the pictures' class numbers name ('' without names)."""
    if not class_names:
        return ''
    return ' Classes: ' + ', '.join(f'{i} {name}' for i, name in enumerate(class_names)) + '.'


PER_CLASS_ACCURACY = 'accuracy_of_class/'


def accuracy_of_each_class(labels, classes, class_names):
    """eval_metric_ops: the accuracy on each class's examples (its recall), as scalars
    'accuracy_of_class/NAME' (TensorBoard draws them together; the ledger keeps them).

    A class with no example in the evaluated data reads NaN, not 0.0 (TF's mean over nothing):
    there is no accuracy to give, and the eval job leaves it out of the ledger."""
    labels = tf.cast(tf.reshape(labels, [-1]), tf.int64)
    metrics = {}
    for index, name in enumerate(class_names):
        of_class = tf.equal(labels, index)
        accuracy, accuracy_update = tf.compat.v1.metrics.accuracy(
            labels, classes, weights=tf.cast(of_class, tf.float32),
            name=f'accuracy_of_class_{index}')
        seen, seen_update = tf.compat.v1.metrics.true_positives(
            of_class, of_class, name=f'examples_of_class_{index}')
        metrics[PER_CLASS_ACCURACY + name] = (
            tf.where(seen > 0, accuracy, tf.constant(np.nan, accuracy.dtype)),
            tf.group(accuracy_update, seen_update))
    return metrics


def class_pictures(labels, classes, num_classes, class_names=None):
    """eval_metric_ops of a head over N classes: each class's accuracy (with class_names) and
    the confusion matrix, its legend naming the classes."""
    return {**(accuracy_of_each_class(labels, classes, class_names) if class_names else {}),
            'confusion_matrix': confusion_matrix(labels, classes, num_classes, class_names)}


def most_confident_mistakes(images, labels, classes, probabilities, count=MISTAKES_TO_SHOW,
                            class_names=None):
    """eval_metric_ops entry: a grid of the mistakes the model was surest of."""
    labels = tf.cast(tf.reshape(labels, [-1]), tf.int64)
    confidence = tf.reduce_max(probabilities, axis=1)
    wrong = tf.not_equal(labels, classes)
    scores = tf.where(wrong, confidence, tf.fill(tf.shape(confidence), -np.inf))
    kept, update = streaming_top_k(scores, {'image': images, 'label': labels, 'class': classes},
                                   count, 'most_confident_mistakes')

    def draw(score, image, label, predicted):
        shown = np.isfinite(score)
        return drawing.mistake_grid(image[shown], label[shown], predicted[shown], score[shown])

    return image_metric('most_confident_mistakes', draw,
                        [kept['score'], kept['image'], kept['label'], kept['class']],
                        f'The {count} mistakes of highest confidence: T true class > P predicted '
                        'class, and the probability the model gave its prediction.'
                        + class_legend(class_names)), update


def confusion_matrix(labels, classes, num_classes, class_names=None):
    """eval_metric_ops entry: the confusion matrix as a heat map (rows true, columns predicted)."""
    with tf.compat.v1.variable_scope(None, default_name='confusion_matrix'):
        counts = _local_variable('counts', [num_classes, num_classes], tf.int64, 0)
        update = counts.assign_add(tf.math.confusion_matrix(
            tf.reshape(labels, [-1]), classes, num_classes, dtype=tf.int64))
        return image_metric('confusion_matrix', drawing.confusion_image, [counts.read_value()],
                            'Rows: true class (T); columns: predicted class (P); each cell holds '
                            'its count and is shaded by its share of the row.'
                            + class_legend(class_names)), update


def hardest_pairs(images_a, images_b, labels, logits, count=PAIRS_TO_SHOW):
    """eval_metric_ops entry: the pairs with the highest loss, with truth and score."""
    labels = tf.cast(tf.reshape(labels, [-1]), tf.float32)
    logits = tf.reshape(logits, [-1])
    probability = tf.sigmoid(logits)
    loss = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    kept, update = streaming_top_k(
        loss, {'image_a': images_a, 'image_b': images_b, 'label': labels,
               'probability': probability}, count, 'hardest_pairs')

    def draw(score, image_a, image_b, label, probability):
        shown = np.isfinite(score)
        return drawing.pair_strip(image_a[shown], image_b[shown], label[shown], probability[shown])

    return image_metric('hardest_pairs', draw,
                        [kept['score'], kept['image_a'], kept['image_b'], kept['label'],
                         kept['probability']],
                        f'The {count} pairs of highest loss: photo a over photo b, the truth '
                        '(SAME or DIFF person) and the same-person probability (red: wrong side '
                        'of 0.5).'), update


def face_pairs_fn(features):
    """heads.binary_estimator_spec's eval_pictures_fn for face-pair models."""
    return lambda labels, logits: {'hardest_pairs': hardest_pairs(
        features['image_a'], features['image_b'], labels, logits)}


def pr_curve(labels, probability):
    """eval_metric_ops entry for TensorBoard's PR Curves dashboard."""
    return pr_curve_summary.streaming_op(
        'pr_curve', labels=tf.cast(tf.reshape(labels, [-1]) > 0.5, tf.bool),
        predictions=probability, num_thresholds=201,
        description='Precision against recall at 201 thresholds on the probability.')
