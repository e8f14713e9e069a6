"""A table's schema: column types inferred from a sample, and statistics gathered in one stream.

The schema (manifest.json's 'schema', kind 'table') is what the canned models are built from:
each feature's name and dtype; for numbers count, missing, mean, std, min, max and quantiles
(numbers are normalized with the mean and std, and bucketized at the quantiles for trees); for
strings the vocabulary (the most frequent values, with counts, the rest counted as out of
vocabulary), for free text its words' (features/free_text.py); for dates their format, first and last and their days' statistics (the model
derives their parts: features/iso_dates.py); the label's task and classes. Statistics are of the
training split only, so nothing of the validation rows leaks into the model; the label's classes
are every split's (input_fns/tables/label_classes.py).

Rows arrive in chunks of typed values (None for a missing value); each column is summarized
with numpy a chunk at a time (input_fns/tables/column_stats.py), in memory bounded by the sample and
vocabulary sizes, not the table's length.
"""
import math
from typing import Dict, List, Optional, Sequence, Tuple

from common.errors import UserError
from features import iso_dates, model_features, value_lists
from input_fns.tables import column_choice, column_stats, label_classes, table_records

DTYPES = ('int', 'float', 'date', 'string', 'text')
TEXT_DTYPES = ('date', 'string', 'text')  # kept in the records as text
TASKS = ('classification', 'regression')
DEFAULT_NA_VALUES = ('', 'NA', 'N/A', 'NaN', 'nan', 'null', 'NULL', 'None', '?')
MAX_INFERRED_CLASSES = 20  # an int label with at most this many values in the sample: classes


class OutOfRange(ValueError):
    """A number the records cannot hold: an int beyond int64, a float beyond float32."""


def decimal_comma_float(text: str) -> float:
    """'1,5' -> 1.5. ValueError for a point in it: where a comma marks decimals, '1.500' may be
    1500 (a thousands mark), which no reading can tell."""
    if '.' in text:
        raise ValueError(f'{text!r} has a point, where the decimal mark is a comma')
    return float(text.replace(',', '.'))


def parse_value(text: str, dtype: str, decimal: str = '.', date_format: str = 'iso',
                float_overflow: str = 'error'):
    """A field as its column's type; ValueError if it does not read as one, OutOfRange if the
    records cannot hold it. decimal: the mark before a number's fraction ('.', or ',' for
    '1,5'); date_format: a date column's (features/iso_dates.py FORMATS); float_overflow: 'inf'
    reads a float beyond float32 as inf (of its sign), 'error' refuses it."""
    if dtype == 'int':
        value = int(text)
        if not table_records.INT_RANGE[0] <= value <= table_records.INT_RANGE[1]:
            raise OutOfRange(f'{text!r} is beyond int64')
        return value
    if dtype == 'float':
        value = decimal_comma_float(text) if decimal == ',' else float(text)
        if not math.isfinite(value):
            raise ValueError(f'{text!r} is not a finite number')
        if not table_records.FLOAT32_RANGE[0] <= value <= table_records.FLOAT32_RANGE[1]:
            if float_overflow != 'inf':
                raise OutOfRange(f'{text!r} is beyond float32')
            return math.copysign(math.inf, value)
        return value
    if dtype == 'date':
        return iso_dates.check(text, date_format)
    return text


def beyond_int64(values: Sequence[str]) -> Optional[str]:
    """The first of values, all whole numbers, that an int column cannot hold (a 20-digit
    account number; int64's least value, which marks a missing int); None where none is, or
    where not all are whole numbers."""
    wide = None
    for value in values:
        try:
            number = int(value)
        except ValueError:
            return None
        if wide is None and not table_records.INT_RANGE[0] <= number <= table_records.INT_RANGE[1]:
            wide = value
    return wide


def parse_column_types(text: Optional[str], columns: List[str]) -> Dict[str, str]:
    """--column_types=NAME:float,...: {column: dtype}."""
    types = {}
    for item in filter(None, (part.strip() for part in (text or '').split(','))):
        name, _, dtype = item.rpartition(':')
        if dtype not in DTYPES or not name:
            raise UserError(f'--column_types: cannot read {item!r}; write NAME:TYPE with TYPE '
                            f'one of {", ".join(DTYPES)}')
        if name not in columns:
            raise UserError(f'--column_types: no column {name!r}; the columns: '
                            f'{", ".join(columns)}')
        types[name] = dtype
    return types


def infer_dtype(values: Sequence[str], decimal: str = '.') -> str:
    """'int', 'float', 'date' (in one of iso_dates.FORMATS) or 'string': the narrowest type every
    (non-missing) sample value reads as; a column with no value in the sample, or of whole
    numbers beyond int64 (an ID, not a number), is a string (--column_types overrides). A float
    beyond float32 leaves its column float: its row is named when read."""
    if beyond_int64(values):
        return 'string'
    for dtype in ('int', 'float'):
        try:
            for value in values:
                parse_value(value, dtype, decimal, float_overflow='inf')
        except ValueError:
            continue
        return dtype if values else 'string'
    return 'date' if iso_dates.formats_of(list(values)) else 'string'


def infer_task(label_dtype: str, sample_labels: Sequence) -> str:
    """Classification for a string label, or an int label with few distinct values."""
    if label_dtype in TEXT_DTYPES:
        return 'classification'
    if label_dtype == 'int' and len(set(sample_labels)) <= MAX_INFERRED_CLASSES:
        return 'classification'
    return 'regression'


