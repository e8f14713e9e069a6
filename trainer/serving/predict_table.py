"""--mode=predict on rows: a CSV file with a header (the label column may be there or not; its
delimiter and decimal mark read as `prepare csv` reads them, input_fns/tables/csv_files.py) or JSON
lines ({"age": 39, "workclass": "Private", ...} a line), one JSON line out per row.

Each row becomes the tf.Example TF Serving's Classify API would build, a missing value left
out, and runs through the export's `predict_examples` signature, which fills a missing value
as training did (the feature's mean, or out of vocabulary).
"""
import json
from typing import Dict, Iterator, List, Optional, Tuple

import tensorflow as tf
from absl import logging

from common import files, paths
from common.errors import UserError, op_error_summary
from input_fns.tables import (column_choice, csv_files, held_out, number_formats, table_records,
                              table_schema, workbooks)
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


def _csv_rows(path: str, read_as: csv_files.CsvFormat) -> Iterator[Tuple[int, Dict[str, str]]]:
    rows = read_as.rows(path)
    header = [column_choice.feature_name(name) for name in next(rows, (0, []))[1]]
    for line, fields in rows:
        if len(fields) != len(header):
            raise UserError(f'{path} line {line}: {len(fields)} fields, but the header names '
                            f'{len(header)} columns; fix that row')
        yield line, {name: field.strip() for name, field in zip(header, fields)
                     if field.strip() not in table_schema.DEFAULT_NA_VALUES}


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


def _example(row: Dict, features: Dict[str, str], where: str,
             read_as: csv_files.CsvFormat) -> bytes:
    names = sorted(name for name in row if name in features)
    values = []
    for name in names:
        text = str(row[name])
        written = (number_formats.read(text, read_as.decimal, read_as.thousands)
                   if features[name] != 'string' else None)
        if written and written.beyond_doubt:
            text = written.plain  # '$1,234.50', '12%'
        try:
            values.append(table_schema.parse_value(text, features[name], read_as.decimal))
        except ValueError:
            other = read_as.other_mark
            hint = (f'; pass --decimal={other} if the file writes numbers so' +
                    (f', or --thousands={other} if it groups their thousands so'
                     if written and written.mark == other else '')
                    if read_as.other_mark_numbers([str(row[name])]) else '')
            raise UserError(f'{where}, column {name!r}: {row[name]!r} is not '
                            f'{"an int" if features[name] == "int" else "a number"}, as the '
                            f'model takes it{hint}') from None
    return table_records.encode_example(names, [features[name] for name in names], values)


def predict_rows(signatures, saved_model_dir: str, row_files: List[str],
                 **reading: Optional[str]) -> Iterator[Dict]:
    """One output row per input row of the files, in order: {'file', 'line', outputs...}, as
    each batch of BATCH_ROWS is served (a big file is not held in memory). reading: --decimal,
    --thousands, --encoding (a CSV's, where not as detected, else as the training rows were
    read: the export's CSV_FORMAT_FILE) and --sheet (a workbook's), as csv_files.file_format
    takes them."""
    if EXAMPLES_SIGNATURE not in signatures or 'serving_default' not in signatures:
        raise UserError(f'{saved_model_dir}: not a table model\'s export (no {EXAMPLES_SIGNATURE} '
                        'signature); predict on rows takes a canned model\'s export')
    inputs = signatures['serving_default'].structured_input_signature[1]
    features = {name: _DTYPES[spec.dtype] for name, spec in inputs.items()}
    trained_at = paths.join(saved_model_dir, export.EXTRA_DIR, export.CSV_FORMAT_FILE)
    trained = files.read_json(trained_at) if files.exists(trained_at) else {}
    for path in row_files:
        if path.endswith(('.json', '.jsonl')):
            rows, read_as = _json_rows(path), csv_files.CsvFormat()
        else:
            read_as, taken = held_out.rows_format(path, trained, **reading)
            if taken:
                logging.info('%s: read as %s, as the training rows were (%s: %s)', path,
                             read_as.description(), trained_at, ' '.join(taken))
            rows = _csv_rows(path, read_as)
        batch = []
        for line, row in rows:
            batch.append((line, _example(row, features, f'{path} line {line}', read_as)))
            if len(batch) == BATCH_ROWS:
                yield from _run(signatures[EXAMPLES_SIGNATURE], path, batch)
                batch = []
        if batch:
            yield from _run(signatures[EXAMPLES_SIGNATURE], path, batch)


def _run(signature, path: str, batch) -> List[Dict]:
    try:
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
