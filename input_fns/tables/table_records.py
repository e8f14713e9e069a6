"""Table rows as tf.Example records: one feature per column, a missing value left out.

A record holds each column's value as it was read (int64, float or bytes), so the shards stay
the user's data; what a model makes of a value (normalized, bucketized, looked up in a
vocabulary) comes from the schema, at training time. A missing value is absent from its
record and read as its column's fill: the training mean for numbers (0 once normalized; a
number some training rows lacked also has an indicator of missing beside it), '' for strings
(out of vocabulary). Parsed a batch at a time with tf.io.parse_example.
"""
import math
import struct
from typing import Dict, List, Optional

import tensorflow as tf

from features import date_parts, free_text, model_features, value_lists
from input_fns.records import pipeline

_FLOAT = struct.Struct('<f')
_SMALL = [bytes((value,)) for value in range(0x80)]
_TF_DTYPES = {'int': tf.int64, 'float': tf.float32, 'date': tf.string, 'string': tf.string,
              'text': tf.string}
_BYTES = frozenset(dtype for dtype, tf_type in _TF_DTYPES.items() if tf_type == tf.string)
INT_MISSING = -2 ** 63  # a missing int's value as parsed, where with_derived tells it is missing
# The values an int column holds: int64's, less INT_MISSING, so no value reads as missing.
INT_RANGE = (INT_MISSING + 1, 2 ** 63 - 1)
# The floats float32 (the records' float) holds: from 2^128 - 2^103 on, it rounds them to inf.
_FLOAT32_MOST = math.nextafter(2.0 ** 128 - 2.0 ** 103, 0)
FLOAT32_RANGE = (-_FLOAT32_MOST, _FLOAT32_MOST)


def _varint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited protobuf field: its tag, the payload's length, the payload."""
    return tag + _varint(len(payload)) + payload


class RowEncoder:
    """Rows (values typed as dtypes; None: missing) as serialized tf.train.Examples.

    Written in protobuf's wire format directly (Example.features = 1, Features.feature = 1, a
    map entry's key = 1 and value = 2; a Feature's bytes_list = 1, float_list = 2, int64_list
    = 3, each list's packed values = 1), with each column's key bytes made once: 5x faster than
    building the messages, which `prepare csv` would otherwise spend most of its time on.
    tests/test_tables.py checks that the bytes parse to the Example the messages make.
    """

    def __init__(self, names: List[str], dtypes: List[str]):
        self.columns = [(_field(b'\x0a', name.encode()) + b'\x12', dtype)
                        for name, dtype in zip(names, dtypes)]

    @staticmethod
    def _feature(dtype: str, value) -> bytes:
        if isinstance(value, list):  # a list feature (features/value_lists.py)
            if dtype in _BYTES:
                return _field(b'\x0a', b''.join(_field(b'\x0a', item.encode()) for item in value))
            if dtype == 'int':
                return _field(b'\x1a', _field(b'\x0a', b''.join(
                    _varint(item & 0xFFFFFFFFFFFFFFFF) for item in value)))
            return _field(b'\x12', _field(b'\x0a', struct.pack(f'<{len(value)}f', *value)))
        if dtype in _BYTES:
            return _field(b'\x0a', _field(b'\x0a', value.encode()))
        if dtype == 'int':
            return _field(b'\x1a', _field(b'\x0a', _varint(value & 0xFFFFFFFFFFFFFFFF)))
        return b'\x12\x06\x0a\x04' + _FLOAT.pack(value)

    def encode(self, values: List) -> bytes:
        feature = self._feature
        return _field(b'\x0a', b''.join(
            _field(b'\x0a', key + _field(b'', feature(dtype, value)))
            for (key, dtype), value in zip(self.columns, values) if value is not None))


def encode_example(names: List[str], dtypes: List[str], values: List) -> bytes:
    """A serialized tf.train.Example of one row (RowEncoder's)."""
    return RowEncoder(names, dtypes).encode(values)


def tf_dtype(dtype: str) -> tf.DType:
    return _TF_DTYPES[dtype]


def fill_value(entry: Dict):
    """What a missing value of a feature reads as: its mean (an int column's, rounded), or ''
    (text; a date's parts then read as its mean days and no category); a fixed-length list's,
    its mean at each position (value_lists.position_means)."""
    if entry['dtype'] in _BYTES:
        return ''
    if isinstance(value_lists.form(entry), int):
        return [int(round(mean)) if entry['dtype'] == 'int' else float(mean)
                for mean in value_lists.position_means(entry)]
    mean = entry.get('mean', 0.0)
    return int(round(mean)) if entry['dtype'] == 'int' else float(mean)


