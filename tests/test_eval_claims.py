"""trainer.evaluation.claims: eval jobs under one name claim checkpoints; a claim whose owner died
or went silent is taken over; every step gets one ledger entry, on a local disk, S3 and GCS."""
import dataclasses
import logging
import subprocess
import threading
import time

import pytest

from common import files
from common.errors import UserError
from helpers import path_on, wait_until
from trainer.evaluation import claims as step_claims
from trainer.model_dir.ledger import Evaluator, Ledger

DATA = 'data/validation-*'


def job_on(model_dir, host, lease_secs=60.0, eval_files=DATA):
    """The claims of one eval job; another host's job is told apart by its host name."""
    claims = step_claims.Claims(Ledger(model_dir, 'val'), eval_files, lease_secs,
                                settle_secs=0.2)
    claims.owner = dataclasses.replace(claims.owner, host=host)
    return claims


def entry_writer(claims, step):
    return lambda: claims.ledger.append(
        step, f'model.ckpt-{step}', 'evaluated', eval_files=claims.eval_files, metrics={},
        evaluated_by=Evaluator(claims.owner.host, claims.owner.pid, claims.owner.task))


@pytest.mark.parametrize('store', ['local', 's3', 'gcs'])
def test_a_claimed_step_is_left_to_its_owner_and_recorded_once(store, request, tmp_path):
    model_dir = path_on(store, request, tmp_path)
    first, second = job_on(model_dir, 'host-a'), job_on(model_dir, 'host-b')
    claim = first.try_claim(4)
    assert claim is not None and second.try_claim(4) is None
    assert second.holders[4].host == 'host-a'
    other = second.try_claim(6)  # another step is free
    assert other is not None
    other.release()  # given up: the next job takes it at once
    assert first.try_claim(6) is not None
    entry = claim.commit(entry_writer(first, 4))
    assert entry.evaluated_by.host == 'host-a'
    assert second.try_claim(4) is None  # recorded: never claimed again
    assert [name for name in files.listdir(first.dir) if name.startswith('step-')] == [
        'step-000000006.json']  # 4's claim is gone
    with pytest.raises(UserError, match='give data/train-\\* its own --eval_name'):
        job_on(model_dir, 'host-c', eval_files='data/train-*').try_claim(6)


def test_a_dead_owners_claim_on_this_host_is_taken_over_at_once(tmp_path, caplog):
    model_dir = str(tmp_path / 'model')
    dead = subprocess.Popen(['true'])
    dead.wait()
    killed = job_on(model_dir, step_claims.identity().host)
    killed.owner = dataclasses.replace(killed.owner, pid=dead.pid)
    step_claims.Claim(killed, 8).write()  # what a job killed -9 mid-evaluation leaves
    caplog.set_level(logging.WARNING)
    claim = job_on(model_dir, step_claims.identity().host).try_claim(8)
    assert claim is not None
    claim.release()
    assert f'pid {dead.pid} no longer runs on this host' in caplog.text


@pytest.mark.parametrize('store', ['local', 's3', 'gcs'])
def test_a_silent_owner_loses_its_claim_and_its_late_result(store, request, tmp_path, caplog):
    """Silence is judged by the claim's record against the judging job's lease: a 60 s judge
    refuses what a 2 s judge takes once the record is 2 s old (waited for, not slept)."""
    model_dir = path_on(store, request, tmp_path)
    stalled, live = job_on(model_dir, 'host-a', lease_secs=2.0), job_on(model_dir, 'host-b', 2.0)
    claim = stalled.try_claim(2)
    claim._stop.set()  # its process hangs: no renewals
    claim._thread.join()
    assert job_on(model_dir, 'host-b', 60.0).try_claim(2) is None  # not silent for long enough
    wait_until(lambda: time.time() > claim.read().renewed + 2.0)
    caplog.set_level(logging.WARNING)
    taken = live.try_claim(2)
    assert taken is not None and 'not renewed for' in caplog.text
    assert claim.commit(entry_writer(stalled, 2)) is None  # it wakes up: its result is dropped
    assert 'step 2 was taken over by' in caplog.text
    taken.commit(entry_writer(live, 2))
    [entry] = Ledger(model_dir, 'val').entries()
    assert entry.evaluated_by.host == 'host-b'


@pytest.mark.parametrize('store', ['local', 's3', pytest.param('gcs', marks=pytest.mark.slow)])
def test_racing_jobs_leave_one_entry_per_step(store, request, tmp_path):
    """Three jobs claim the same 8 steps at once: each step is evaluated once (an OS lock on a
    local disk, conditional writes on S3 and GCS), and the ledger has one entry per step."""
    model_dir, steps = path_on(store, request, tmp_path), range(0, 16, 2)
    evaluations = {host: [] for host in ('host-a', 'host-b', 'host-c')}

    def run(host):
        claims = job_on(model_dir, host)
        for step in steps:
            claim = claims.try_claim(step)
            if claim is not None:
                with claim:
                    time.sleep(0.05)  # the evaluation
                    if claim.commit(entry_writer(claims, step)) is not None:
                        evaluations[host].append(step)
    threads = [threading.Thread(target=run, args=(host,)) for host in evaluations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entries = Ledger(model_dir, 'val').entries()
    assert [entry.step for entry in entries] == list(steps)
    recorded = sorted(step for done in evaluations.values() for step in done)
    assert recorded == list(steps)  # exactly once
    for entry in entries:  # the entry names a job that evaluated it
        assert entry.step in evaluations[entry.evaluated_by.host]
