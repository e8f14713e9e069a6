"""--mode=predict on rows: a CSV file with a header (the label column may be there or not) or
JSON lines ({"age": 39, "workclass": "Private", ...} a line), one JSON line out per row, each
read as `prepare csv` read the training rows: by its reader (input_fns/tables/table_reading.py), as
the export's record of their reading says (TABLE_READING_FILE).

Each row becomes the tf.Example TF Serving's Classify API would build, a missing value left
out, and runs through the export's `predict_examples` signature, which fills a missing value
as training did (the feature's mean, or out of vocabulary).
"""
import itertools
import json
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from common import files, paths
from common.errors import UserError, op_error_summary
from input_fns.tables import (column_choice, csv_files, csv_tables, held_out, number_formats,
                              table_reading, table_records, workbooks)
from trainer.serving import export

# .xls: file_format says in one line that an Excel 97-2003 workbook is not read.
TABLE_SUFFIXES = ('.csv', '.csv.gz', '.tsv', '.tsv.gz', '.jsonl', '.json', *workbooks.SUFFIXES,
                  '.xls')
# Excel's "Text (Tab delimited)" and "Unicode Text": rows for a table model, else not an image.
TEXT_SUFFIX = '.txt'
EXAMPLES_SIGNATURE = 'predict_examples'
BATCH_ROWS = 1000
_DTYPES = {tf.int64: 'int', tf.float32: 'float', tf.string: 'string'}
SHOWN_OUTPUTS = ('classes', 'probabilities', 'predictions')  # what a row's line shows


def is_table_file(path: str, signatures) -> bool:
    """Whether predict reads the file as rows, for the export of these signatures."""
    return path.endswith(TABLE_SUFFIXES) or (path.endswith(TEXT_SUFFIX) and
                                             EXAMPLES_SIGNATURE in signatures)


def _json_rows(path: str) -> Iterator[Tuple[int, Dict]]:
    with csv_files.open_text(path) as lines:
        try:
            for line, text in enumerate(lines, 1):
                if not text.strip():
                    continue
                try:
                    row = json.loads(text)
                except ValueError as e:
                    raise UserError(f'{path} line {line}: not JSON ({e}); write one object a '
                                    'line, e.g. {"age": 39, "workclass": "Private"}') from None
                if not isinstance(row, dict):
                    raise UserError(f'{path} line {line}: not a JSON object; write one object a '
                                    'line')
                yield line, {name: value for name, value in row.items() if value is not None}
        except UnicodeDecodeError:
            raise UserError(f'{path}: not UTF-8 text; save the file as UTF-8') from None


def _file_rows(path: str, read_as: csv_files.CsvFormat, features: Dict[str, str]
               ) -> Iterator[Tuple[int, List[str]]]:
    """(line, fields) of a file's rows, its header (as feature names) first: a CSV's or a
    workbook's, or a JSON lines file's values of the features, as text."""
    if path.endswith(('.json', '.jsonl')):
        yield 0, list(features)
        for line, row in _json_rows(path):
            yield line, ['' if row.get(name) is None else
                         json.dumps(row[name]) if isinstance(row[name], list) else str(row[name])
                         for name in features]
        return
    rows = read_as.rows(path)
    yield 0, [column_choice.feature_name(name) for name in next(rows, (0, []))[1]]
    yield from rows


def trained_reading(saved_model_dir: str) -> Tuple[str, Dict]:
    """Where the export keeps how its training rows were read, and that record
    (table_reading.reading_record); an older export's csv_format alone, or nothing."""
    extra = paths.join(saved_model_dir, export.EXTRA_DIR)
    path = paths.join(extra, export.TABLE_READING_FILE)
    if files.exists(path):
        return path, files.read_json(path)
    path = paths.join(extra, export.CSV_FORMAT_FILE)  # written by exports before the reading
    return path, {'csv_format': files.read_json(path) if files.exists(path) else {}}


