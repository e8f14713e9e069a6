"""What every one-logit binary model shares: logistic loss, metrics and the EstimatorSpec.

A face-pair model computes one logit per pair ("same person" when positive;
labels 1.0 for the same person, 0.0 for different people); csv_mlp one per row.
"""
import tensorflow as tf

from models import eval_pictures, precision, training

# A param that exports alone get: the eval job's decision threshold on the probability, which
# adds a `same_person` output (probability >= it) to serving_default.
SAME_PERSON_THRESHOLD = 'same_person_threshold'


def binary_estimator_spec(logits, labels, mode, params, predictions=None, export_outputs=None,
                          update_ops=(), eval_pictures_fn=None, train_loss=None,
                          regularization_losses=()):
    """eval_pictures_fn(labels, logits): more evaluation pictures ({name: metric op}), if any.
    train_loss: what training minimizes instead of the pairs' logistic loss, if given;
    regularization_losses (a Keras model's `losses`) are added to it."""
    logits = tf.identity(tf.reshape(precision.float32(logits), [-1]), name='logits')
    probability = tf.sigmoid(logits, name='probability')
    predictions = {'probability': probability, 'logit': logits, **(predictions or {})}
    if mode == tf.estimator.ModeKeys.PREDICT:
        served = {'probability': probability}
        if params.get(SAME_PERSON_THRESHOLD) is not None:
            served['same_person'] = tf.greater_equal(
                probability, tf.constant(params[SAME_PERSON_THRESHOLD], tf.float32),
                name='same_person')
        outputs = {'serving_default': tf.estimator.export.PredictOutput(served)}
        outputs.update(export_outputs or {})
        return tf.estimator.EstimatorSpec(mode, predictions=predictions, export_outputs=outputs)

    labels = tf.cast(tf.reshape(labels, [-1]), tf.float32)
    loss = tf.identity(training.estimator_loss(
        training.sigmoid_losses(labels, logits, training.label_smoothing(params, mode)),
        mode),
        name='cross_entropy')
    decisions = tf.cast(probability > 0.5, tf.float32)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            'accuracy': tf.compat.v1.metrics.accuracy(labels, decisions),
            'auc': tf.compat.v1.metrics.auc(labels, probability, num_thresholds=1000,
                                            summation_method='careful_interpolation'),
            'precision': tf.compat.v1.metrics.precision(labels, decisions),
            'recall': tf.compat.v1.metrics.recall(labels, decisions),
            'pr_curve': eval_pictures.pr_curve(labels, probability),
            **(eval_pictures_fn(labels, logits) if eval_pictures_fn else {}),
        })

    return training.train_spec(loss if train_loss is None else train_loss, params,
                               tf.equal(decisions, labels), update_ops, regularization_losses)


def embedding_pair_spec(logits, labels, mode, params, features, embedding_a, embedding_b,
                        update_ops=(), train_loss=None):
    """The spec of a face-pair model that embeds each photo: predictions include both
    embeddings, and the export has an `embed` output (image_a's embedding)."""
    return binary_estimator_spec(
        logits, labels, mode, params, update_ops=update_ops, train_loss=train_loss,
        predictions={'embedding_a': embedding_a, 'embedding_b': embedding_b},
        export_outputs={'embed': tf.estimator.export.PredictOutput({'embedding': embedding_a})},
        eval_pictures_fn=eval_pictures.face_pairs_fn(features))
