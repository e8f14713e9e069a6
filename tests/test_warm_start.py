"""The tests' warm commands (warm_start) behave as `python -m` processes do; the command here is
tests/warm_probe.py."""
import json
import os
import signal
import time

import pytest

from tests import warm_start
from helpers import REPO

PROBE = 'tests.warm_probe'


def test_a_warm_command_is_a_process_of_its_own_that_runs_the_module_as_main(monkeypatch):
    monkeypatch.setenv('WARM_START_MARKER', 'seen')
    monkeypatch.delenv('TESTS_COLD_START', raising=False)
    result = warm_start.run(PROBE, ['3'], timeout=60)
    seen = json.loads(result.stdout)
    assert result.returncode == 3
    assert result.stderr == 'on stderr\n'
    assert seen['pid'] != os.getpid() and seen['name'] == '__main__'
    assert seen['argv'] == [os.path.join(REPO, 'tests', 'warm_probe.py'), '3']
    assert seen['cwd'] == REPO and seen['path0'] == REPO and seen['marker'] == 'seen'
    assert seen['tensorflow_imported']  # forked warm: the interpreter had imported it
    failed = warm_start.run(PROBE, ['raise'], timeout=60)
    assert failed.returncode == 1
    assert 'Traceback' in failed.stderr and 'ValueError: the probe failed' in failed.stderr
    assert warm_start.run(PROBE, ['interrupt'], timeout=60).returncode == -signal.SIGINT  # as python


def test_a_started_command_has_its_pid_takes_signals_and_times_out(tmp_path, monkeypatch):
    monkeypatch.delenv('TESTS_COLD_START', raising=False)
    log = tmp_path / 'probe.log'
    process = warm_start.start(PROBE, ['sleep'], log)
    deadline = time.time() + 30
    while 'on stderr' not in log.read_text() and time.time() < deadline:
        time.sleep(0.05)
    assert json.loads(log.read_text().splitlines()[0])['pid'] == process.pid
    assert process.poll() is None
    with pytest.raises(warm_start.subprocess.TimeoutExpired):
        process.wait(timeout=0.1)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == -signal.SIGTERM
    with pytest.raises(warm_start.subprocess.TimeoutExpired):
        warm_start.run(PROBE, ['sleep'], timeout=1)


def test_a_different_tensorflow_environment_has_an_interpreter_of_its_own(monkeypatch):
    monkeypatch.delenv('TESTS_COLD_START', raising=False)

    def forked_by():
        seen = json.loads(warm_start.run(PROBE, ['0'], timeout=60).stdout)
        return seen['ppid'] if seen['tensorflow_imported'] else None

    usual = forked_by()
    assert usual is not None and forked_by() == usual
    monkeypatch.setenv('TF_CONFIG', '{}')  # read when a job starts: the same interpreter
    assert forked_by() == usual
    monkeypatch.setenv('TF_NUM_INTEROP_THREADS', '1')  # read on import: another
    other = forked_by()
    assert other not in (None, usual) and forked_by() == other
    monkeypatch.delenv('TF_NUM_INTEROP_THREADS')
    assert forked_by() == usual
    monkeypatch.setenv('TESTS_COLD_START', '1')
    assert forked_by() is None and not warm_start.runs_warm()
