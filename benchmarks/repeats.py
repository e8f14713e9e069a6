"""Interleaved repeats, and ratios that say when they cannot tell two rows apart.

Rows that are compared run in rounds, A B C, then C B A, ...: each row's i-th repeat is
taken beside the others' i-th, so load that changes during a run reaches them alike. A
ratio is the median of the per-round ratios, with a 95% confidence interval for that
median drawn from their order statistics (no assumption about the noise's shape; Go's
benchstat does the same): with 9 rounds it drops the lowest and the highest, with 6 to 8
it is their whole range, and with fewer the whole range is all there is (it then holds
the median with less than 95%: 94% at 5 rounds, 75% at 3). A target is met when the whole
interval is on its side, SHORT when none of it is, and otherwise "not resolved": the run
cannot say which.
"""
import math
import statistics
from typing import Callable, Dict, List, Optional, Sequence, Tuple

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


def median_interval(values: Sequence[float], confidence: float = 0.95) -> Tuple[float, float]:
    """(low, high): the k-th lowest and k-th highest value, for the largest k at which the
    median of what the values sample lies between them with at least `confidence`
    (1 - 2 P[Binomial(n, 1/2) < k]); k = 1, the whole range, when no narrower interval
    reaches it (below 6 values not even the whole range does; benchstat then says
    infinite, here the range stands)."""
    ordered, n = sorted(values), len(values)

    def coverage(k):
        return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n

    k = 1
    while k < (n + 1) // 2 and coverage(k + 1) >= confidence:
        k += 1
    return ordered[k - 1], ordered[n - k]


def half_interval(values: Sequence[float]) -> float:
    low, high = median_interval(values)
    return (high - low) / 2


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


def verdict(low: float, high: float, target: float, at_least: bool) -> str:
    """From the ratio's confidence interval (low, high)."""
    if (low >= target) if at_least else (high <= target):
        return MET
    if (high < target) if at_least else (low > target):
        return SHORT
    return NOT_RESOLVED


def check(numerators: Sequence[float], denominators: Sequence[float], target: float,
          at_least: bool) -> dict:
    """A target's ratio from paired repeats: median, its interval and half its width
    (spread), every round's ratio, verdict."""
    ratios = paired_ratios(numerators, denominators)
    low, high = median_interval(ratios)
    return {'ratio': statistics.median(ratios), 'interval': [low, high],
            'spread': (high - low) / 2, 'per_round': ratios,
            'wanted': f'{">=" if at_least else "<="} {target}x',
            'verdict': verdict(low, high, target, at_least)}
