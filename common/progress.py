"""Progress of long work in log lines: done/total, percent, rate, and the time left at the recent rate."""
import collections
import time
from typing import Optional

from absl import logging


def format_duration(secs: float) -> str:
    """5m26s, 1h02m or 12s."""
    secs = max(0, int(round(secs)))
    hours, rest = divmod(secs, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f'{hours}h{minutes:02d}m'
    if minutes:
        return f'{minutes}m{seconds:02d}s'
    return f'{seconds}s'


class RecentRate:
    """Units per second over about the last window_secs, so the ETA follows a change of speed
    (evaluation on the same cores, a warm-up) instead of the average since the start."""

    def __init__(self, window_secs: float = 60.0):
        self._window_secs = window_secs
        self._samples = collections.deque()  # (time, units done so far)

    def add(self, done: float, now: Optional[float] = None) -> None:
        now = time.time() if now is None else now
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self._window_secs:
            self._samples.popleft()

    def per_sec(self) -> Optional[float]:
        if len(self._samples) < 2:
            return None
        (start, first), (end, last) = self._samples[0], self._samples[-1]
        return (last - first) / (end - start) if end > start else None


def fraction_text(done: int, total: Optional[int], unit: str = '') -> str:
    """'1,200/12,000 (10%)' (with a unit: '1,200/12,000 records (10%)'); no total: '1,200'."""
    unit = f' {unit}' if unit else ''
    if not total:
        return f'{done:,}{unit}'
    return f'{done:,}/{total:,}{unit} ({100 * done / total:.0f}%)'


def eta_text(done: float, total: Optional[float], per_sec: Optional[float]) -> Optional[str]:
    """'ETA 5m26s' at per_sec, or None when it cannot be told (no rate yet, no total)."""
    if not total or not per_sec or per_sec <= 0:
        return None
    return f'ETA {format_duration(max(0.0, total - done) / per_sec)}'


class ProgressLog:
    """Counts long work's units as they are done and logs, at most every every_secs:
    'decoded 12,000/54,000 photos (22%), 3,100/s, ETA 13s' (what, then the count)."""

    def __init__(self, what: str, total: Optional[int], unit: str = '', every_secs: float = 5.0,
                 done: int = 0):
        """done: counted already, before the rate's clock starts (work whose first units waited
        on a start-up, which would make the first ETA hours long)."""
        self.what, self.total, self.unit, self.done = what, total, unit, done
        self.start_time = self._last_report = time.time()
        self._every_secs = every_secs
        self._rate = RecentRate()
        self._rate.add(done, self.start_time)

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = time.time()
        if now - self._last_report > self._every_secs:
            self._last_report = now
            self._rate.add(self.done, now)
            logging.info(self.line())

    def line(self) -> str:
        per_sec = self._rate.per_sec()
        parts = [f'{self.what} {fraction_text(self.done, self.total, self.unit)}',
                 f'{per_sec:,.0f}/s' if per_sec else None,
                 eta_text(self.done, self.total, per_sec)]
        return ', '.join(part for part in parts if part)
