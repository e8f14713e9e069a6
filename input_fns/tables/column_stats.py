"""Each column's statistics, gathered a chunk of values at a time in bounded memory: numbers'
moments and quantiles, text's most frequent values, free text's most frequent words
(features/free_text.py), dates' as days (features/iso_dates.py).
"""
import collections
from typing import Dict, List

import numpy as np

from features import free_text, iso_dates

QUANTILES = tuple(i / 20 for i in range(21))  # 0%, 5%, ..., 100%
QUANTILE_SAMPLE = 10_000  # values per number column the quantiles are read from (exact below it)


def _chunk_moments(values: np.ndarray):
    return len(values), float(values.mean()), float(((values - values.mean()) ** 2).sum())


class NumberStats:
    """count, missing, mean, std, min, max, and quantiles from a uniform sample of the values;
    those of the finite values, with the infinities (--float_overflow=inf) counted apart."""

    def __init__(self, seed: int):
        self.count = self.missing = self.infinite = 0
        self.mean = self.m2 = 0.0
        self.min = self.max = None
        self._random = np.random.RandomState(seed)
        self._sample, self._keys = np.zeros(0), np.zeros(0)

    def add(self, values, missing: int) -> None:
        """values: a list, or a NumPy array, of the chunk's present values."""
        self.missing += missing
        if not len(values):
            return
        chunk = np.asarray(values, np.float64)
        finite = np.isfinite(chunk)
        if not finite.all():
            self.infinite += int(len(chunk) - finite.sum())
            chunk = chunk[finite]
            if not len(chunk):
                return
        n, mean, m2 = _chunk_moments(chunk)
        total = self.count + n  # Chan et al.'s pairwise combination of mean and variance
        delta = mean - self.mean
        self.mean += delta * n / total
        self.m2 += m2 + delta * delta * self.count * n / total
        self.count = total
        low, high = float(chunk.min()), float(chunk.max())
        self.min = low if self.min is None else min(self.min, low)
        self.max = high if self.max is None else max(self.max, high)
        # A uniform sample: the values with the QUANTILE_SAMPLE smallest random keys.
        keys = np.concatenate([self._keys, self._random.random_sample(n)])
        sample = np.concatenate([self._sample, chunk])
        if len(keys) > QUANTILE_SAMPLE:
            kept = np.argpartition(keys, QUANTILE_SAMPLE)[:QUANTILE_SAMPLE]
            keys, sample = keys[kept], sample[kept]
        self._keys, self._sample = keys, sample

    def summary(self, dtype: str) -> Dict:
        infinite = {'infinite': self.infinite} if self.infinite else {}
        if not self.count:
            return {'count': 0, 'missing': self.missing, **infinite}
        as_type = int if dtype == 'int' else float
        return {'count': self.count, 'missing': self.missing, **infinite, 'mean': self.mean,
                'std': (self.m2 / self.count) ** 0.5, 'min': as_type(self.min),
                'max': as_type(self.max),
                'quantiles': [float(q) for q in np.quantile(self._sample, QUANTILES)]}


class FixedListStats:
    """A fixed-length number list's (features/value_lists.py): NumberStats of all its values (the
    list's mean and std, which normalize it: docs/your-data.md#lists), count and missing of the
    records, and the mean and std at each position (a missing list's fill)."""

    def __init__(self, seed: int, length: int):
        self.values = NumberStats(seed)
        self.length, self.count, self.missing = length, 0, 0
        self.mean, self.m2 = np.zeros(length), np.zeros(length)

    def add(self, values: List[List], missing: int) -> None:
        self.missing += missing
        if not values:
            return
        chunk = np.asarray(values, np.float64)
        self.values.add(chunk.ravel(), 0)
        n, total = len(chunk), self.count + len(chunk)
        delta = chunk.mean(axis=0) - self.mean  # Chan et al.'s combination, at each position
        self.m2 += (((chunk - chunk.mean(axis=0)) ** 2).sum(axis=0)
                    + delta ** 2 * self.count * n / total)
        self.mean += delta * n / total
        self.count = total

    def summary(self, dtype: str) -> Dict:
        values = self.values.summary(dtype)
        summary = {**values, 'count': self.count, 'missing': self.missing,
                   'shape': [self.length]}
        if self.count:
            summary.update(position_mean=[round(float(v), 6) for v in self.mean],
                           position_std=[round(float(v), 6) for v in
                                         np.sqrt(self.m2 / self.count)])
        return summary


