"""Feature columns made from a table's schema (input_fns/tables/table_schema.py), for the canned models.

Numbers are normalized with the schema's mean and std (training-split statistics); text columns
look their values up in the schema's vocabulary (one bucket for every other value and for a
missing one), free text its words (features/free_text.py); a date is its parts (features/iso_dates.py: days as a number, month, day and hour
as text); the deep part embeds them, the linear part takes them as indicators, with
--crosses of columns (numbers bucketized at the schema's quantiles) hashed into buckets.
"""
from typing import Dict, List

import numpy as np
import tensorflow as tf

from common.errors import UserError
from features import model_features, value_lists

fc = tf.feature_column
# How a fixed-length number list is normalized: by all its values' mean and std ('list') or
# each position's ('position'). On MNIST as the article's records, dnn_classifier 2,000 steps:
# 97.13% validation accuracy with 'list', 96.67% with 'position' (docs/your-data.md#lists).
LIST_NORMALIZATION = 'list'


def _normalizer(mean, std):
    """(value - mean) / std, where std > 0; mean and std: numbers, or one for each position of a
    fixed-length list."""
    std = np.asarray(std, np.float32)
    scale = np.where(std > 0, 1.0 / np.where(std > 0, std, 1.0), 1.0).astype(np.float32)
    mean = np.asarray(mean, np.float32)
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
    """One number, or a fixed-length list as one [N] column, normalized: a list by the mean and
    std of all its values, or of each position (LIST_NORMALIZATION)."""
    length = value_lists.form(entry)
    if length is None:
        return fc.numeric_column(entry['name'],
                                 normalizer_fn=_normalizer(entry['mean'], entry['std']))
    if length == value_lists.RAGGED:
        raise UserError(f'feature {entry["name"]!r}: lists of floats of any length, which the '
                        'canned models cannot read as one column; leave it out with prepare '
                        f'--ignore_columns={entry["name"]}, or read it in a model of your own '
                        '(--usr_dir: docs/your-model.md)')
    if LIST_NORMALIZATION == 'position':
        mean, std = value_lists.position_means(entry), entry.get('position_std', entry['std'])
    else:
        mean, std = entry['mean'], entry['std']
    return fc.numeric_column(entry['name'], shape=(length,), normalizer_fn=_normalizer(mean, std))


def is_categorical(entry: Dict) -> bool:
    """Looked up in a vocabulary: text, words, and variable-length lists of text or ints."""
    return entry['dtype'] in model_features.CATEGORICAL or (
        value_lists.is_ragged(entry) and entry['dtype'] != 'float')


def categorical(entry: Dict):
    """A value's place in the vocabulary (one bucket for the rest); a variable-length list's
    values each, so the linear models sum their weights (multi-hot) and the deep ones average
    their embeddings (an embedding bag)."""
    return fc.categorical_column_with_vocabulary_list(
        entry['name'], entry['vocabulary'], num_oov_buckets=1,
        dtype=tf.int64 if entry['dtype'] == 'int' else tf.string)


def deep_columns(schema: Dict, embedding_dimension: int) -> List:
    """Numbers normalized; text embedded in embedding_dimension dimensions (free text and
    variable-length lists: the mean of their values')."""
    return [fc.embedding_column(categorical(entry), embedding_dimension)
            if is_categorical(entry) else numeric(entry) for entry in features(schema)]


def linear_columns(schema: Dict, params: Dict) -> List:
    """Numbers normalized, text as vocabulary columns, and the crosses of params['crosses']."""
    entries = features(schema)
    columns = [categorical(entry) if is_categorical(entry) else numeric(entry)
               for entry in entries]
    by_name = {entry['name']: entry for entry in entries}
    for cross in parse_crosses(params.get('crosses', '')):
        parts = []
        for name in cross:
            if name not in by_name:
                raise UserError(f'--crosses: no feature {name!r}; the features: '
                                f'{", ".join(by_name)}')
            entry = by_name[name]
            parts.append(categorical(entry) if is_categorical(entry) else
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
