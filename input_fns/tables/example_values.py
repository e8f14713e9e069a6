"""A tf.Example record's values as a table row (`prepare examples`): the features' types and
list forms read from a sample of the records (int64_list int, float_list float, bytes_list text;
one value, a fixed-length list or one of any length: features/value_lists.py), then each
record's values as those say, a record that does not fit them one line naming its file, record
and feature.
"""
from typing import Dict, List, Tuple

from absl import logging

from common.errors import UserError
from features import iso_dates, value_lists
from input_fns.tables import column_choice, table_records, table_schema

_KINDS = {'int64_list': 'int', 'float_list': 'float', 'bytes_list': 'string'}


def column_types(sample, label: str, where: str
                  ) -> Tuple[List[str], List[str], Dict[str, value_lists.Form]]:
    """The features (sorted), their types and their list forms (features/value_lists.py: the
    lengths of their lists in the sample), from a sample of Examples."""
    kinds: Dict[str, str] = {}
    lengths: Dict[str, set] = {}
    for example in sample:
        for name, feature in example.features.feature.items():
            kind = kinds.setdefault(name, feature.WhichOneof('kind'))
            count = len(getattr(feature, kind).value) if kind else 0
            if count:
                lengths.setdefault(name, set()).add(count)
    if label not in kinds:
        raise UserError(f'--label={label}: {where} has no such feature; its features: '
                        f'{", ".join(sorted(kinds))}')
    for name in kinds:
        if column_choice.feature_name(name) != name:
            raise UserError(f'{where}: feature {name!r} has a name TensorFlow cannot take in a '
                            'model; rename it in the records')
    columns = sorted(kinds)
    dtypes = [_KINDS.get(kinds[name], 'string') for name in columns]
    forms = {name: value_lists.form_of_lengths(lengths.get(name, set()), dtype)
             for name, dtype in zip(columns, dtypes)}
    forms = {name: found for name, found in forms.items() if found is not None}
    for name, found in forms.items():
        logging.info('%s: feature %r holds %s in the first %d records', where, name,
                     value_lists.describe(found), len(sample))
    return columns, dtypes, forms


def typed(example, path: str, number: int, columns: List[str], dtypes: List[str],
           forms: Dict[str, value_lists.Form]) -> List:
    values = []
    for name, dtype in zip(columns, dtypes):
        feature = example.features.feature.get(name)
        kind = feature.WhichOneof('kind') if feature is not None else None
        found = list(getattr(feature, kind).value) if kind else []
        if not found:
            values.append(None)
            continue
        read_as = 'string' if dtype in table_schema.TEXT_DTYPES else dtype
        list_form = forms.get(name)
        if _KINDS.get(kind) != read_as:
            raise UserError(f'{path} record {number}, feature {name!r}: {kind}, where the first '
                            f'records hold {dtype} values; write it as they do in every record')
        if list_form is None and len(found) > 1:
            raise UserError(f'{path} record {number}, feature {name!r}: {len(found)} values, '
                            f'where the first records hold one {dtype}; a list feature must be '
                            'one in the first records too (prepare reads its form from them): '
                            'write such records first, or one value in each')
        if isinstance(list_form, int) and len(found) != list_form:
            raise UserError(f'{path} record {number}, feature {name!r}: {len(found)} values, '
                            f'where the schema holds lists of {list_form} (as the first records '
                            f'do); write every record\'s {name!r} with {list_form} values, or '
                            f'leave it out with --ignore_columns={name}')
        if list_form is not None:
            values.append(_text_list(found, path, number, name) if read_as == 'string'
                          else found)
            continue
        values.append(_one_value(found[0], path, number, name, dtype))
    return values


def _text_list(found: List[bytes], path: str, number: int, name: str) -> List[str]:
    try:
        return [value.decode('utf-8') for value in found]
    except UnicodeDecodeError:
        raise UserError(f'{path} record {number}, feature {name!r}: bytes that are not text; '
                        'the canned models take numbers and text') from None


def _one_value(value, path: str, number: int, name: str, dtype: str):
    if dtype == 'int' and value == table_records.INT_MISSING:
        raise UserError(f'{path} record {number}, feature {name!r}: {value}, the value that '
                        'marks a missing int; leave the feature out of such records, or '
                        'write it as text (bytes_list) if it is an ID')
    if dtype in table_schema.TEXT_DTYPES:
        [value] = _text_list([value], path, number, name)
        if dtype == 'date' and not iso_dates.is_dates([value]):
            raise UserError(f'{path} record {number}, feature {name!r}: {value!r} is not a '
                            'date of the calendar (YYYY-MM-DD), as the first records\' are; '
                            'write it as they do, or leave the feature out with '
                            '--ignore_columns')
    return value
