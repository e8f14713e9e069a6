"""A CSV file's rows typed a batch at a time, for `prepare csv` at disk speed: Arrow's reader
(pyarrow.csv.open_csv: threads, streaming record batches) splits the fields, through the same
byte stream as csv_files (common/files: buckets, .csv.gz), each field as text; whole columns are
then typed with Arrow and NumPy.

The rows path (csv_files.read_rows, then table_reading.RowReader) stays the one reading of a
field: a column whose fields are not all plain numbers in this batch (a formatted number, a
date, text, a field with spaces around it) is typed by RowReader's converters field by field;
a batch with a field none of them reads, or a number beyond what the records hold, is read
again by the rows path itself (a csv reader of the same file, advanced to that batch), which
raises its one-line error naming the file, line and column, or counts its --float_overflow=inf;
and where Arrow cannot read on (a row of another width, bytes its encoding does not decode), the
rest of the file is read by the rows path. Arrow and Python's csv module split fields alike
(quotes, doubled quotes, delimiters and newlines in quotes, blank lines, a byte-order mark):
tests/test_csv_batches.py compares the two paths' records on tables exercising each rule.
"""
import dataclasses
import itertools
import re
from typing import Callable, Iterator, List, Optional, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as arrow_csv

from common.errors import UserError
from input_fns.tables import csv_files, example_batches, table_reading, table_records

BLOCK_BYTES = 1 << 22  # Arrow's block: a batch is about this much of the file
ROW_PATH_BATCH = 10_000  # rows a batch where the rows path reads on
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


class _RowCursor:
    """The rows path's reader of the same file, advanced to a batch's rows when one needs it."""

    def __init__(self, csv_format: csv_files.CsvFormat, path: str):
        self._format, self._path, self._rows, self.at = csv_format, path, None, 0
        self._header: List[str] = []

    def header(self) -> List[str]:
        self.take(0, 0)
        return self._header

    def take(self, start: int, count: int) -> List:
        """(line, fields) of count data rows from the start-th."""
        if self._rows is None:
            self._rows = self._format.rows(self._path)
            self._header = next(self._rows, (0, []))[1]
        for _ in itertools.islice(self._rows, start - self.at):
            pass
        rows = list(itertools.islice(self._rows, count))
        self.at = start + len(rows)
        return rows


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


class FileBatches:
    """One CSV file's batches, typed as `reader` (the table's RowReader) types its rows."""

    def __init__(self, path: str, csv_format: csv_files.CsvFormat, header: List[str],
                 reader: table_reading.RowReader, row_key: Callable[[List[str]], str],
                 first_path: str):
        """header: the table's (first_path's, stripped); row_key: a row's split key."""
        self.path, self.format, self.header, self.reader = path, csv_format, header, reader
        self._row_key, self._first_path = row_key, first_path
        self.typing = ColumnTyping(reader, csv_format.decimal)
        self._cursor = _RowCursor(csv_format, path)

    def __iter__(self) -> Iterator[Batch]:
        for piece in self.pieces():
            yield self.typed(piece) if isinstance(piece, Fields) else piece

    def pieces(self) -> Iterator[Union[Fields, Batch]]:
        """The file's Arrow batches, to be typed (typed(), or its typing in a worker process);
        where Arrow cannot read on, the rest by the rows path, typed."""
        self._check_header(self._cursor.header())
        text = csv_files.open_text(self.path, self.format.encoding)
        done, batches = 0, self._arrow_batches(text)
        try:
            while True:
                try:
                    record_batch = next(batches, None)
                except Exception:  # pylint: disable=broad-except
                    break  # what Arrow cannot read on: the rows path reads the rest, or says why
                if record_batch is None:
                    return
                if record_batch.num_rows:
                    yield Fields(done, record_batch.columns)
                    done += record_batch.num_rows
        finally:
            text.close()
        # A cursor of its own: the one typed() uses may be behind, a batch's typing yet to come.
        rest = _RowCursor(self.format, self.path)
        while rows := rest.take(done, ROW_PATH_BATCH):
            yield self._rows_batch(rows)
            done += len(rows)

    def typed(self, fields: Fields) -> Batch:
        """The batch typed whole columns at a time, or by the rows path where it needs it."""
        batch = self.typing.typed(fields.columns)
        return self.by_rows(fields) if batch is None else batch

    def by_rows(self, fields: Fields) -> Batch:
        """The batch's rows read and typed by the rows path (which raises their error)."""
        return self._rows_batch(self._cursor.take(fields.start, len(fields)))

    def _arrow_batches(self, text) -> Iterator[pa.RecordBatch]:
        codec = 'utf8' if text.encoding == 'utf-8-sig' else text.encoding
        names = [f'f{index}' for index in range(len(self.header))]
        reader = arrow_csv.open_csv(
            text.buffer,
            read_options=arrow_csv.ReadOptions(column_names=names, skip_rows_after_names=1,
                                               block_size=BLOCK_BYTES, encoding=codec),
            parse_options=arrow_csv.ParseOptions(delimiter=self.format.delimiter,
                                                 newlines_in_values=True),
            convert_options=arrow_csv.ConvertOptions(
                column_types={name: pa.string() for name in names}, null_values=[],
                strings_can_be_null=False, quoted_strings_can_be_null=False))
        for batch in reader:
            yield batch

    def _check_header(self, names: List[str]) -> None:
        if [name.strip() for name in names] != self.header:
            raise UserError(f'{self.path}: its header differs from {self._first_path}\'s; give '
                            'files with the same columns in --source')

    def _rows_batch(self, rows: List) -> Batch:
        return rows_batch([self._row_key(fields).encode() for _, fields in rows],
                          [self.reader.typed(self.path, line, fields) for line, fields in rows],
                          self.reader.dtypes)