def parsed_default(entry: Dict):
    """What a missing value parses as: its fill; for a number with a missing indicator, NaN
    or INT_MISSING, which with_derived replaces by the fill."""
    if not entry.get('missing_indicator'):
        return fill_value(entry)
    return INT_MISSING if entry['dtype'] == 'int' else float('nan')


def with_derived(features: Dict[str, tf.Tensor], schema: Dict) -> Dict[str, tf.Tensor]:
    """Parsed features with those the model derives from them (features/model_features.py): a
    date's parts; a free text's words ([batch, words kept], '' past its last); a number's indicator of
    missing (its value then the fill). In the input_fn and the serving receiver, so every model
    over a table (canned or yours) reads them."""
    derived = dict(features)
    for entry in schema['features']:
        name = entry['name']
        if not entry.get('count') or name not in features:
            continue
        if entry['dtype'] == 'date':
            derived.update(date_parts.parts(features[name], entry))
        elif entry['dtype'] == 'text':
            spaced = tf.strings.regex_replace(tf.strings.lower(tf.reshape(features[name], [-1]),
                                                               encoding='utf-8'),
                                              free_text.SEPARATORS, ' ')
            derived[free_text.words_name(name)] = tf.strings.split(spaced).to_tensor(
                '', shape=[None, free_text.words_kept(entry)])  # '' : no word, to feature columns
        elif entry.get('missing_indicator'):
            value = features[name]
            missing = (tf.equal(value, INT_MISSING) if value.dtype == tf.int64
                       else tf.math.is_nan(value))
            derived[name] = tf.where(missing, tf.cast(fill_value(entry), value.dtype), value)
            derived[model_features.indicator_name(name)] = tf.where(
                missing, model_features.MISSING, '')
    return derived


def _feature_spec(entry: Dict):
    """A fixed-length list as [N] values, a variable-length one as a RaggedTensor (which the
    training pipeline permutes and rebatches; the model gets it as a SparseTensor:
    make_input_fn), one value as []."""
    dtype, list_form = tf_dtype(entry['dtype']), value_lists.form(entry)
    if list_form == value_lists.RAGGED:
        return tf.io.RaggedFeature(dtype, row_splits_dtype=tf.int64)
    return tf.io.FixedLenFeature([list_form] if list_form else [], dtype,
                                 default_value=parsed_default(entry))


def feature_spec(schema: Dict, with_label: bool = True) -> Dict:
    """tf.io.parse_example's spec: every feature with what a missing one parses as; with_label:
    the label, required, and the weight column, if any (1 when missing), which serving takes
    neither of."""
    spec = {entry['name']: _feature_spec(entry) for entry in schema['features']}
    if with_label:
        label = schema['label']
        spec[label['name']] = tf.io.FixedLenFeature([], tf_dtype(label['dtype']))
        if 'weight' in schema:
            spec[schema['weight']['name']] = tf.io.FixedLenFeature([], tf.float32, default_value=1.0)
    return spec


def label_tensor(values: tf.Tensor, schema: Dict) -> tf.Tensor:
    """The label as the canned heads take it: class names as strings (the head looks them up in
    the schema's classes), or float32 for regression."""
    if schema['label']['task'] == 'classification':
        return values if values.dtype == tf.string else tf.strings.as_string(values)
    return tf.cast(values, tf.float32)


def parse_batch_fn(schema: Dict):
    """[batch] serialized Examples -> ({feature name: [batch] tensor}, [batch] labels); a date
    feature's parts among the features."""
    spec = feature_spec(schema)
    label = schema['label']['name']

    def parse_batch(serialized):
        features = tf.io.parse_example(serialized, spec)
        labels = label_tensor(features.pop(label), schema)
        return with_derived(features, schema), labels

    return parse_batch


def make_input_fn(file_pattern: str, schema: Dict, batch_size: int, training: bool,
                  seed: Optional[int] = None, flag_name: str = 'file pattern',
                  shuffle_buffer: int = pipeline.DEFAULT_SHUFFLE_BUFFER):
    """An Estimator input_fn over table shards; checks the files now (listed in their manifest,
    at its sizes; the first record of each parses as the schema says), not mid-training."""
    files = pipeline.list_record_files(file_pattern, flag_name)
    reader = pipeline.check_record_files(files, feature_spec(schema))
    input_fn = pipeline.record_input_fn(files, parse_batch_fn(schema), batch_size, training, seed,
                                        shuffle_buffer, reader=reader, windows=True)
    if not any(value_lists.is_ragged(entry) for entry in schema['features']):
        return input_fn
    return lambda: input_fn().map(_ragged_as_sparse)


def _ragged_as_sparse(features, labels):
    """Variable-length lists as SparseTensors, which feature columns take (RaggedTensors they
    do not), for the canned models and api.table_feature_columns alike."""
    return {name: value.to_sparse() if isinstance(value, tf.RaggedTensor) else value
            for name, value in features.items()}, labels
