"""A CSV file's rows typed a batch at a time, for `prepare csv` at disk speed: Arrow's reader
(pyarrow.csv.open_csv: threads, streaming record batches) splits the fields, through the same
byte stream as csv_files (common/files: buckets, .csv.gz), each field as text; whole columns are
then typed with Arrow and NumPy (input_fns/tables/column_typing.py).

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
import itertools
from typing import Callable, Iterator, List, Union

import pyarrow as pa
import pyarrow.csv as arrow_csv

from common.errors import UserError
from input_fns.tables import csv_files, table_reading
from input_fns.tables.column_typing import Batch, ColumnTyping, Fields, rows_batch

# Arrow's block: a batch is about this much of the file. The batches in flight to the workers
# and back set prepare's memory: on a 1 GB CSV (2 cores, quiet) 4 MiB blocks peaked at 1,165 MiB
# of PSS over its processes, 1 MiB at 893 MiB, in the same time (43.1 s, 44.1 s).
BLOCK_BYTES = 1 << 20
ROW_PATH_BATCH = 10_000  # rows a batch where the rows path reads on


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
