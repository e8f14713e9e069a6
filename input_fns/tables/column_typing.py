"""A batch of a CSV file's rows typed whole columns at a time, with Arrow and NumPy
(csv_batches.py reads the batches): plain numbers cast whole, text taken whole, any other
column by RowReader's converters field by field; None where a field needs the rows path. In
the process reading the file, or in a worker process (batch_work.py)."""
import dataclasses
import re
from typing import List, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from input_fns.tables import example_batches, table_reading, table_records

# Python's str.strip() drops these (str.isspace); a field that starts or ends with one is
# typed field by field, as RowReader strips it.
_SPACES = re.escape(''.join(chr(code) for code in range(0x3001) if chr(code).isspace()))
_EDGE_SPACE = f'^[{_SPACES}]|[{_SPACES}]$'
# Plain numbers, which Arrow's casts and Python's int() and float() read alike (no 'inf', no
# '1_000', no Unicode digits, no '0x10': those go field by field): an int is -?[0-9]+, a float
# [+-]?(digits[.digits] | .digits)([eE][+-]?digits); with a decimal comma, this pattern.
_PLAIN_COMMA = r'^[+-]?(?:\d+,?\d*|,\d+)(?:[eE][+-]?\d+)?$'
_LIMITS = {'int': table_records.INT_RANGE, 'float': table_records.FLOAT32_RANGE}


@dataclasses.dataclass
class Batch:
    """Rows of one file: their split keys (csv_tables.row_key's bytes), typed columns."""
    keys: List[bytes]
    columns: List[example_batches.TypedColumn]

    def __len__(self) -> int:
        return len(self.keys)


def _values(texts: pa.Array) -> List[bytes]:
    """Each value's UTF-8 bytes, sliced from the array's data at once."""
    offsets = np.frombuffer(texts.buffers()[1], np.int32)[texts.offset:texts.offset + len(texts) + 1]
    data = texts.buffers()[2].to_pybytes() if len(texts) else b''
    bounds = offsets.tolist()
    return [data[start:end] for start, end in zip(bounds, bounds[1:])]


def _column_of(values: List, dtype: str) -> example_batches.TypedColumn:
    """A column typed field by field (None: missing) as a batch's column."""
    present = np.array([value is not None for value in values], bool)
    if dtype in _LIMITS:
        numbers = np.array([0 if value is None else value for value in values],
                           np.int64 if dtype == 'int' else np.float64)
        return example_batches.TypedColumn(present, numbers=numbers)
    return example_batches.TypedColumn(present, texts=pa.array(
        ['' if value is None else value for value in values], pa.string()))


def rows_batch(keys: List[bytes], rows: List[List], dtypes: Sequence[str]) -> Batch:
    """Rows typed by the rows path as a batch."""
    columns = list(zip(*rows)) if rows else [() for _ in dtypes]
    return Batch(keys, [_column_of(list(values), dtype) for values, dtype in zip(columns, dtypes)])


@dataclasses.dataclass
class Fields:
    """A batch of a file's rows as Arrow split them: each field as text, in the header's order;
    start: the batch's first data row in the file."""
    start: int
    columns: List[pa.Array]

    def __len__(self) -> int:
        return len(self.columns[0])


class ColumnTyping:
    """A batch's fields typed whole columns at a time as `reader` (the table's RowReader) types
    its rows; None where a field needs the rows path. Picklable: worker processes type batches
    with it (input_fns/tables/batch_work.py)."""

    def __init__(self, reader: table_reading.RowReader, decimal: str):
        self.reader, self.decimal = reader, decimal
        # Columns typed whole: numbers without a style (a style's marks go field by field).
        self._plain = [column not in reader.reading.styles for column in reader.columns]
        self._na_values = pa.array(sorted(reader.reading.na_values), pa.string())
        self._stripped_markers = all(value == value.strip() for value in reader.reading.na_values)

    def typed(self, fields: List[pa.Array]) -> Optional[Batch]:
        columns = []
        for index, (header_index, dtype) in enumerate(zip(self.reader.indices, self.reader.dtypes)):
            column = self._column(index, dtype, fields[header_index])
            if column is None:  # a field only the rows path reads, or refuses
                return None
            columns.append(column)
        keys = pc.binary_join_element_wise(*fields, '\x1f') if len(fields) > 1 else fields[0]
        return Batch(_values(keys), columns)

    def _column(self, index: int, dtype: str, fields: pa.Array
                ) -> Optional[example_batches.TypedColumn]:
        """The column typed whole, or field by field by RowReader's converters; None where a
        field needs the rows path (not the column's type, or beyond the records' range)."""
        missing = pc.is_in(fields, value_set=self._na_values)
        present = np.logical_not(missing.to_numpy(zero_copy_only=False))
        # Plain numbers have no space at an edge, nor do markers matched exactly where none of
        # them has one: then the column needs no search for spaces (a regex, the dearest step).
        if dtype in _LIMITS and self._plain[index] and self._stripped_markers:
            column = self._plain_numbers(dtype, fields, missing, present)
            if column is not None:
                return column
        if not pc.any(pc.match_substring_regex(fields, _EDGE_SPACE)).as_py():
            if dtype in ('string', 'text'):
                return example_batches.TypedColumn(present, texts=fields)
            if dtype in _LIMITS and self._plain[index] and not self._stripped_markers:
                column = self._plain_numbers(dtype, fields, missing, present)
                if column is not None:
                    return column
        values = self.reader.column_values(index, [field.strip() for field in fields.to_pylist()])
        return None if values is None else _column_of(values, dtype)

    def _all_plain(self, dtype: str, fields: pa.Array, missing: pa.Array) -> bool:
        """Whether every field not missing is a plain number, as cheaply as it can be
        asked: an int's digits by an ASCII test (a sign stripped; Arrow's cast would read
        '0x10'); a float with a '.' mark by the cast itself (_plain_numbers), which reads the
        plain forms and, beyond them, only inf and nan, which the range check sends on."""
        if dtype == 'int':
            digits = pc.ascii_is_decimal(pc.utf8_ltrim(fields, characters='-'))
            return pc.all(pc.or_(missing, digits)).as_py()
        if self.decimal != ',':
            return True
        return pc.all(pc.or_(missing, pc.match_substring_regex(fields, _PLAIN_COMMA))).as_py()

    def _plain_numbers(self, dtype: str, fields: pa.Array, missing: pa.Array,
                       present: np.ndarray) -> Optional[example_batches.TypedColumn]:
        """A column of plain numbers (and missing markers) cast whole; None if it is not one,
        or holds one beyond the records' range."""
        if not self._all_plain(dtype, fields, missing):
            return None
        fields = pc.if_else(missing, pa.scalar('0'), fields)
        if self.decimal == ',':
            fields = pc.replace_substring(fields, ',', '.')
        try:
            numbers = pc.cast(fields, pa.int64() if dtype == 'int' else pa.float64()).to_numpy()
        except pa.ArrowInvalid:  # beyond int64, or not a float's plain form
            return None
        low, high = _LIMITS[dtype]
        if len(numbers) and not (np.isfinite(numbers).all() and low <= numbers.min()
                                 and numbers.max() <= high):
            return None
        return example_batches.TypedColumn(present, numbers=numbers)
