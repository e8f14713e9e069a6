"""`prepare csv`: a user's CSV files (a header, then rows) -> tf.Example shards and their schema.

One streaming pass: Python's csv module over a tf.io.gfile stream (input_fns/csv_files.py:
buckets, .csv.gz, the file's delimiter and decimal mark), each row typed, added to the training
split's statistics and written to its split's shard (input_fns/stream_shards.py). Column types
come from a sample of the first rows (--column_types overrides); a later value that does not
read as its column's type stops the run, naming the row, before anything in --output_dir
changes.
"""
import itertools
import math
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from absl import logging

from common import iso_dates
from common.errors import UserError
from input_fns import split as data_split
from input_fns import (column_choice, csv_files, file_patterns, held_out, stream_shards,
                       table_records, table_schema)

SAMPLE_ROWS = 10_000  # rows the column types and the task are inferred from
CHUNK_ROWS = 4096  # rows summarized at a time (numpy per column)


_WHAT = {'int': 'an int', 'float': 'a finite number',
         'date': 'a date of the calendar (YYYY-MM-DD, then perhaps the time)'}


def parse_column_types(text: Optional[str], columns: List[str]) -> Dict[str, str]:
    """--column_types=NAME:float,...: {column: dtype}."""
    types = {}
    for item in filter(None, (part.strip() for part in (text or '').split(','))):
        name, _, dtype = item.rpartition(':')
        if dtype not in table_schema.DTYPES or not name:
            raise UserError(f'--column_types: cannot read {item!r}; write NAME:TYPE with TYPE '
                            f'one of {", ".join(table_schema.DTYPES)}')
        if name not in columns:
            raise UserError(f'--column_types: no column {name!r}; the columns: '
                            f'{", ".join(columns)}')
        types[name] = dtype
    return types


def row_key(fields: List[str]) -> str:
    """What a row's split is decided by (input_fns/split.py): its fields, not their quoting."""
    return '\x1f'.join(fields)


class Table:
    """A CSV source's header, column types and task, from its first file's first rows; the
    columns are the header's less --ignore_columns (a row's split still goes by all its fields)."""

    def __init__(self, paths: List[str], label: str, column_types: Optional[str],
                 task: Optional[str], na_values: Sequence[str],
                 known_types: Optional[Dict[str, str]] = None,
                 csv_format: csv_files.CsvFormat = csv_files.CsvFormat(),
                 ignore_columns: Optional[Sequence[str]] = None,
                 weight_column: Optional[str] = None):
        self.paths, self.na_values, self.format = paths, frozenset(na_values), csv_format
        rows = itertools.islice(csv_files.read_rows(paths[0], csv_format.delimiter),
                                SAMPLE_ROWS + 1)
        self.header = self._read_header(next(rows, None), label)
        self.ignored = column_choice.ignored_columns(ignore_columns, self.header, label,
                                                    weight_column)
        self._kept = [index for index, name in enumerate(self.header)
                      if name not in self.ignored]
        self.columns = [self.header[index] for index in self._kept]
        self.label, self.label_index = label, self.columns.index(label)
        given = {**{name: dtype for name, dtype in (known_types or {}).items()
                    if name in self.columns}, **parse_column_types(column_types, self.header)}
        sample = [fields for _, fields in rows if len(fields) == len(self.header)]
        present = [[value for value in (field.strip() for field in column)
                    if value not in self.na_values] for column in zip(*sample)] or [
            [] for _ in self.header]
        present = [present[index] for index in self._kept]
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
        number = float if csv_format.decimal == '.' else table_schema.decimal_comma_float
        self._converters = [{'int': int, 'float': number, 'date': iso_dates.check,
                             'string': str}[dtype]
                            for dtype in self.dtypes]
        self._floats = [index for index, dtype in enumerate(self.dtypes) if dtype == 'float']

    def _read_header(self, header: Optional[Tuple[int, List[str]]], label: str) -> List[str]:
        if header is None:
            raise UserError(f'{self.paths[0]}: empty; a CSV file starts with a header naming its '
                            'columns')
        names = [name.strip() for name in header[1]]
        column_choice.check_names(names, f'{self.paths[0]} line 1')
        if label not in names:
            raise UserError(f'--label={label}: {self.paths[0]} has no such column; its columns: '
                            f'{", ".join(names)}')
        return names

    def _label_dtype(self, given: Dict[str, str]) -> str:
        """A label of dates is read as class names (a model predicts no date)."""
        if self.dtypes[self.label_index] == 'date':
            if given.get(self.label) == 'date':
                raise UserError(f'--column_types={self.label}:date: the label is what the '
                                'model predicts, a class or a number, not a date')
            self.dtypes[self.label_index] = 'string'
        return self.dtypes[self.label_index]

    def _inferred_dtype(self, column: str, values: List[str]) -> str:
        dtype = table_schema.infer_dtype(values, self.format.decimal)
        if dtype == 'string' and self.format.other_mark_numbers(values):
            other = self.format.other_mark
            raise UserError(f'{self.paths[0]}, column {column!r}: numbers with a decimal '
                            f'{csv_files.MARK_NAMES[other]} ({values[0]!r}), where the file is '
                            f'read as {self.format.description()}; pass --decimal={other} to '
                            f'read them as numbers, or --column_types={column}:string as text')
        return dtype

    def typed_rows(self) -> Iterator[Tuple[str, List]]:
        """(the row's key for the split, its values typed, None for missing) of every file's rows."""
        for path in self.paths:
            rows = csv_files.read_rows(path, self.format.delimiter)
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
                table_schema.parse_value(field, dtype, self.format.decimal)
            except ValueError:
                wider = 'float' if dtype == 'int' else 'string'
                raise UserError(f'{path} line {line}, column {column!r}: {field!r} is not '
                                f'{_WHAT[dtype]} (the type read from the first rows); pass '
                                f'--column_types={column}:{wider}, or --na_values if it marks '
                                'a missing value') from None
        raise AssertionError(f'{path} line {line}: a field failed to parse, then parsed')


