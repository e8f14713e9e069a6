"""What a model reads of a table's schema entry: the feature itself, or features derived from it
in the graph (input_fns/tables/table_records.py `with_derived`, for training and serving alike): a
date's parts (features/iso_dates.py), a free text's words (features/free_text.py), and, beside a number some training rows lacked, whether it
is missing (a missing number is read as the training mean, which alone would hide that it was
missing: an unmeasured value often says something of the label).
"""
from typing import Dict, List

from common.errors import UserError
from features import free_text, iso_dates

MISSING = 'missing'  # the indicator's value for a missing number; a present one's is ''
CATEGORICAL = ('string', 'words')  # looked up in a vocabulary; 'words': several a row


def indicator_name(name: str) -> str:
    return f'{name}_missing'


def model_entries(entry: Dict) -> List[Dict]:
    """A feature's schema entry -> the entries of what the model reads of it, as table_columns
    and the trees take features."""
    if entry['dtype'] == 'date':
        return iso_dates.part_entries(entry)
    if entry['dtype'] == 'text':
        return [{'name': free_text.words_name(entry['name']), 'dtype': 'words',
                 'count': entry['count'], 'vocabulary': entry.get('vocabulary', [])}]
    if entry.get('missing_indicator'):
        return [entry, {'name': indicator_name(entry['name']), 'dtype': 'string',
                        'count': entry['count'], 'vocabulary': [MISSING]}]
    return [entry]


def check_names(features: List[Dict]) -> None:
    """A derived feature must not take the name of a column."""
    names = {entry['name'] for entry in features}
    for entry in features:
        for derived in model_entries({'days': {}, **entry}):
            if derived['name'] != entry['name'] and derived['name'] in names:
                raise UserError(f'column {derived["name"]!r}: the name the model gives a feature '
                                f'it derives from column {entry["name"]!r}; rename it, or leave '
                                'one of them out with --ignore_columns')
