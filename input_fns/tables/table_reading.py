"""A table's rows read as typed values (None: missing), one way for `prepare csv`, for held-out
rows (--schema_from) and for --mode=predict: each column as the schema records that prepare read
it (TableReading): the fields marking a missing value (--na_values, an empty one always), the
style of a column of formatted numbers (input_fns/tables/number_formats.py), a date column's format,
and what a float beyond float32 becomes (--float_overflow). The file's own format (delimiter,
marks, encoding) is csv_files.CsvFormat, which the schema keeps beside them (`csv_format`).

A schema written before a field was recorded reads as rows were read then: the default missing
markers, a column's style read from each file's first rows, a float beyond float32 an error.
"""
import dataclasses
from typing import Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple

from common.errors import UserError
from features import iso_dates, value_lists
from input_fns.tables import csv_files, number_formats, table_records, table_schema

FLOAT_OVERFLOWS = ('error', 'inf')
_WHAT = {'int': 'an int', 'float': 'a finite number'}
_BEYOND = {'int': "int64's range (up to 19 digits), which the records hold",
           'float': "float32's range (±3.4e38), which the records hold"}
# The features' fields a reading keeps (the export's copy of the schema: reading_record).
_ENTRY_FIELDS = ('name', 'column', 'dtype', 'format', 'number_style', 'shape',
                 value_lists.RAGGED)


@dataclasses.dataclass(frozen=True)
class TableReading:
    """How a table's rows were read, as its schema records it; styles and date formats by
    column (the header's name)."""
    na_values: FrozenSet[str] = frozenset(table_schema.DEFAULT_NA_VALUES)
    float_overflow: str = 'error'
    styles: Mapping[str, number_formats.NumberStyle] = dataclasses.field(default_factory=dict)
    date_formats: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # {list column: its form}: read as a JSON list (features/value_lists.py)
    list_forms: Mapping[str, value_lists.Form] = dataclasses.field(default_factory=dict)

    @classmethod
    def of_schema(cls, schema: Optional[Dict], na_values: Optional[Sequence[str]] = None,
                  float_overflow: Optional[str] = None) -> 'TableReading':
        """The reading a schema (or its reading_record) records, where na_values and
        float_overflow (the flags) do not say otherwise; no schema, or an older one: the
        defaults (an empty na_values list, as `prepare examples` writes, too)."""
        schema = schema or {}
        entries = [*schema.get('features', []), *filter(None, [schema.get('label'),
                                                               schema.get('weight')])]
        columns = {entry.get('column', entry['name']): entry for entry in entries}
        return cls(
            frozenset(na_values if na_values is not None else
                      schema.get('na_values') or table_schema.DEFAULT_NA_VALUES) | {''},
            float_overflow or schema.get('float_overflow', 'error'),
            {column: number_formats.NumberStyle(**entry['number_style'])
             for column, entry in columns.items() if 'number_style' in entry},
            {column: entry.get('format', 'iso') for column, entry in columns.items()
             if entry['dtype'] == 'date'},
            {column: value_lists.form(entry) for column, entry in columns.items()
             if value_lists.is_list(entry)})

    def record_in(self, schema: Dict) -> Dict:
        """The schema with this reading in it: its missing markers, float overflow, and each
        column's number style beside the column's entry."""
        for entry in [*schema['features'], schema['label'], *filter(None, [schema.get('weight')])]:
            style = self.styles.get(entry.get('column', entry['name']))
            if style:
                entry['number_style'] = dataclasses.asdict(style)
        return {**schema, 'na_values': sorted(self.na_values), 'float_overflow':
                self.float_overflow}

    def sampled(self, rows: Iterable[List[str]], header: Sequence[str], columns: Sequence[str],
                dtypes: Mapping[str, str], csv_format: csv_files.CsvFormat, where: str
                ) -> Tuple['TableReading', List[List[str]]]:
        """This reading with the number style of each of `columns` found in a file's first rows
        (their fields in header's order), and each column's present values in them (as plain
        numbers where styled). A column's style: the recorded one where it has the file's
        decimal mark, else the one its values are all written in (number_formats.column_style),
        if any; none for a text column (dtypes: those known)."""
        indices = [list(header).index(column) for column in columns]
        present: List[List[str]] = [[] for _ in columns]
        for fields in rows:
            if len(fields) == len(header):
                for values, index in zip(present, indices):
                    if (value := fields[index].strip()) not in self.na_values:
                        values.append(value)
        styles = {}
        for column, values in zip(columns, present):
            recorded = self.styles.get(column)
            if dtypes.get(column) in table_schema.TEXT_DTYPES or column in self.list_forms:
                continue
            if recorded and recorded.decimal == csv_format.decimal:
                styles[column] = recorded
            elif (style := number_formats.column_style(values, csv_format,
                                                      f'{where}, column {column!r}')):
                styles[column] = style
        present = [[styles[column].plain(value) for value in values] if column in styles
                   else values for column, values in zip(columns, present)]
        return dataclasses.replace(self, styles=styles), present


# advice(column, dtype, field, beyond): what the user may do about a field that is not its
# column's type (beyond: a number the records cannot hold).
Advice = Callable[[str, str, str, bool], str]