def write_table(output_dir: str, rows: Iterator[Tuple[bytes, List, bytes]], stats,
                label: str, validation_fraction: float, num_shards: int, num_eval_shards: int,
                what: str, only_split: Optional[str] = None):
    """Writes rows ((split key, typed values, serialized record)) to the train and validation
    splits (every row to only_split, when given), every split's rows into stats (which keep
    statistics of one, and the label's classes of all); rows without a label are skipped and
    counted.
    Returns ({split: SplitWriter}, {split: rows skipped}), the shards not yet in place."""
    shard_counts = {'train': num_shards}
    if only_split:
        shard_counts = {only_split: num_shards if only_split == 'train' else num_eval_shards}
    elif validation_fraction:
        shard_counts['validation'] = num_eval_shards
    skipped = {split: 0 for split in shard_counts}
    chunks, counted = {split: [] for split in shard_counts}, only_split or 'train'
    with stream_shards.streamed_splits(output_dir, shard_counts) as writers:
        for count, (key, values, record) in enumerate(rows, 1):
            split = only_split or ('validation' if data_split.is_validation(
                key, validation_fraction) else 'train')
            if values[stats.label_index] is None:
                skipped[split] += 1
                continue
            writers[split].write(record)
            chunks[split].append(values)
            if len(chunks[split]) == CHUNK_ROWS:
                stats.add_rows(chunks[split], split)
                chunks[split] = []
            if count % 1_000_000 == 0:
                logging.info('%s: %d rows read', what, count)
        for split, chunk in chunks.items():
            stats.add_rows(chunk, split)
        if stats.classes:
            stats.classes.refuse_untrained(counted, what)
            stats.classes.warn_unlearnable(counted)
        if not writers[counted].written:
            raise UserError(f'{what}: no {counted} rows (rows with a {label!r} value'
                            + ('' if only_split else ', outside --validation_fraction')
                            + '); give data with rows')
    return writers, skipped


def prepare_csv(*, source: str, label: str, output_dir: str, column_types: Optional[str],
                task: Optional[str], na_values: List[str], max_vocabulary: int,
                weight_column: Optional[str], validation_fraction: float, num_shards: int,
                num_eval_shards: int, seed: int, schema_from: Optional[str] = None,
                split: Optional[str] = None, delimiter: Optional[str] = None,
                decimal: Optional[str] = None,
                ignore_columns: Optional[List[str]] = None) -> Dict:
    """Writes the 'train' (and 'validation') split of a CSV source, or every row to --split,
    and the schema; with --schema_from, the columns take that prepared table's types. The
    files are read as the first one is written (csv_files.file_format), unless told."""
    data_split.check_fraction(validation_fraction)
    known_types, trained = held_out.trained_schema(schema_from)
    label, task, weight_column, ignore_columns = held_out.trained_defaults(
        trained, label, task, weight_column, ignore_columns)
    if not label:
        raise UserError('--label is required for csv: the column to predict')
    paths = file_patterns.source_files(source, 'a CSV file (.csv or .csv.gz) or a glob of them',
                                       '*.csv')
    csv_format = csv_files.file_format(paths[0], delimiter, decimal)
    logging.info('--source=%s: read as %s (--delimiter and --decimal say otherwise)', source,
                 csv_format.description())
    table = Table(paths, label, column_types, task, na_values, known_types, csv_format,
                  ignore_columns, weight_column)
    stats = table_schema.TableStats(table.columns, table.dtypes, label, table.task,
                                    max_vocabulary, seed, weight_column, split or 'train',
                                    (schema_from, trained))
    encoder = table_records.RowEncoder(table.names, table.dtypes)
    rows = ((key.encode(), values, encoder.encode(values)) for key, values in table.typed_rows())
    writers, skipped = write_table(output_dir, rows, stats, label, validation_fraction,
                                   num_shards, num_eval_shards, f'--source={source}', split)
    schema = stats.schema(na_values, table.ignored)
    schema['label']['missing'] = sum(skipped.values())
    entries = {split: dict(skipped=skipped[split], features=dict(zip(table.names, table.dtypes)),
                           sources=table.paths, seed=seed,
                           extra={'skipped_because': 'the label is missing',
                                  'validation_fraction': validation_fraction,
                                  **stats.split_entry_extra(split)})
               for split in writers}
    return stream_shards.publish(output_dir, writers, entries, 'csv',
                                 {**schema, 'source': source, 'csv_format': csv_format.to_json()})
