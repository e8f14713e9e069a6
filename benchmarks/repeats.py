"""Interleaved repeats, and ratios that say when they cannot tell two rows apart.

Rows that are compared run in rounds, A B C, then C B A, ...: each row's i-th repeat is
taken beside the others' i-th, so load that changes during a run reaches them alike. A
ratio is the median of the per-round ratios, with its spread: half the range of those
per-round ratios. A target whose margin (ratio minus target) is smaller than that spread
is "not resolved": the run cannot say whether it is met.
"""
import statistics
from typing import Callable, Dict, List, Optional, Sequence

MET, SHORT, NOT_RESOLVED = 'met', 'SHORT', 'not resolved'


def interleave(turns: Dict[str, Callable[[], float]], rounds: int,
               on_turn: Optional[Callable[[str, int, float], None]] = None
               ) -> Dict[str, List[float]]:
    """{key: [one value per round]}; turns: {key: a function that warms up, then times one
    repeat and returns it}. Even rounds run the keys in order, odd rounds in reverse."""
    values = {key: [] for key in turns}
    keys = list(turns)
    for round_index in range(rounds):
        for key in (keys if round_index % 2 == 0 else keys[::-1]):
            values[key].append(turns[key]())
            if on_turn:
                on_turn(key, round_index, values[key][-1])
    return values


def half_range(values: Sequence[float]) -> float:
    return (max(values) - min(values)) / 2


def paired_ratios(numerators: Sequence[float], denominators: Sequence[float]) -> List[float]:
    """Round i's numerator over round i's denominator; a single value (a count, measured
    once) stands beside every round of the other side."""
    if len(numerators) == 1:
        numerators = list(numerators) * len(denominators)
    if len(denominators) == 1:
        denominators = list(denominators) * len(numerators)
    if len(numerators) != len(denominators):
        raise ValueError(f'{len(numerators)} repeats against {len(denominators)}: a ratio '
                         'needs the rows measured in the same rounds')
    return [n / d for n, d in zip(numerators, denominators)]


def verdict(ratio: float, spread: float, target: float, at_least: bool) -> str:
    margin = ratio - target if at_least else target - ratio
    if spread > abs(margin):
        return NOT_RESOLVED
    return MET if margin >= 0 else SHORT


def check(numerators: Sequence[float], denominators: Sequence[float], target: float,
          at_least: bool) -> dict:
    """A target's ratio from paired repeats: median, spread, every round's ratio, verdict."""
    ratios = paired_ratios(numerators, denominators)
    ratio, spread = statistics.median(ratios), half_range(ratios)
    return {'ratio': ratio, 'spread': spread, 'per_round': ratios,
            'wanted': f'{">=" if at_least else "<="} {target}x',
            'verdict': verdict(ratio, spread, target, at_least)}
