"""Which evaluation is best by a metric, and whether the metric stalled: for exports and early stopping.

One home for "better", so the export chosen as best and the evaluations early stopping
counts as no improvement can never disagree.
"""
import dataclasses
import math
from typing import List, Optional

from common.errors import UserError
from trainer.model_dir import ledger
from trainer.model_dir.ledger import LedgerEntry


def default_mode(metric: str) -> str:
    """The usual direction of a metric: smaller loss and error are better, larger anything else."""
    return 'min' if 'loss' in metric or 'error' in metric else 'max'


@dataclasses.dataclass(frozen=True)
class MetricGoal:
    metric: str
    mode: str  # 'max': larger is better; 'min': smaller is better
    flag_name: str = '--metric'  # the flag that named the metric, for error messages

    @classmethod
    def of(cls, metric: str, mode: Optional[str], flag_name: str) -> 'MetricGoal':
        """mode None means the metric's usual direction (default_mode)."""
        return cls(metric, mode or default_mode(metric), flag_name)

    def value(self, entry: LedgerEntry) -> float:
        metrics = entry.metrics
        if self.metric not in metrics:
            raise UserError(f'{self.flag_name}={self.metric}: the evaluation has no such metric; '
                            'it has ' + ', '.join(sorted(metrics)))
        return float(metrics[self.metric])

    def better(self, value: float, than: Optional[float]) -> bool:
        """Strictly better; NaN is never better, and anything beats nothing."""
        if math.isnan(value):
            return False
        if than is None or math.isnan(than):
            return True
        return value > than if self.mode == 'max' else value < than

    def best(self, entries: List[LedgerEntry]) -> Optional[LedgerEntry]:
        """The first evaluated ledger entry, by step, with the best value; None if none."""
        best, best_value = None, None
        for entry in evaluated_by_step(entries):
            value = self.value(entry)
            if self.better(value, best_value):
                best, best_value = entry, value
        return best

    def stalled(self, entries: List[LedgerEntry], patience: int) -> Optional[str]:
        """Why to stop, if the last `patience` evaluations did not improve on the best before them."""
        best = self.best(entries)
        if best is None:
            return None
        since = len([e for e in evaluated_by_step(entries) if e.step > best.step])
        if since < patience:
            return None
        return (f'{self.metric} has not improved on {best.metrics[self.metric]:.6g} '
                f'(step {best.step}) in {since} evaluations')


def evaluated_by_step(entries: List[LedgerEntry]) -> List[LedgerEntry]:
    """The ledger entries that hold an evaluation (not a skipped checkpoint), oldest step first."""
    return sorted((e for e in entries if e.status == ledger.EVALUATED), key=lambda e: e.step)
