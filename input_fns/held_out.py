"""A held-out table (`prepare csv` or `prepare examples` with --schema_from=DIR --split=test),
written as a model trained on DIR's table reads it: its column types, label, task and weight, and
the columns it left out."""
from typing import Dict, Optional, Tuple

from input_fns import file_patterns


def trained_schema(schema_from: Optional[str]) -> Tuple[Dict[str, str], Optional[Dict]]:
    """({column: dtype}, the schema) of --schema_from (table shards' folder or manifest.json);
    ({}, None) without one."""
    if not schema_from:
        return {}, None
    schema = file_patterns.schema_at(schema_from, 'table')
    entries = [*schema['features'], schema['label'], *filter(None, [schema.get('weight')])]
    return {entry.get('column', entry['name']): entry['dtype'] for entry in entries}, schema


def date_formats(trained: Optional[Dict]) -> Dict[str, str]:
    """{date column: its format} of the trained schema."""
    return {entry.get('column', entry['name']): entry.get('format', 'iso')
            for entry in (trained or {}).get('features', []) if entry['dtype'] == 'date'}


def csv_reading(trained: Optional[Dict], thousands: Optional[str], encoding: Optional[str]):
    """(--thousands, --encoding) as given, else as the trained table's CSV was read."""
    trained_format = (trained or {}).get('csv_format', {})
    return thousands or trained_format.get('thousands'), encoding or trained_format.get('encoding')


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
