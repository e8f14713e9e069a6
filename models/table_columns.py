"""Feature columns made from a table's schema (input_fns/tables/table_schema.py), for the canned models.

Numbers are normalized with the schema's mean and std (training-split statistics); text columns
look their values up in the schema's vocabulary (one bucket for every other value and for a
missing one), free text its words (features/free_text.py); a date is its parts (features/iso_dates.py: days as a number, month, day and hour
as text); the deep part embeds them, the linear part takes them as indicators, with
--crosses of columns (numbers bucketized at the schema's quantiles) hashed into buckets.
"""
from typing import Dict, List

import tensorflow as tf

from common.errors import UserError
from features import model_features

fc = tf.feature_column


def _normalizer(mean: float, std: float):
    scale = 1.0 / std if std > 0 else 1.0
    return lambda values: (tf.cast(values, tf.float32) - mean) * scale


def features(schema: Dict) -> List[Dict]:
    """The schema's features the model reads: those with a value in the training split, and
    those derived from them (features/model_features.py: a date's parts, a number's missing)."""
    return [derived for entry in schema['features'] if entry.get('count')
            for derived in model_features.model_entries(entry)]


def boundaries(entry: Dict) -> List[float]:
    """Bucket boundaries at a number column's quantiles (each once)."""
    return sorted(set(entry.get('quantiles', [])[1:-1]))


def numeric(entry: Dict):
    return fc.numeric_column(entry['name'], normalizer_fn=_normalizer(entry['mean'], entry['std']))


def categorical(entry: Dict):
    return fc.categorical_column_with_vocabulary_list(entry['name'], entry['vocabulary'],
                                                      num_oov_buckets=1)


def deep_columns(schema: Dict, embedding_dimension: int) -> List:
    """Numbers normalized; text embedded in embedding_dimension dimensions (free text: the mean
    of its words')."""
    return [numeric(entry) if entry['dtype'] not in model_features.CATEGORICAL
            else fc.embedding_column(categorical(entry), embedding_dimension)
            for entry in features(schema)]


def linear_columns(schema: Dict, params: Dict) -> List:
    """Numbers normalized, text as vocabulary columns, and the crosses of params['crosses']."""
    entries = features(schema)
    columns = [numeric(entry) if entry['dtype'] not in model_features.CATEGORICAL
               else categorical(entry) for entry in entries]
    by_name = {entry['name']: entry for entry in entries}
    for cross in parse_crosses(params.get('crosses', '')):
        parts = []
        for name in cross:
            if name not in by_name:
                raise UserError(f'--crosses: no feature {name!r}; the features: '
                                f'{", ".join(by_name)}')
            entry = by_name[name]
            parts.append(categorical(entry) if entry['dtype'] in model_features.CATEGORICAL else
                         fc.bucketized_column(fc.numeric_column(name), boundaries(entry)))
        columns.append(fc.crossed_column(parts, params['cross_hash_buckets']))
    return columns


def parse_crosses(text: str) -> List[List[str]]:
    """'a:b,c:d' (or 'a:b c:d') -> [['a', 'b'], ['c', 'd']]."""
    crosses = [item.split(':') for item in text.replace(',', ' ').split()]
    for cross in crosses:
        if len(cross) < 2 or not all(cross):
            raise UserError(f'--crosses: {":".join(cross)!r} is not a cross; write two or more '
                            'feature names joined by colons, e.g. --crosses=age:education')
    return crosses


def position_in(values: tf.Tensor, names: List[str]) -> tf.Tensor:
    """[batch] int32: each value's place in names, len(names) for a value not among them."""
    found = tf.equal(tf.reshape(values, [-1])[:, None], tf.constant(names)[None, :])
    return tf.where(tf.reduce_any(found, axis=1),
                    tf.argmax(tf.cast(found, tf.int32), axis=1, output_type=tf.int32), len(names))


def class_names(schema: Dict) -> List[str]:
    """The label's classes as the heads name them (text: a label of ints reads '0', '1'...)."""
    return [str(value) for value in schema['label']['classes']]


def label_ids(labels: tf.Tensor, schema: Dict) -> tf.Tensor:
    """[batch] class names (as the heads take them) -> [batch] int64 places in the schema's
    classes (the heads' class_ids' type)."""
    return tf.cast(position_in(labels, class_names(schema)),
                   tf.int64)


def label_scale(schema: Dict):
    """(mean, std) of a regression label in the training split."""
    label = schema['label']
    return label.get('mean', 0.0), label.get('std') or 1.0


def head(schema: Dict):
    """The canned head the label calls for: binary, multi-class (the schema's classes as the
    label vocabulary) or regression; rows weighted by the schema's weight column, if any.

    A regression head predicts logits * std + mean (the label's training statistics): every
    model starts at the mean and moves in units of the label's spread, so a price in the
    hundreds of thousands trains as a z-score does; the loss stays the squared error in the
    label's own units."""
    label = schema['label']
    weight = schema.get('weight', {}).get('name')
    if label['task'] == 'regression':
        mean, std = label_scale(schema)

        def in_label_units(logits):
            return logits * std + mean

        return tf.estimator.RegressionHead(
            weight_column=weight, inverse_link_fn=in_label_units,
            loss_fn=lambda labels, logits: tf.math.squared_difference(labels,
                                                                      in_label_units(logits)))
    classes = class_names(schema)
    if len(classes) < 2:
        raise UserError(f'the label {label["name"]!r} has {len(classes)} class in the training '
                        'split; a classifier needs two or more')
    if len(classes) == 2:
        return tf.estimator.BinaryClassHead(weight_column=weight, label_vocabulary=classes)
    return tf.estimator.MultiClassHead(len(classes), weight_column=weight,
                                       label_vocabulary=classes)