class TableStats:
    """The statistics of every column of a table, fed chunks of typed rows."""

    def __init__(self, columns: List[str], dtypes: List[str], label: str, task: str,
                 max_vocabulary: int, seed: int = 0, weight: Optional[str] = None,
                 statistics_of: str = 'train', trained_from: Tuple[Optional[str], Optional[Dict]]
                 = (None, None), date_formats: Optional[Dict[str, str]] = None,
                 forms: Optional[Dict[str, value_lists.Form]] = None):
        """trained_from: for a held-out split, (--schema_from, the training data's schema);
        date_formats: {date column: its format}, if not ISO; forms: {list column: its form}
        (features/value_lists.py)."""
        self.columns, self.dtypes, self.label, self.task = columns, dtypes, label, task
        self.forms = forms = forms or {}
        for column in filter(None, (label, weight)):
            if forms.get(column) is not None:
                raise UserError(f'feature {column!r}: {value_lists.describe(forms[column])}; a '
                                'label or weight is one value a record: write it so')
        self.label_index, self.statistics_of = columns.index(label), statistics_of
        self.classes = (label_classes.LabelClasses(label, dtypes[self.label_index],
                                                   *trained_from)
                        if task == 'classification' else None)
        self.weight = weight
        if weight is not None:
            if weight not in columns or weight == label:
                raise UserError(f'--weight_column={weight}: no such column (besides the label); '
                                f'the columns: {", ".join(columns)}')
            if dtypes[columns.index(weight)] in TEXT_DTYPES:
                raise UserError(f'--weight_column={weight}: a text column; a weight is a number '
                                f'per row (pass --column_types={weight}:float if it is one)')
        self.stats = []
        for index, dtype in enumerate(dtypes):
            list_form = forms.get(columns[index])
            if list_form == value_lists.RAGGED:
                self.stats.append(column_stats.RaggedStats(
                    column_stats.NumberStats(seed + index) if dtype == 'float'
                    else column_stats.StringStats(max_vocabulary)))
            elif list_form is not None:
                self.stats.append(column_stats.FixedListStats(seed + index, list_form))
            elif index == self.label_index and task == 'classification':
                self.stats.append(column_stats.StringStats(label_classes.MAX_CLASSES))
            elif dtype == 'string':
                self.stats.append(column_stats.StringStats(max_vocabulary))
            elif dtype == 'text':
                self.stats.append(column_stats.TextStats(max_vocabulary))
            elif dtype == 'date':
                self.stats.append(column_stats.DateStats(
                    seed + index, (date_formats or {}).get(columns[index], 'iso')))
            else:
                self.stats.append(column_stats.NumberStats(seed + index))

    def add_rows(self, rows: List[List], split: Optional[str] = None) -> None:
        """A chunk of typed rows of the statistics' split; of another split (held out), only
        the label's classes are counted."""
        columns = list(zip(*rows))
        present = [[value for value in column if value is not None] for column in columns]
        self.add_columns(present, [len(column) - len(values) for column, values in
                                   zip(columns, present)], split,
                         [row[self.label_index] for row in rows])

    def add_columns(self, present: List, missing: List[int], split: Optional[str] = None,
                    labels: Optional[List] = None) -> None:
        """add_rows of a chunk given by column: each column's present values (a list, or a
        NumPy array of numbers) and its count of missing ones; labels: the chunk's label
        values, where some are missing (by default, the label column's)."""
        split = split or self.statistics_of
        if self.classes:
            self.classes.add(split, _as_list(present[self.label_index] if labels is None
                                             else labels))
        if split != self.statistics_of:
            return
        for index, (values, count) in enumerate(zip(present, missing)):
            numbers = isinstance(self.stats[index], column_stats.NumberStats)
            self.stats[index].add(values if numbers else _as_list(values), count)

    def split_entry_extra(self, split: str) -> Dict:
        """What the split's manifest entry says of its label (its class counts)."""
        return self.classes.split_entry(split) if self.classes else {}

    def schema(self, ignored: Sequence[str] = ()) -> Dict:
        """The schema of the statistics; `prepare csv` adds how it read the rows
        (table_reading.TableReading.record_in)."""
        features = []
        for index, (column, dtype) in enumerate(zip(self.columns, self.dtypes)):
            entry = {'name': column_choice.feature_name(column), 'dtype': dtype,
                     **self.stats[index].summary(dtype)}
            if entry['name'] != column:
                entry['column'] = column
            if column == self.weight:
                weight = entry
            elif index != self.label_index:
                if (dtype in ('int', 'float') and entry['count'] and entry['missing']
                        and not value_lists.is_list(entry)):
                    entry['missing_indicator'] = True  # features/model_features.py
                features.append(entry)
        label = self.stats[self.label_index]
        label_entry = {'name': column_choice.feature_name(self.label), 'column': self.label,
                       'dtype': self.dtypes[self.label_index], 'task': self.task,
                       'missing': label.missing}
        if self.task == 'classification':
            label_entry.update(classes=self.classes.names(),
                               class_counts=self.classes.counts(self.statistics_of))
        else:
            label_entry.update(label.summary(self.dtypes[self.label_index]))
        model_features.check_names(features)
        schema = {'kind': 'table', 'features': features, 'label': label_entry,
                  'statistics_of': self.statistics_of, 'ignored_columns': list(ignored)}
        if self.weight is not None:
            schema['weight'] = weight  # each row's weight in the loss and metrics; 1 if missing
        return schema


def _as_list(values) -> List:
    """Python values (a NumPy array's as ints and floats), as the vocabularies count them."""
    return values.tolist() if hasattr(values, 'tolist') else values


def feature(schema: Dict, name: str) -> Optional[Dict]:
    return next((entry for entry in schema['features'] if entry['name'] == name), None)
