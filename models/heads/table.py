"""The head of a model of your own over a table (ModelSpec input_kind='table',
schema_kind='table'): the canned models' head, made from the schema's label, so loss, metrics,
TensorBoard pictures and TF Serving signatures (serving_default over one tensor per feature,
classify or regress and predict_examples over tf.Example) are theirs whatever network makes
the logits; the training step is every model's (models/training.py)."""
from typing import Dict, List

from common.errors import UserError
from models import precision, training
from models.tables import canned_head, table_columns


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
    features, schema = canned_head.with_class_weights(features, labels, mode, params, params['schema'])
    spec = table_columns.head(schema).create_estimator_spec(
        features=features, mode=mode, logits=precision.float32(logits), labels=labels,
        regularization_losses=list(regularization_losses) or None,
        train_op_fn=lambda loss: training.train_op(loss, params, update_ops=update_ops))
    return canned_head.with_pictures(spec, labels, schema)
