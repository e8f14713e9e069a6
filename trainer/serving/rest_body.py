"""TF Serving REST request bodies run through a SavedModel's signature, as the model server
would run them: --mode=predict on a .json file.

  predict:           {"signature_name": ..., "instances": [row, ...]}   rows: {input: value}, or
                     bare values for a one-input signature; or "inputs" (columns)
  classify, regress: {"signature_name": ..., "examples": [{feature: value}, ...]}: each a
                     tf.Example (whole JSON numbers int64, others float, text and {"b64"} bytes)
"""
import base64
import json
from typing import Dict, List

import numpy as np
import tensorflow as tf

from common import files
from common.errors import UserError

REQUEST_KEYS = {'instances', 'inputs', 'examples'}
EXAMPLE_METHODS = (tf.saved_model.CLASSIFY_METHOD_NAME, tf.saved_model.REGRESS_METHOD_NAME)


def is_request_body(path: str) -> bool:
    """A .json file holding one REST request body (not JSON lines of a table's rows)."""
    if not path.endswith('.json'):
        return False
    try:
        body = json.loads(files.read_text(path))
    except (ValueError, tf.errors.OpError):
        return False
    return isinstance(body, dict) and bool(REQUEST_KEYS & set(body))


def read_body(path: str) -> Dict:
    try:
        body = json.loads(files.read_text(path))
    except tf.errors.NotFoundError:
        raise UserError(f'{path}: no such file') from None
    except ValueError as error:
        raise UserError(f'{path}: not JSON ({error})') from None
    if not isinstance(body, dict) or not REQUEST_KEYS & set(body):
        raise UserError(f'{path}: not a TF Serving REST request body: give "instances", '
                        '"inputs" or "examples" (docs/serving.md)')
    return body


def signature_inputs(body: Dict, signature, method: str, where: str) -> Dict[str, tf.Tensor]:
    """The signature's input tensors from the body."""
    specs = signature.structured_input_signature[1]
    if method in EXAMPLE_METHODS:
        if 'examples' not in body:
            raise UserError(f'{where}: this signature ({method}) takes "examples"')
        return {tf.saved_model.CLASSIFY_INPUTS: tf.constant(
            [tf_example(features, where) for features in body['examples']])}
    if 'instances' in body:
        columns = _rows_to_columns(body['instances'], sorted(specs), where)
    elif 'inputs' in body:
        given = body['inputs']
        columns = given if isinstance(given, dict) else {name: given for name in specs}
    else:
        raise UserError(f'{where}: a predict signature takes "instances" or "inputs"')
    missing = sorted(set(specs) - set(columns))
    if missing or len(specs) > 1 and not isinstance(columns, dict):
        raise UserError(f'{where}: no value for {", ".join(missing)}; the signature takes '
                        f'{", ".join(sorted(specs))}')
    return {name: _tensor(columns[name], spec, name, where) for name, spec in specs.items()}


def _tensor(values, spec, name: str, where: str) -> tf.Tensor:
    """An input's values as the model server batches them: one shape for every instance (a
    variable-length list padded by the client: docs/your-data.md#lists)."""
    try:
        return tf.constant(_bytes(values), dtype=spec.dtype)
    except (ValueError, TypeError) as error:
        raise UserError(f'{where}: input {name!r} does not make one {spec.dtype.name} tensor '
                        f'({str(error).splitlines()[0]}); give every instance the same shape '
                        '(pad a list of any length with "" or -1)') from None


def _rows_to_columns(rows: List, names: List[str], where: str) -> Dict[str, List]:
    columns = {name: [] for name in names}
    for row in rows:
        named = isinstance(row, dict) and not set(row) == {'b64'}
        if not named and len(names) > 1:
            raise UserError(f'{where}: instance {json.dumps(row)[:60]} names no inputs; the '
                            f'signature takes {", ".join(names)}')
        for name in names:
            if named and name not in row:
                raise UserError(f'{where}: an instance has no {name!r}')
            columns[name].append(row[name] if named else row)
    return columns


def _bytes(value):
    """{"b64": ...} as the bytes it encodes, in any nesting."""
    if isinstance(value, dict) and set(value) == {'b64'}:
        return base64.b64decode(value['b64'])
    if isinstance(value, list):
        return [_bytes(item) for item in value]
    return value


def tf_example(features: Dict, where: str) -> bytes:
    """One REST example as the tf.Example the model server builds from it."""
    example = tf.train.Example()
    for key, value in features.items():
        values = [_bytes(item) for item in (value if isinstance(value, list) else [value])]
        values = [item.encode() if isinstance(item, str) else item for item in values]
        feature = example.features.feature[key]
        if all(isinstance(item, bytes) for item in values):
            feature.bytes_list.value.extend(values)
        elif all(isinstance(item, int) and not isinstance(item, bool) for item in values):
            feature.int64_list.value.extend(values)
        elif all(isinstance(item, (int, float)) for item in values):
            feature.float_list.value.extend(values)
        else:
            raise UserError(f'{where}: feature {key!r} mixes text and numbers')
    return example.SerializeToString()


def rows(outputs: Dict[str, np.ndarray]) -> List[Dict]:
    """The signature's outputs, one dict per row of the request, as JSON takes them (a row's
    string output, such as image_classifier's class_name, is bytes, not an array)."""
    count = len(next(iter(outputs.values())))
    return [{key: files.json_value(value[i]) for key, value in sorted(outputs.items())}
            for i in range(count)]
