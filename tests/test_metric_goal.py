"""MetricGoal: which evaluation is best, and whether a metric stalled (exports, early stopping)."""
import math

import pytest

from common.errors import UserError
from helpers import evaluated, skipped
from trainer.model_dir.metric_goal import MetricGoal


def test_better_and_best():
    lower, higher = MetricGoal('loss', 'min'), MetricGoal('accuracy', 'max')
    assert higher.better(0.9, None) and lower.better(0.1, 0.2) and not lower.better(0.2, 0.2)
    assert not lower.better(math.nan, 1.0) and lower.better(1.0, math.nan)
    entries = [evaluated(0, loss=2.0), evaluated(2, loss=0.5), evaluated(4, loss=0.5),
               skipped(6), evaluated(8, loss=math.nan)]
    assert MetricGoal('loss', 'min', '--export_metric').best(entries).step == 2
    with pytest.raises(UserError, match='--export_metric=auc: .* it has loss'):
        MetricGoal('auc', 'min', '--export_metric').best(entries)
    assert MetricGoal.of('loss', None, '--m').mode == 'min'
    assert MetricGoal.of('accuracy', None, '--m').mode == 'max'
    assert MetricGoal.of('loss', 'max', '--m').mode == 'max'


def test_no_improvement_counts_evaluations_after_the_best():
    entries = [evaluated(0, accuracy=0.5), evaluated(2, accuracy=0.8), evaluated(4, accuracy=0.8),
               skipped(6)]
    assert MetricGoal('accuracy', 'max').stalled(entries, 2) is None
    entries.append(evaluated(8, accuracy=0.7))
    assert MetricGoal('accuracy', 'max').stalled(entries, 2) == (
        'accuracy has not improved on 0.8 (step 2) in 2 evaluations')


def test_best_goes_by_step_not_by_line_order():
    # A ledger line for an older step can come later (a re-evaluation after a restart).
    entries = [evaluated(4, loss=0.5), evaluated(2, loss=0.5), evaluated(0, loss=1.0)]
    assert MetricGoal('loss', 'min').best(entries).step == 2


def test_nan_never_counts_as_an_improvement():
    entries = [evaluated(0, loss=1.0), evaluated(2, loss=math.nan), evaluated(4, loss=math.nan)]
    assert MetricGoal('loss', 'min').best(entries).step == 0
    assert MetricGoal('loss', 'min').stalled(entries, 2) == (
        'loss has not improved on 1 (step 0) in 2 evaluations')
    assert MetricGoal('loss', 'min').stalled([], 1) is None
