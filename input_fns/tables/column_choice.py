"""Which of a table's columns become a model's features, and under what names: the header's
names made TensorFlow's, checked; the columns left out (--ignore_columns); a warning for a column
that looks like an identifier, which fits the training rows and nothing after them."""
import re
from typing import Dict, List, Optional, Sequence

from absl import logging

from common.errors import UserError

IDENTIFIER_MIN_ROWS = 50  # sample rows before a column of distinct values looks like an id
_NAME_CHARACTER = re.compile(r'[^A-Za-z0-9_.\-]')


def feature_name(column: str) -> str:
    """A column's name as TensorFlow takes it in scope and signature names ('mean radius' ->
    'mean_radius'); serving and predict use these names."""
    name = _NAME_CHARACTER.sub('_', column.strip())
    return name if re.match(r'[A-Za-z0-9.]', name) else f'c{name}'


def ignored_columns(names: Optional[Sequence[str]], columns: Sequence[str], label: str,
                    weight: Optional[str]) -> List[str]:
    """--ignore_columns: columns of the data left out of the model (an id, a name, a free-text
    note), each one of the columns and neither the label nor the weight."""
    for name in names or ():
        if name not in columns:
            raise UserError(f'--ignore_columns: no column {name!r}; the columns: '
                            f'{", ".join(columns)}')
        if name in (label, weight):
            flag = '--label' if name == label else '--weight_column'
            raise UserError(f'--ignore_columns: {name!r} is the {flag}, which the model needs')
    return sorted(set(names or ()))


def warn_of_identifiers(columns: Sequence[str], dtypes: Sequence[str],
                        samples: Sequence[Sequence], label: str, where: str) -> None:
    """Logs each text column whose sample values all differ, and each int column counting up a
    row at a time (a row number): identifiers, which fit the training rows and nothing after
    (a list feature is none)."""
    for column, dtype, values in zip(columns, dtypes, samples):
        if (column == label or len(values) < IDENTIFIER_MIN_ROWS
                or isinstance(values[0], list) or len(set(values)) < len(values)):
            continue
        if dtype == 'string' or (dtype == 'int' and _counts_up(values)):
            logging.warning('%s: column %r holds a different value in each of the first %d rows, '
                            'as an identifier does: a model learns nothing from it that holds '
                            'for new rows; --ignore_columns=%s leaves it out', where, column,
                            len(values), column)


def check_names(columns: List[str], where: str) -> None:
    """A header's names: none empty, none twice (also once made TensorFlow names)."""
    seen: Dict[str, str] = {}
    for position, column in enumerate(columns, 1):
        if not column.strip():
            raise UserError(f'{where}: column {position} of the header has no name; name every '
                            'column in the first line')
        name = feature_name(column)
        if name in seen:
            same = 'twice' if seen[name] == column else f'as {seen[name]!r} (both read {name!r})'
            raise UserError(f'{where}: the header names {column!r} {same}; give each column '
                            'a name of its own')
        seen[name] = column


def _counts_up(values: Sequence) -> bool:
    try:  # a column given as int (--column_types) may hold other text: refused when written
        numbers = [int(value) for value in values]
    except ValueError:
        return False
    return all(a < b for a, b in zip(numbers, numbers[1:]))
