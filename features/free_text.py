"""Free-text columns (dtype 'text': a review, a description, a note) are read as their words. As
a category (dtype 'string') such a column is a vocabulary of whole values that no new row
repeats, so a model learns nothing from it; as words, `refund` in a new complaint means what it
meant in the training rows.

A value's words: lower-cased, split at spaces and ASCII punctuation, by the same pattern in Python
(prepare's vocabulary of the training split's most frequent words) and in the graph
(input_fns/tables/table_records.py `with_derived`, for training and serving alike). The model reads
NAME_words: the value's words in that vocabulary (the rest in one out-of-vocabulary bucket), as
a [batch, words] string tensor padded with '' (which feature columns read as no word), of the
most words a training value had, at most MAX_WORDS: a longer value's first MAX_WORDS words.
"""
import re
from typing import Dict, List, Sequence

SEPARATORS = r'[\t\n\f\r !-/:-@\[-`{-~]+'  # RE2 and Python's re read it alike
_SPLIT = re.compile(SEPARATORS)
MIN_ROWS = 50  # sample values before a column can be judged free text
MIN_WORDS = 3.0  # mean words a value, at least
MIN_DISTINCT = 0.5  # share of the sample's values that differ, at least
MAX_WORDS = 256  # words of a value the model reads


def words(text: str) -> List[str]:
    return [word for word in _SPLIT.split(text.lower()) if word]


def words_kept(entry: Dict) -> int:
    """The words of a value the model reads: as many as the longest training value's."""
    return max(1, min(MAX_WORDS, entry.get('max_words', MAX_WORDS)))


def words_name(name: str) -> str:
    """The feature a text column's words are, beside it."""
    return f'{name}_words'


def is_free_text(values: Sequence[str]) -> bool:
    """Whether a text column's sample reads as prose rather than categories: most values
    differ, and they hold MIN_WORDS words or more on average."""
    return (len(values) >= MIN_ROWS and len(set(values)) >= MIN_DISTINCT * len(values) and
            sum(len(words(value)) for value in values) >= MIN_WORDS * len(values))
