"""Table shards of tf.Example (input_fns/tables/table_records.py), read as the model's schema says.

Serving: `serving_default` takes one tensor per feature ([N] each, named as in the schema; a
fixed-length list [N, length], one of any length [N, M] padded: _served), so TF
Serving's REST body {"instances": [{"age": 39, "workclass": "Private", ...}]} reaches it;
`classify` (classifiers) or `regress` (regressors) take serialized tf.Example protos, TF
Serving's Classify and Regress APIs; `predict_examples` is the full prediction on tf.Examples.
"""
from typing import Dict

import numpy as np
import tensorflow as tf

from features import value_lists
from input_fns.tables import table_reading, table_records
from trainer.input_kinds import base, registry

FEATURES_RECEIVER = 'features'  # the receiver alternative that takes a tensor per feature


class Table(base.WithoutAugmentation, base.RecordFileKind):
    records_are = 'table rows'
    name = 'table'
    records = table_records
    parse_in_windows = True  # small records: see pipeline.process_record_dataset
    # Estimator names the signatures '<receiver>:<output>' for the alternative receiver; the
    # canned heads' outputs are serving_default, classification or regression, and predict.
    signature_renames = {
        'serving_default': None, 'classification': 'classify', 'regression': 'regress',
        'predict': 'predict_examples', f'{FEATURES_RECEIVER}:predict': 'serving_default',
        f'{FEATURES_RECEIVER}:serving_default': None,
        f'{FEATURES_RECEIVER}:classification': None, f'{FEATURES_RECEIVER}:regression': None}

    def record_shape(self, spec):
        return spec.schema

    def serving_receiver_fn(self, spec, options):
        """Serialized tf.Examples ('inputs'), or, as the alternative, one tensor per feature:
        feeding a feature's placeholder cuts off the parsing upstream of it. The model also gets
        what it derives from them (a date's parts, a number's missing: with_derived)."""
        feature_spec = table_records.feature_spec(spec.schema, with_label=False)

        entries = {entry['name']: entry for entry in spec.schema['features']}

        def receiver_fn():
            examples = tf.compat.v1.placeholder(tf.string, [None], name='examples')
            parsed = tf.io.parse_example(examples, feature_spec)
            inputs, features = {}, {}
            for name in sorted(parsed):
                inputs[name], features[name] = _served(name, parsed[name], entries[name])
            return tf.estimator.export.ServingInputReceiver(
                table_records.with_derived(features, spec.schema),
                {tf.saved_model.CLASSIFY_INPUTS: examples},
                receiver_tensors_alternatives={FEATURES_RECEIVER: inputs})

        return receiver_fn

    def example_schemas(self):
        """A binary, a three-class and a regression table of two features."""
        features = [{'name': 'number', 'dtype': 'float', 'count': 2, 'missing': 0, 'mean': 0.0,
                     'std': 1.0, 'min': -1.0, 'max': 1.0, 'quantiles': [-1.0, 0.0, 1.0]},
                    {'name': 'text', 'dtype': 'string', 'count': 2, 'missing': 0,
                     'vocabulary': ['a', 'b'], 'vocabulary_counts': [1, 1], 'oov_count': 0}]
        labels = [{'dtype': 'string', 'task': 'classification', 'classes': classes}
                  for classes in (['no', 'yes'], ['a', 'b', 'c'])]
        labels.append({'dtype': 'float', 'task': 'regression'})
        return [{'kind': 'table', 'features': features, 'label': {'name': 'label', **label}}
                for label in labels]

    def example_label_dtype(self, spec):
        return tf.string if spec.schema['label']['task'] == 'classification' else tf.float32

    def warmup_inputs(self, spec, options):
        """A row of each feature's fill value (its mean, or ''), as tensors and as a tf.Example."""
        row = typical_row(spec.schema)
        names = sorted(row)
        example = table_records.encode_example(
            names, [_dtype(spec.schema, name) for name in names], [row[name] for name in names])
        return {tf.saved_model.CLASSIFY_INPUTS: np.array([example], object),
                **{name: np.array([value], _NUMPY_DTYPES[_dtype(spec.schema, name)])
                   for name, value in row.items()}}

    def serving_reading(self, spec):
        """The schema's record of how prepare read the rows (input_fns/tables/table_reading.py)."""
        return table_reading.reading_record(spec.schema)


def _served(name: str, parsed, entry: Dict):
    """(the features receiver's input, what the model gets) of a parsed feature: [N] for one
    value, [N, length] for a fixed-length list; a variable-length list is input as [N, M]
    padded with value_lists.PADDING, and the model gets its SparseTensor, as in training."""
    list_form = value_lists.form(entry)
    if list_form != value_lists.RAGGED:
        served = tf.compat.v1.placeholder_with_default(
            parsed, [None] + ([list_form] if list_form else []), name=name)
        return served, served
    pad = value_lists.PADDING[entry['dtype']]
    padded = tf.compat.v1.placeholder_with_default(
        parsed.to_tensor(default_value=tf.constant(pad, parsed.dtype)), [None, None], name=name)
    return padded, value_lists.dense_to_sparse(padded, entry['dtype'])


_NUMPY_DTYPES = {'int': np.int64, 'float': np.float32, 'date': object, 'string': object,
                 'text': object}


def _dtype(schema: Dict, name: str) -> str:
    return next(entry['dtype'] for entry in schema['features'] if entry['name'] == name)


def typical_row(schema: Dict) -> Dict:
    """{feature: its fill value}: each number's mean, each text's most frequent value, each
    date's first (so warm-up runs a date through its parts); a variable-length list, a list of
    that one value."""
    row = {entry['name']: (entry['vocabulary'][0] if entry.get('vocabulary')
                           else entry.get('first', table_records.fill_value(entry)))
           for entry in schema['features']}
    return {name: [value] if value_lists.is_ragged(entry) else value
            for (name, value), entry in zip(row.items(), schema['features'])}


KIND = registry.register(Table())
