"""What the service adds to tf.estimator's canned head over a table's schema, for the canned
models and for a network of yours over a table (models/heads/table.py) alike: --class_weights
as a weight feature, and the evaluation pictures."""
import tensorflow as tf

from common.errors import UserError
from models import class_weights, eval_pictures
from models.tables import table_columns

CLASS_WEIGHT = '__class_weight__'  # the feature the head weighs rows by under --class_weights


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
        metrics.update(eval_pictures.class_pictures(label_ids, predicted, len(classes), classes))
    return spec._replace(eval_metric_ops=metrics)