def examples(path: str, features: Dict[str, str], trained: Dict, trained_at: str = '',
             **reading: Optional[str]) -> Iterator[Tuple[int, bytes]]:
    """(line, serialized tf.Example) of each row of a file: its fields of the features (by
    name: dtype) read as prepare read the training rows (trained: their reading_record), a
    missing one left out."""
    read_as = csv_files.CsvFormat()
    if not path.endswith(('.json', '.jsonl')):
        read_as, taken = held_out.rows_format(path, trained.get('csv_format', {}), **reading)
        if taken:
            logging.info('%s: read as %s, as the training rows were (%s: %s)', path,
                         read_as.description(), trained_at, ' '.join(taken))
    rows = _file_rows(path, read_as, features)
    header, column_of = next(rows)[1], {entry['name']: entry.get('column', entry['name'])
                                        for entry in trained.get('features', [])}
    trained_dtypes = {entry['name']: entry['dtype'] for entry in trained.get('features', [])}
    names = [name for name in dict.fromkeys(header) if name in features]
    columns = [column_of.get(name, name) for name in names]
    dtypes = [trained_dtypes.get(name, features[name]) for name in names]
    header = [column_of.get(name, name) for name in header]  # as the training rows named them
    table, _ = table_reading.TableReading.of_schema(trained).sampled(
        (fields for _, fields in itertools.islice(_file_rows(path, read_as, features), 1,
                                                  csv_tables.SAMPLE_ROWS + 1)),
        header, columns, dict(zip(columns, dtypes)), read_as, path)
    reader = table_reading.RowReader(header, columns, dtypes, table, read_as.decimal,
                                     _advice(read_as))
    for line, fields in rows:
        yield line, table_records.encode_example(names, dtypes, reader.typed(path, line, fields))


def _advice(read_as: csv_files.CsvFormat) -> table_reading.Advice:
    """What to do about a field the model cannot take: the other decimal or thousands mark,
    where the field holds one."""
    def advice(column: str, dtype: str, field: str, beyond: bool) -> str:
        other = read_as.other_mark
        if beyond or not read_as.other_mark_numbers([field]):
            return ', as the model takes it; fix that row'
        written = number_formats.read(field, read_as.decimal)
        return (f', as the model takes it; pass --decimal={other} if the file writes numbers so'
                + (f', or --thousands={other} if it groups their thousands so'
                   if written and written.mark == other else ''))
    return advice


def predict_rows(signatures, saved_model_dir: str, row_files: List[str],
                 **reading: Optional[str]) -> Iterator[Dict]:
    """One output row per input row of the files, in order: {'file', 'line', outputs...}, as
    each batch of BATCH_ROWS is served (a big file is not held in memory). reading: --decimal,
    --thousands, --encoding (a CSV's, where not as detected, else as the training rows were
    read: the export's TABLE_READING_FILE) and --sheet (a workbook's), as csv_files.file_format
    takes them."""
    if EXAMPLES_SIGNATURE not in signatures or 'serving_default' not in signatures:
        raise UserError(f'{saved_model_dir}: not a table model\'s export (no {EXAMPLES_SIGNATURE} '
                        'signature); predict on rows takes a canned model\'s export')
    inputs = signatures['serving_default'].structured_input_signature[1]
    features = {name: _DTYPES[spec.dtype] for name, spec in inputs.items()}
    trained_at, trained = trained_reading(saved_model_dir)
    for path in row_files:
        batch = []
        for line_and_example in examples(path, features, trained, trained_at, **reading):
            batch.append(line_and_example)
            if len(batch) == BATCH_ROWS:
                yield from _run(signatures[EXAMPLES_SIGNATURE], path, batch)
                batch = []
        if batch:
            yield from _run(signatures[EXAMPLES_SIGNATURE], path, batch)


def _run(signature, path: str, batch) -> List[Dict]:
    try:
        # A loaded TF1 signature binds keyword inputs only after its first try has formatted
        # them into an error it then drops (TF 2.15): in numpy's short form that takes 0.02 s
        # a batch of 1,000 MNIST rows, in full 2.6 s or more.
        with np.printoptions(threshold=6):
            outputs = signature(inputs=tf.constant([example for _, example in batch]))
    except tf.errors.InvalidArgumentError as e:
        raise UserError(f'{path}: the model refused rows {batch[0][0]}-{batch[-1][0]} '
                        f'({op_error_summary(e)})') from None
    shown = [name for name in SHOWN_OUTPUTS if name in outputs] or sorted(outputs)
    values = {name: outputs[name].numpy().tolist() for name in shown}
    rows = []
    for index, (line, _) in enumerate(batch):
        row = {'file': path, 'line': line}
        for name in shown:
            value = values[name][index]
            if name == 'classes':  # one class name, as bytes
                value = value[0].decode() if isinstance(value, list) else value.decode()
            elif name == 'predictions' and isinstance(value, list) and len(value) == 1:
                value = value[0]
            row[name] = value
        rows.append(row)
    return rows