class RaggedStats:
    """A variable-length list's (features/value_lists.py): its values' statistics (StringStats'
    vocabulary for text and ints, NumberStats for floats), the records holding one (count) or
    none (missing), and the values a record holds on average and at most."""

    def __init__(self, values):
        self.values = values
        self.count = self.missing = self.total = self.most = 0

    def add(self, values: List[List], missing: int) -> None:
        self.missing += missing
        self.count += len(values)
        flat = [value for row in values for value in row]
        self.total += len(flat)
        self.most = max([self.most] + [len(row) for row in values])
        self.values.add(flat, 0)

    def summary(self, dtype: str) -> Dict:
        summary = self.values.summary(dtype)
        return {**summary, 'count': self.count, 'missing': self.missing, 'ragged': True,
                'values_per_record': round(self.total / self.count, 2) if self.count else 0.0,
                'max_values': self.most}


class StringStats:
    """count, missing, and the most frequent values with their counts.

    Distinct values are counted exactly up to a bound; past it the rarest are dropped (counts
    then are lower bounds, and 'approximate' says so), so a column of unique ids cannot exhaust
    memory.
    """

    def __init__(self, max_vocabulary: int):
        self.max_vocabulary = max_vocabulary
        self.bound = max(100 * max_vocabulary, 100_000)
        self.count = self.missing = 0
        self.counts = collections.Counter()
        self.approximate = False

    def add(self, values: List, missing: int) -> None:
        self.missing += missing
        self.count += len(values)
        self.counts.update(values)
        if len(self.counts) > self.bound:
            self.counts = collections.Counter(dict(self.counts.most_common(self.bound // 2)))
            self.approximate = True

    def summary(self, dtype: str = 'string') -> Dict:
        top = sorted(self.counts.items(), key=lambda item: (-item[1], item[0]))
        top = top[:self.max_vocabulary]
        in_vocabulary = sum(count for _, count in top)
        summary = {'count': self.count, 'missing': self.missing,
                   'vocabulary': [value for value, _ in top],
                   'vocabulary_counts': [count for _, count in top],
                   'oov_count': self.count - in_vocabulary}
        if self.approximate:
            summary['approximate'] = True
        return summary


class TextStats:
    """A free-text column's (features/free_text.py): count and missing of its values, and its
    words' vocabulary (StringStats of the words), with the mean and most words a value."""

    def __init__(self, max_vocabulary: int):
        self.words = StringStats(max_vocabulary)
        self.count = self.missing = self.max_words = 0

    def add(self, values: List, missing: int) -> None:
        self.count += len(values)
        self.missing += missing
        each = [free_text.words(value) for value in values]
        self.max_words = max([self.max_words] + [len(words) for words in each])
        self.words.add([word for words in each for word in words], 0)

    def summary(self, dtype: str = 'text') -> Dict:
        words = self.words.summary()
        oov_words, word_count = words.pop('oov_count'), words.pop('count')
        return {**words, 'count': self.count, 'missing': self.missing, 'oov_words': oov_words,
                'words_per_value': round(word_count / self.count, 2) if self.count else 0.0,
                'max_words': self.max_words}


class DateStats:
    """A date column's: its days' statistics (NumberStats), its first and last date (as
    written), whether it holds times of day (and on a 12-hour clock), and its format."""

    def __init__(self, seed: int, date_format: str = 'iso'):
        self.format = date_format
        self.days = NumberStats(seed)
        self.first = self.last = None
        self.has_time = self.twelve_hour = False

    def add(self, values: List, missing: int) -> None:
        found = [iso_dates.days(value, self.format) for value in values]
        self.days.add(found, missing)
        if not values:
            return
        self.has_time = self.has_time or any(len(iso_dates.to_iso(value, self.format)) > 10
                                             for value in values)
        self.twelve_hour = self.twelve_hour or any(map(iso_dates.MERIDIEM.search, values))
        ends = [values[int(np.argmin(found))], values[int(np.argmax(found))]]
        if self.first is not None:
            ends += [self.first, self.last]
        self.first = min(ends, key=lambda value: iso_dates.days(value, self.format))
        self.last = max(ends, key=lambda value: iso_dates.days(value, self.format))

    def summary(self, dtype: str = 'date') -> Dict:
        days = self.days.summary('float')
        summary = {'count': days.pop('count'), 'missing': days.pop('missing'),
                   'format': self.format}
        if summary['count']:
            summary.update(first=self.first, last=self.last, has_time=self.has_time, days=days,
                           **({'twelve_hour': True} if self.twelve_hour else {}))
        return summary
