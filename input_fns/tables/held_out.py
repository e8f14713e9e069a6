"""A held-out table (`prepare csv` or `prepare examples` with --schema_from=DIR --split=test),
written as a model trained on DIR's table reads it: its column types, label, task and weight, and
the columns it left out; and how to read a file of new rows as the training rows were read."""
import dataclasses
from typing import Dict, List, Optional, Tuple

from input_fns.records import file_patterns
from input_fns.tables import csv_files, workbooks


def trained_schema(schema_from: Optional[str]) -> Tuple[Dict[str, str], Optional[Dict]]:
    """({column: dtype}, the schema) of --schema_from (table shards' folder or manifest.json);
    ({}, None) without one."""
    if not schema_from:
        return {}, None
    schema = file_patterns.schema_at(schema_from, 'table')
    entries = [*schema['features'], schema['label'], *filter(None, [schema.get('weight')])]
    return {entry.get('column', entry['name']): entry['dtype'] for entry in entries}, schema


def rows_format(path: str, trained: Dict, **given: Optional[str]
                ) -> Tuple[csv_files.CsvFormat, List[str]]:
    """The format of a file of new rows (held out, or to predict on) for a model trained on rows
    read as `trained` (the schema's csv_format), where the flags (given: csv_files.file_format's)
    do not say: the training rows' text encoding if this file's start is not UTF-8 (never in
    place of UTF-8, which another encoding would read as other letters, without an error), and
    their decimal and thousands marks if it has their delimiter; with the flags that say what
    was taken from them."""
    encoding = given.get('encoding')
    if not (encoding or workbooks.is_workbook(path) or csv_files.starts_as_utf8(path)):
        encoding = trained.get('encoding')
    detected = csv_files.file_format(path, **{**given, 'encoding': encoding})
    read_as = detected
    if not (detected.workbook or given.get('decimal') or
            detected.delimiter != trained.get('delimiter') or
            given.get('thousands') == trained.get('decimal')):
        read_as = dataclasses.replace(
            detected, decimal=trained.get('decimal', detected.decimal),
            thousands=given.get('thousands') or trained.get('thousands') or detected.thousands)
    taken = [f'--{flag}={getattr(read_as, flag)}' for flag in ('decimal', 'thousands')
             if getattr(read_as, flag) != getattr(detected, flag)]
    return read_as, taken + ([f'--encoding={encoding}'] if encoding != given.get('encoding')
                             else [])


def trained_defaults(trained: Optional[Dict], label, task, weight_column, ignore_columns):
    """(label, task, weight_column, ignore_columns) as given, or else as the trained schema has
    them."""
    if trained:
        label = label or trained['label'].get('column', trained['label']['name'])
        task = task or trained['label']['task']
        weight = trained.get('weight') or {}
        weight_column = weight_column or weight.get('column', weight.get('name'))
        ignore_columns = ignore_columns or trained.get('ignored_columns')
    return label, task, weight_column, ignore_columns
