"""Progress text: durations, the recent rate and the ETA."""
from common import progress


def test_format_duration():
    assert [progress.format_duration(s) for s in (0, 12.4, 326, 3720, 90061)] == [
        '0s', '12s', '5m26s', '1h02m', '25h01m']


def test_recent_rate_forgets_samples_older_than_the_window():
    rate = progress.RecentRate(window_secs=10)
    assert rate.per_sec() is None
    rate.add(0, now=0)
    rate.add(100, now=10)  # 10/s at first
    assert rate.per_sec() == 10
    for t in (20, 30, 40):
        rate.add(100 + (t - 10) * 2, now=t)  # then 2/s
    assert rate.per_sec() == 2


def test_fraction_and_eta_text():
    assert progress.fraction_text(1200, 12000) == '1,200/12,000 (10%)'
    assert progress.fraction_text(5, None) == '5'
    assert progress.fraction_text(5, 20, 'records') == '5/20 records (25%)'
    assert progress.eta_text(1200, 12000, 10.0) == 'ETA 18m00s'
    assert progress.eta_text(1200, 12000, None) is None
    assert progress.eta_text(1200, None, 10.0) is None


def test_progress_log_says_the_rate_and_time_left_at_most_every_interval(monkeypatch):
    now, logged = [0.0], []
    monkeypatch.setattr(progress, 'time', type('Clock', (), {'time': staticmethod(lambda: now[0])}))
    monkeypatch.setattr(progress.logging, 'info', logged.append)
    made = progress.ProgressLog('decoded', 1000, 'photos', every_secs=5)
    now[0] = 3
    made.advance(30)  # within the interval: nothing yet
    now[0] = 10
    made.advance(70)
    assert logged == ['decoded 100/1,000 photos (10%), 10/s, ETA 1m30s']
    assert made.line() == logged[-1] and made.done == 100


def test_progress_log_counts_what_came_before_its_clock_started(monkeypatch):
    now, logged = [100.0], []
    monkeypatch.setattr(progress, 'time', type('Clock', (), {'time': staticmethod(lambda: now[0])}))
    monkeypatch.setattr(progress.logging, 'info', logged.append)
    made = progress.ProgressLog('decoded', 1000, 'photos', done=16)  # after a slow start-up
    now[0] = 108
    made.advance(64)
    assert logged == ['decoded 80/1,000 photos (8%), 8/s, ETA 1m55s']
