"""Features that hold a list of values a record (tf.Example's lists as they are): a fixed-length
list (an image as 784 floats, an embedding of 64; schema entry `"shape": [N]`), read as one
[batch, N] tensor, or a variable-length one (tags, token ids; `"ragged": true`), read as a
SparseTensor, as feature columns take it. A scalar feature's entry has neither field, so a
schema written before lists came reads as it did.

Serving takes a variable-length list as a [batch, M] tensor padded with PADDING, which the
graph drops (dense_to_sparse), as feature columns drop '' and -1.
"""
import json
import math
import struct
from typing import Dict, List, Optional, Union

import tensorflow as tf

RAGGED = 'ragged'  # a list form: lengths differ between records
# A list's form: None for one value, N for N values in every record, or RAGGED.
Form = Optional[Union[int, str]]
PADDING = {'int': -1, 'float': float('nan'), 'string': ''}


def form_of_lengths(lengths, kind: str) -> Form:
    """The form of a feature whose records hold lists of these lengths (empty ones left out):
    one value, one fixed length of numbers, else variable (text lists are always bags)."""
    if not lengths or lengths == {1}:
        return None
    if len(lengths) == 1 and kind != 'string':
        return next(iter(lengths))
    return RAGGED


def form(entry: Dict) -> Form:
    if entry.get(RAGGED):
        return RAGGED
    shape = entry.get('shape')
    return shape[0] if shape else None


def form_fields(list_form: Form) -> Dict:
    """The schema entry's fields of a form."""
    if list_form is None:
        return {}
    return {RAGGED: True} if list_form == RAGGED else {'shape': [list_form]}


def is_list(entry: Dict) -> bool:
    return form(entry) is not None


def is_ragged(entry: Dict) -> bool:
    return form(entry) == RAGGED


def position_means(entry: Dict) -> List[float]:
    """A fixed-length list's mean at each position (a schema without them: the list's mean)."""
    return entry.get('position_mean') or [entry.get('mean', 0.0)] * form(entry)


def describe(list_form: Form) -> str:
    if list_form is None:
        return 'one value'
    return 'lists of any length' if list_form == RAGGED else f'lists of {list_form} values'


def parse_json_list(text: str, dtype: str, list_form: Form) -> Optional[List]:
    """A JSON list (as predict reads a list feature from JSON lines or a CSV cell) as the list
    the records hold; None for an empty one (missing). ValueError saying what is wrong."""
    try:
        values = json.loads(text)
    except ValueError:
        values = text
    if not isinstance(values, list):
        raise ValueError(f'{text[:40]!r} is not a JSON list')
    if not values:
        return None
    if isinstance(list_form, int) and len(values) != list_form:
        raise ValueError(f'{len(values)} values')
    if dtype == 'string':
        if not all(isinstance(value, str) for value in values):
            raise ValueError('a list of text with a value that is not text')
        return values
    if not all(isinstance(value, (int, float)) and not isinstance(value, bool)
               for value in values):
        raise ValueError(f'a list of {dtype}s with a value that is not a number')
    if dtype == 'int':
        if not all(isinstance(value, int) or float(value).is_integer() for value in values):
            raise ValueError('a list of ints with a fraction in it')
        values = [int(value) for value in values]
        if not all(-2 ** 63 < value < 2 ** 63 for value in values):
            raise ValueError("a value beyond int64's range, which the records hold")
        return values
    if not all(math.isfinite(value) for value in values):
        raise ValueError('a list with a value that is not a finite number')
    try:
        struct.pack(f'<{len(values)}f', *values)
    except OverflowError:
        raise ValueError("a value beyond float32's range (±3.4e38), which the records hold"
                         ) from None
    return [float(value) for value in values]


def dense_to_sparse(padded: tf.Tensor, dtype: str) -> tf.SparseTensor:
    """[batch, M] values padded with PADDING -> the SparseTensor of the values."""
    pad = PADDING[dtype]
    kept = (tf.logical_not(tf.math.is_nan(padded)) if dtype == 'float'
            else tf.not_equal(padded, tf.constant(pad, padded.dtype)))
    indices = tf.where(kept)
    return tf.SparseTensor(indices, tf.gather_nd(padded, indices),
                           tf.shape(padded, out_type=tf.int64))
