"""Reading the JSON records that one process writes for others (a ledger entry, a lease object):
each field checked as it is read, so that a record from elsewhere fails where it is read, in one
line naming the field, not later as a KeyError deep in whoever uses it."""
from typing import Dict

NUMBER = (int, float)


def field(record: Dict, name: str, kinds, optional: bool = False):
    """record[name], which must be of kinds (a type or a tuple; true and false are no number);
    None where optional and absent or null. Raises ValueError naming the field otherwise."""
    if not isinstance(record, dict):
        raise ValueError(f'a JSON object was expected, not {type(record).__name__}')
    value = record.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, kinds) or (isinstance(value, bool) and kinds is not bool):
        wanted = kinds if isinstance(kinds, tuple) else (kinds,)
        raise ValueError(f'"{name}" is {value!r}, not ' + ' or '.join(
            kind.__name__ for kind in wanted))
    return value
