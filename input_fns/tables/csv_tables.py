"""A user's table (CSV files or an Excel workbook: a header, then rows) read as typed rows, for
`prepare csv` (input_fns/tables/prepare_csv.py).

One streaming pass: Python's csv module over a tf.io.gfile stream (input_fns/tables/csv_files.py:
buckets, .csv.gz, the file's delimiter and decimal mark), each row typed by the reader predict
reads rows with too (input_fns/tables/table_reading.py). Column types come from a sample of the first
rows (--column_types overrides); a later value that does not read as its column's type stops
the run, naming the row, before anything in --output_dir changes.
"""
import dataclasses
import itertools
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

from absl import logging

from common.errors import UserError
from features import free_text, iso_dates
from input_fns.tables import (column_choice, column_typing, csv_batches, csv_files, number_formats,
                              table_reading, table_schema)

SAMPLE_ROWS = 10_000  # rows the column types and the task are inferred from


def row_key(fields: List[str]) -> str:
    """What a row's split is decided by (input_fns/records/split.py): its fields, not their quoting."""
    return '\x1f'.join(fields)


class Table:
    """A CSV source's header, column types and task, from its first file's first rows; the
    columns are the header's less --ignore_columns (a row's split still goes by all its fields)."""

    def __init__(self, paths: List[str], label: str, column_types: Optional[str],
                 task: Optional[str], reading: table_reading.TableReading,
                 known_types: Optional[Dict[str, str]] = None,
                 csv_format: csv_files.CsvFormat = csv_files.CsvFormat(),
                 ignore_columns: Optional[Sequence[str]] = None,
                 weight_column: Optional[str] = None, date_format: Optional[str] = None):
        """reading: what --schema_from's schema records of how its rows were read, with the
        flags' --na_values and --float_overflow; date_format: --date_format."""
        self.paths, self.format = paths, csv_format
        rows = itertools.islice(csv_format.rows(paths[0]),
                                SAMPLE_ROWS + 1)
        self.header = self._read_header(next(rows, None), label)
        self.ignored = column_choice.ignored_columns(ignore_columns, self.header, label,
                                                    weight_column)
        self._kept = [index for index, name in enumerate(self.header)
                      if name not in self.ignored]
        self.columns = [self.header[index] for index in self._kept]
        self.label, self.label_index = label, self.columns.index(label)
        self.trained_types = {name: dtype for name, dtype in (known_types or {}).items()
                              if name in self.columns}
        self.given_types = table_schema.parse_column_types(column_types, self.header)
        given = {**self.trained_types, **self.given_types}
        reading, present = reading.sampled((fields for _, fields in rows), self.header,
                                           self.columns, given, csv_format, paths[0])
        self.dtypes = [given.get(name) or self._inferred_dtype(name, values)
                       for name, values in zip(self.columns, present)]
        column_choice.warn_of_identifiers(self.columns, self.dtypes, present, label, paths[0])
        label_dtype = self._label_dtype(given)
        if task == 'classification' and label_dtype == 'float':
            raise UserError(f'--task=classification: the label {label!r} holds decimals; pass '
                            f'--column_types={label}:string to take its values as class names')
        if task == 'regression' and label_dtype in table_schema.TEXT_DTYPES:
            raise UserError(f'--task=regression: the label {label!r} holds text; pass '
                            f'--column_types={label}:float if it is a number')
        self.task = task or table_schema.infer_task(label_dtype, present[self.label_index])
        self.names = [column_choice.feature_name(column) for column in self.columns]
        self.date_formats = {name: self._date_format(name, values, date_format,
                                                     reading.date_formats)
                             for name, dtype, values in zip(self.columns, self.dtypes, present)
                             if dtype == 'date'}
        # The reading the rows are typed with, which the schema records.
        self.reading = dataclasses.replace(reading, date_formats=self.date_formats)
        self._reader = table_reading.RowReader(self.header, self.columns, self.dtypes,
                                               self.reading, csv_format.decimal, self._advice)

    def _read_header(self, header: Optional[Tuple[int, List[str]]], label: str) -> List[str]:
        if header is None:
            raise UserError(f'{self.paths[0]}: empty; a CSV file starts with a header naming its '
                            'columns')
        names = [name.strip() for name in header[1]]
        column_choice.check_names(names, f'{self.paths[0]} line 1')
        if label not in names:
            raise UserError(f'--label={label}: {self.paths[0]} has no such column; its columns: '
                            f'{", ".join(names)}' + (' (its first sheet\'s: --sheet names another)'
                                                     if self.format.workbook and
                                                     self.format.sheet is None else ''))
        return names

    def _label_dtype(self, given: Dict[str, str]) -> str:
        """A label of dates is read as class names (a model predicts no date or prose)."""
        if self.dtypes[self.label_index] in ('date', 'text'):
            if given.get(self.label) in ('date', 'text'):
                raise UserError(f'--column_types={self.label}:{given[self.label]}: the label is '
                                'what the model predicts, a class or a number, not '
                                f'{"a date" if given[self.label] == "date" else "free text"}')
            self.dtypes[self.label_index] = 'string'
        return self.dtypes[self.label_index]

    def _date_format(self, column: str, values: List[str], chosen: Optional[str],
                     trained: Dict[str, str]) -> str:
        """The format the column's sample dates are in; the training data's, with --schema_from;
        --date_format where the sample fits both day/month/year and month/day/year (or yy)."""
        if column in trained:
            return trained[column]
        fits = iso_dates.formats_of(values) or [iso_dates.likeliest_format(values)[0]]
        chosen = chosen if chosen in fits else chosen and iso_dates.short_year(chosen)
        if len(fits) > 1 and chosen not in fits:
            raise UserError(f'{self.paths[0]}, column {column!r}: dates such as {values[0]!r} '
                            'read as day/month/year and as month/day/year (no day above 12 in '
                            'the first rows); pass --date_format=day/month/year or '
                            '--date_format=month/day/year')
        return chosen if len(fits) > 1 else fits[0]

    def _inferred_dtype(self, column: str, values: List[str]) -> str:
        dtype = table_schema.infer_dtype(values, self.format.decimal)
        if dtype != 'string':
            return dtype
        where = f'{self.paths[0]}, column {column!r}'
        wide = table_schema.beyond_int64(values)
        if wide:  # stored as a number, it would wrap around or round: kept as written
            logging.warning('%s: whole numbers beyond int64 (such as %r), read as text: a '
                            'category or an ID (--column_types=%s:float reads them as rounded '
                            'numbers)', where, wide, column)
            return dtype
        iso_dates.warn_of_near_dates(where, column, values)
        number_formats.check_marks(where, column, values, self.format)
        if column != self.label and free_text.is_free_text(values):
            logging.info('%s: free text, read as its words (--column_types=%s:string for whole '
                         'values)', where, column)
            return 'text'
        return dtype

    def typed_rows(self) -> Iterator[Tuple[str, List]]:
        """(the row's key for the split, its values typed, None for missing) of every file's rows."""
        for path in self.paths:
            rows = self.format.rows(path)
            header = next(rows, (0, []))[1]
            if [name.strip() for name in header] != self.header:
                raise UserError(f'{path}: its header differs from {self.paths[0]}\'s; give '
                                'files with the same columns in --source')
            for line, fields in rows:
                yield row_key(fields), self._reader.typed(path, line, fields)
        self._warn_of_overflow()

    def typed_batches(self) -> Iterator[column_typing.Batch]:
        """typed_rows' rows a batch at a time: a CSV file's read whole columns at a time
        (input_fns/tables/csv_batches.py), a workbook's rows in turn."""
        for batches, piece in self.pieces():
            yield batches.typed(piece) if isinstance(piece, column_typing.Fields) else piece
        self.warn_of_overflow()

    def pieces(self) -> Iterator[Tuple[Optional[csv_batches.FileBatches],
                                       Union[column_typing.Fields, column_typing.Batch]]]:
        """typed_batches' batches before a CSV file's are typed: each with its file's
        FileBatches (None for a workbook's), which types its Fields (or its ColumnTyping does,
        in a worker process: input_fns/tables/batch_work.py)."""
        if self.format.workbook:
            rows = self.typed_rows()
            while chunk := list(itertools.islice(rows, csv_batches.ROW_PATH_BATCH)):
                yield None, column_typing.rows_batch([key.encode() for key, _ in chunk],
                                                   [values for _, values in chunk], self.dtypes)
            return
        for path in self.paths:
            batches = csv_batches.FileBatches(path, self.format, self.header, self._reader,
                                              row_key, self.paths[0])
            for piece in batches.pieces():
                yield batches, piece

    def column_typing(self) -> column_typing.ColumnTyping:
        """How every file's Fields are typed (FileBatches' typing)."""
        return column_typing.ColumnTyping(self._reader, self.format.decimal)

    def warn_of_overflow(self) -> None:
        """Once the CSV files' batches are typed (a workbook's rows warn of their own)."""
        if not self.format.workbook:
            self._warn_of_overflow()

    def _warn_of_overflow(self) -> None:
        for column, count in self._reader.overflowed.items():
            logging.warning('column %r: %d values beyond float32 (±3.4e38) stored as inf of '
                            'their sign, as --float_overflow=inf says', column, count)

    def _advice(self, column: str, dtype: str, field: str, beyond: bool) -> str:
        """Where the column's type came from, and what to pass if that is the wrong one."""
        if beyond and dtype == 'int':
            return (f' ({self._type_source(column)}); pass --column_types={column}:string to '
                    'read the column as text (an ID), or fix that row')
        if beyond:
            return (f'; pass --float_overflow=inf to store it as inf (of its sign), or fix that '
                    f'row, or pass --column_types={column}:string for text')
        if column in self.given_types or column in self.trained_types:
            return f' ({self._type_source(column)}); fix that row, or pass --na_values if it ' \
                   'marks a missing value'
        return (f' ({self._type_source(column)}); pass --column_types={column}:'
                f'{"float" if dtype == "int" else "string"}, or --na_values if it marks a '
                'missing value')

    def _type_source(self, column: str) -> str:
        if column in self.given_types:
            return 'as --column_types says'
        if column in self.trained_types:
            return 'its type in the training data, --schema_from'
        return 'the type read from the first rows'