class RowReader:
    """A file's rows (their fields in its header's order) -> the typed values of `columns`, as
    `reading` reads them; a field that is not its column's type is a UserError naming the file,
    line and column."""

    def __init__(self, header: Sequence[str], columns: Sequence[str], dtypes: Sequence[str],
                 reading: TableReading, decimal: str, advice: Advice):
        self.width, self.columns, self.dtypes = len(header), list(columns), list(dtypes)
        self.reading, self.decimal, self._advice = reading, decimal, advice
        self.indices = [list(header).index(column) for column in columns]  # in the header
        self._every_field = self.indices == list(range(len(header)))
        self._converters = [self._converter(column, dtype) for column, dtype in zip(columns, dtypes)]
        # Each number's range, checked after the fast path: int64's less INT_MISSING, float32's.
        limits = {'int': table_records.INT_RANGE, 'float': table_records.FLOAT32_RANGE}
        self._ranged = [(index, *limits[dtype]) for index, (column, dtype)
                        in enumerate(zip(columns, dtypes))
                        if dtype in limits and column not in reading.list_forms]
        self.overflowed: Dict[str, int] = {}  # floats read as ±inf, by column

    def __getstate__(self) -> Dict:
        """A worker process's copy (column_typing.ColumnTyping's), which reads fields by
        column_values: its converters made anew there; no advice, which only typed's
        errors give, in the process reading the file."""
        return {**self.__dict__, '_converters': None, '_advice': None}

    def __setstate__(self, state: Dict) -> None:
        self.__dict__.update(state)
        self._converters = [self._converter(column, dtype)
                            for column, dtype in zip(self.columns, self.dtypes)]

    def _converter(self, column: str, dtype: str):
        """A column's field -> its value (ValueError if it is none): the fast path of typed."""
        if column in self.reading.list_forms:
            list_form = self.reading.list_forms[column]
            return lambda text: value_lists.parse_json_list(text, dtype, list_form)
        number = float if self.decimal == '.' else table_schema.decimal_comma_float
        convert = ({'int': int, 'float': number, 'string': str, 'text': str}.get(dtype) or
                   (lambda text: iso_dates.check(text, self.reading.date_formats[column])))
        style = self.reading.styles.get(column)
        return (lambda text: convert(style.plain(text))) if style else convert

    def typed(self, path: str, line: int, fields: List[str]) -> List:
        if len(fields) != self.width:
            raise UserError(f'{path} line {line}: {len(fields)} fields, but the header names '
                            f'{self.width} columns; fix that row (quote a field that holds a '
                            'comma)')
        if not self._every_field:
            fields = [fields[index] for index in self.indices]
        fields = [field.strip() for field in fields]
        na_values = self.reading.na_values
        try:  # the fast way, one comprehension; the slow one below says what failed
            values = [None if field in na_values else convert(field)
                      for convert, field in zip(self._converters, fields)]
            if all(values[index] is None or low <= values[index] <= high
                   for index, low, high in self._ranged):
                return values
        except ValueError:
            pass
        return [None if field in na_values else self._value(path, line, column, dtype, field)
                for column, dtype, field in zip(self.columns, self.dtypes, fields)]

    def column_values(self, index: int, fields: List[str]) -> Optional[List]:
        """One column's stripped fields of a batch of rows typed as typed's fast path types
        them (None: missing); None where a field needs its slow path (not the column's type,
        or beyond the records' range), which typed itself reads or refuses."""
        convert, na_values = self._converters[index], self.reading.na_values
        try:
            values = [None if field in na_values else convert(field) for field in fields]
        except ValueError:
            return None
        limits = next(((low, high) for ranged, low, high in self._ranged if ranged == index), None)
        if limits and not all(value is None or limits[0] <= value <= limits[1] for value in values):
            return None
        return values

    def _value(self, path: str, line: int, column: str, dtype: str, field: str):
        if column in self.reading.list_forms:
            try:
                return self._converters[self.columns.index(column)](field)
            except ValueError as e:
                raise UserError(f'{path} line {line}, column {column!r}: {e}; the model takes '
                                f'{value_lists.describe(self.reading.list_forms[column])} '
                                f'({dtype}): fix that row') from None
        style = self.reading.styles.get(column)
        try:
            value = table_schema.parse_value(
                style.plain(field) if style else field, dtype, self.decimal,
                self.reading.date_formats.get(column, 'iso'), self.reading.float_overflow)
        except table_schema.OutOfRange:
            raise UserError(f'{path} line {line}, column {column!r}: {field!r} is beyond '
                            f'{_BEYOND[dtype]}{self._advice(column, dtype, field, True)}') from None
        except ValueError:
            raise UserError(f'{path} line {line}, column {column!r}: {field!r} is not '
                            f'{self._what(column, dtype)}{self._advice(column, dtype, field, False)}'
                            ) from None
        if dtype == 'float' and value in (float('inf'), float('-inf')):
            self.overflowed[column] = self.overflowed.get(column, 0) + 1
        return value

    def _what(self, column: str, dtype: str) -> str:
        if column in self.reading.styles:
            return f'{_WHAT[dtype]} written as {self.reading.styles[column].example!r} is'
        if dtype != 'date':
            return _WHAT.get(dtype, dtype)
        date_format = self.reading.date_formats[column]
        return f'a date of the calendar ({"YYYY-MM-DD" if date_format == "iso" else date_format})'


def reading_record(schema: Optional[Dict]) -> Optional[Dict]:
    """What an export keeps of its training table's schema for --mode=predict to read rows as
    prepare did: the file format, the reading (TableReading.of_schema reads it) and each
    feature's type, format and style; None for a schema of another kind, or none."""
    if not schema or schema.get('kind') != 'table':
        return None
    return {'csv_format': schema.get('csv_format', {}),
            **{key: schema[key] for key in ('na_values', 'float_overflow') if key in schema},
            'features': [{key: entry[key] for key in _ENTRY_FIELDS if key in entry}
                         for entry in schema['features']]}
