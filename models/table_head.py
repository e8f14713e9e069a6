"""The head of a model of your own over a table (ModelSpec input_kind='table',
schema_kind='table'): the canned models' head, made from the schema's label, so loss, metrics,
TensorBoard pictures and TF Serving signatures (serving_default over one tensor per feature,
classify or regress and predict_examples over tf.Example) are theirs whatever network makes
the logits; the training step is every model's (models/training.py)."""
from typing import Dict, List

import tensorflow as tf

from common.errors import UserError
from models import class_weights, eval_pictures, precision, table_columns, training

CLASS_WEIGHT = '__class_weight__'  # the feature the head weighs rows by under --class_weights


def table_feature_columns(schema: Dict, embedding_dimension: int = 8) -> List:
    """The schema's features as the deep canned models read them: numbers normalized by the
    training split's mean and std, text embedded in embedding_dimension dimensions (one
    bucket for other values; a list of any length, the mean of its values' embeddings).
    tf.keras.layers.DenseFeatures(columns)(features) is [batch, D]."""
    return table_columns.deep_columns(schema, embedding_dimension)


def table_logits_dimension(schema: Dict) -> int:
    """The logits the label needs: 1 for a binary or regression label, else one per class."""
    return table_columns.head(schema).logits_dimension


def table_estimator_spec(features, labels, mode, logits, params, update_ops=(),
                         regularization_losses=()):
    """logits [batch, table_logits_dimension(schema)] -> the canned head's EstimatorSpec, trained
    by train_op (params' optimizer and learning-rate schedule); regularization_losses (a Keras
    model's `losses`) are added to training's loss, by the canned head."""
    if params.get('label_smoothing'):
        raise UserError(f'--label_smoothing={params["label_smoothing"]}: the table head has no '
                        'label smoothing; leave it 0')
    features, schema = with_class_weights(features, labels, mode, params, params['schema'])
    spec = table_columns.head(schema).create_estimator_spec(
        features=features, mode=mode, logits=precision.float32(logits), labels=labels,
        regularization_losses=list(regularization_losses) or None, train_op_fn=lambda loss: training.train_op(loss, params, update_ops=update_ops))
    return with_pictures(spec, labels, schema)


def with_class_weights(features, labels, mode, params, schema):
    """features and schema for the head. With --class_weights, a row's weight is a feature of
    its own, CLASS_WEIGHT: its class's weight in training, 1 in evaluation, times the schema's
    weight column if any; the schema returned names it as the weight column."""
    if not params.get('class_weights') or mode == tf.estimator.ModeKeys.PREDICT:
        return features, schema
    label = schema['label']
    if label['task'] != 'classification':
        raise UserError(f'--class_weights={params["class_weights"]}: the label {label["name"]!r} '
                        'is a regression label, with no classes to weigh; leave it out')
    ids = table_columns.label_ids(labels, schema)
    weights = class_weights.example_weights(params, ids, table_columns.class_names(schema), mode)
    if weights is None:  # evaluation: unweighted
        weights = tf.ones_like(ids, tf.float32)
    own = schema.get('weight', {}).get('name')
    if own:
        weights = weights * tf.reshape(tf.cast(features[own], tf.float32), [-1])
    return {**features, CLASS_WEIGHT: weights}, {**schema, 'weight': {'name': CLASS_WEIGHT}}


def with_pictures(spec, labels, schema):
    """Evaluation adds, for a binary label, the PR curve; for several classes, each class's
    accuracy and the confusion matrix (TensorBoard's), to the canned head's metrics."""
    if spec.mode != tf.estimator.ModeKeys.EVAL or schema['label']['task'] != 'classification':
        return spec
    classes = table_columns.class_names(schema)
    label_ids = table_columns.label_ids(labels, schema)
    predicted = tf.reshape(spec.predictions['class_ids'], [-1])
    metrics = dict(spec.eval_metric_ops)
    if len(classes) == 2:
        metrics['pr_curve'] = eval_pictures.pr_curve(
            tf.cast(label_ids, tf.float32), tf.reshape(spec.predictions['logistic'], [-1]))
    else:
        metrics.update(eval_pictures.accuracy_of_each_class(label_ids, predicted, classes))
        metrics['confusion_matrix'] = eval_pictures.confusion_matrix(label_ids, predicted,
                                                                     len(classes))
    return spec._replace(eval_metric_ops=metrics)
