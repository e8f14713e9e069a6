"""A user's table (CSV files or an Excel workbook: a header, then rows) read as typed rows, for
`prepare csv` (input_fns/tables/prepare_csv.py).

One streaming pass: Python's csv module over a tf.io.gfile stream (input_fns/tables/csv_files.py:
buckets, .csv.gz, the file's delimiter and decimal mark), each row typed. Column types come from
a sample of the first rows (--column_types overrides); a later value that does not read as its
column's type stops the run, naming the row, before anything in --output_dir changes.
"""
import functools
import itertools
import math
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from absl import logging

from common.errors import UserError
from features import free_text, iso_dates
from input_fns.tables import column_choice, csv_files, number_formats, table_schema

SAMPLE_ROWS = 10_000  # rows the column types and the task are inferred from
_WHAT = {'int': 'an int', 'float': 'a finite number'}


def row_key(fields: List[str]) -> str:
    """What a row's split is decided by (input_fns/records/split.py): its fields, not their quoting."""
    return '\x1f'.join(fields)


class Table:
    """A CSV source's header, column types and task, from its first file's first rows; the
    columns are the header's less --ignore_columns (a row's split still goes by all its fields)."""

    def __init__(self, paths: List[str], label: str, column_types: Optional[str],
                 task: Optional[str], na_values: Sequence[str],
                 known_types: Optional[Dict[str, str]] = None,
                 csv_format: csv_files.CsvFormat = csv_files.CsvFormat(),
                 ignore_columns: Optional[Sequence[str]] = None,
                 weight_column: Optional[str] = None,
                 date_formats: Tuple[Optional[str], Dict[str, str]] = (None, {})):
        """date_formats: (--date_format, {date column: the training data's format})."""
        self.paths, self.na_values, self.format = paths, frozenset(na_values), csv_format
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
        sample = [fields for _, fields in rows if len(fields) == len(self.header)]
        present = [[value for value in (field.strip() for field in column)
                    if value not in self.na_values] for column in zip(*sample)] or [
            [] for _ in self.header]
        present = self._styled([present[index] for index in self._kept], given)
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
        self.date_formats = {name: self._date_format(name, values, *date_formats)
                             for name, dtype, values in zip(self.columns, self.dtypes, present)
                             if dtype == 'date'}
        self._converters = [self._converter(name, dtype)
                            for name, dtype in zip(self.columns, self.dtypes)]
        self._floats = [index for index, dtype in enumerate(self.dtypes) if dtype == 'float']

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

    def _converter(self, column: str, dtype: str):
        """A column's field -> its value (ValueError if it is none): the fast path of _typed."""
        number = float if self.format.decimal == '.' else table_schema.decimal_comma_float
        convert = ({'int': int, 'float': number, 'string': str, 'text': str}.get(dtype) or
                   functools.partial(iso_dates.check, date_format=self.date_formats[column]))
        if column in self.styles:
            return lambda text, plain=self.styles[column].plain: convert(plain(text))
        return convert

    def _styled(self, present: List[List[str]], given: Dict[str, str]) -> List[List[str]]:
        """Each column's sample values; those of a column of formatted numbers
        (number_formats.column_style: `$1,234.50`, `12%`) as plain numbers, its style kept in
        self.styles."""
        self.styles = {name: style for name, values in zip(self.columns, present)
                       if given.get(name) not in table_schema.TEXT_DTYPES and
                       (style := number_formats.column_style(values, self.format,
                                                             f'{self.paths[0]}, column {name!r}'))}
        return [[self.styles[name].plain(value) for value in values] if name in self.styles
                else values for name, values in zip(self.columns, present)]

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
                yield row_key(fields), self._typed(path, line, fields)

    def _typed(self, path: str, line: int, fields: List[str]) -> List:
        if len(fields) != len(self.header):
            raise UserError(f'{path} line {line}: {len(fields)} fields, but the header names '
                            f'{len(self.header)} columns; fix that row (quote a field that '
                            'holds a comma)')
        if len(self._kept) < len(fields):
            fields = [fields[index] for index in self._kept]
        na_values = self.na_values
        try:  # the fast way, one comprehension; the slow one below only finds what failed
            values = [None if field in na_values else convert(field) for convert, field in
                      zip(self._converters, (field.strip() for field in fields))]
            if all(values[i] is None or math.isfinite(values[i]) for i in self._floats):
                return values
        except ValueError:
            pass
        for column, dtype, field in zip(self.columns, self.dtypes, fields):
            field = field.strip()
            if field in na_values:
                continue
            try:
                table_schema.parse_value(
                    self.styles[column].plain(field) if column in self.styles else field, dtype,
                    self.format.decimal, self.date_formats.get(column, 'iso'))
            except ValueError:
                raise UserError(f'{path} line {line}, column {column!r}: {field!r} is not '
                                f'{self._what(column, dtype)} {self._fix(column, dtype)} '
                                '--na_values if it marks a missing value') from None
        raise AssertionError(f'{path} line {line}: a field failed to parse, then parsed')

    def _fix(self, column: str, dtype: str) -> str:
        """Where the column's type came from, and what to pass if that is the wrong one."""
        if column in self.given_types:
            return '(as --column_types says); fix that row, or pass'
        if column in self.trained_types:
            return '(its type in the training data, --schema_from); fix that row, or pass'
        return (f'(the type read from the first rows); pass --column_types={column}:'
                f'{"float" if dtype == "int" else "string"}, or')

    def _what(self, column: str, dtype: str) -> str:
        if column in self.styles:
            return f'{_WHAT[dtype]} written as {self.styles[column].example!r} is'
        if dtype != 'date':
            return _WHAT[dtype]
        date_format = self.date_formats[column]
        return f'a date of the calendar ({"YYYY-MM-DD" if date_format == "iso" else date_format})'
