"""A classification label's classes: every split's, with each split's rows of each class.

A table's statistics are its training split's (input_fns/tables/table_schema.py), but its label's
classes are every split's: a rare class whose few rows all fell in validation still needs an
output of the model, or evaluating the validation split stops at its first batch. Each split's
counts go in its manifest entry ('class_counts'), which the eval job checks against the
classes of the model it evaluates (trainer/run/data_schema.py).
"""
import collections
from typing import Dict, List, Optional

from absl import logging

from common.errors import UserError

MAX_CLASSES = 1000


def with_rows(counts: Dict[str, int], shown: int = 5) -> str:
    """Classes and their rows for a message: "'c' (2 rows), 'd' (1 rows)", the first few."""
    listed = ', '.join(f'{name!r} ({count} rows)' for name, count in list(counts.items())[:shown])
    return listed + (', ...' if len(counts) > shown else '')


class LabelClasses:
    """The label's values in each split, counted a chunk of rows at a time."""

    def __init__(self, label: str, dtype: str, schema_from: Optional[str] = None,
                 trained_schema: Optional[Dict] = None):
        """trained_schema: for a held-out split, the training data's (--schema_from)."""
        self.label, self.dtype, self.schema_from = label, dtype, schema_from
        trained_label = (trained_schema or {}).get('label') or {}
        self.trained: Optional[List[str]] = (
            [str(name) for name in trained_label['classes']]
            if trained_label.get('task') == 'classification' else None)
        self.by_split: Dict[str, collections.Counter] = collections.defaultdict(
            collections.Counter)

    def add(self, split: str, values: List) -> None:
        """A chunk of the split's label values (None, a missing one, is no class)."""
        self.by_split[split].update(values)  # raw values: Counter counts a list in C
        if len(self.names()) > MAX_CLASSES:
            raise UserError(f'--label={self.label}: more than {MAX_CLASSES} distinct values; '
                            'for a number to predict pass --task=regression')

    def names(self) -> List[str]:
        """Every split's classes, as text: in numeric order for an int label (0, 1, 2, 10),
        else alphabetical."""
        found = {str(value) for counts in self.by_split.values() for value in counts
                 if value is not None}
        if self.dtype == 'int':
            return sorted(found, key=lambda value: (int(value), value))
        return sorted(found)

    def counts(self, split: str) -> List[int]:
        """The split's rows of each class, in names() order."""
        by_name = {str(value): count for value, count in self.by_split[split].items()}
        return [by_name.get(name, 0) for name in self.names()]

    def split_entry(self, split: str) -> Dict:
        """What the split's manifest entry says of its label."""
        return {'class_counts': {name: count for name, count in
                                 zip(self.names(), self.counts(split)) if count}}

    def refuse_untrained(self, split: str, what: str) -> None:
        """A held-out split prepared with --schema_from holds only classes the model predicts:
        evaluating another would stop at it, after the preparing was done."""
        if self.trained is None:
            return
        unknown = {name: count for name, count in zip(self.names(), self.counts(split))
                   if count and name not in self.trained}
        if unknown:
            raise UserError(f'{what}: label {self.label!r} holds classes the training data '
                            f'(--schema_from={self.schema_from}) does not: {with_rows(unknown)}; '
                            'a model trained on it cannot predict them: leave those rows out, or '
                            'prepare the training data with them')

    def warn_unlearnable(self, training_split: str) -> None:
        totals = [sum(rows) for rows in zip(*(self.counts(split) for split in self.by_split))]
        for name, trained, total in zip(self.names(), self.counts(training_split), totals):
            if not trained:
                logging.warning('--label=%s: class %r has no row in the training split (%d held '
                                'out): the model has its output but cannot learn it, so its '
                                'held-out rows count as mistakes', self.label, name, total)
