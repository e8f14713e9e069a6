"""trainer.model_dir.train_lock: an OS lock on a local model_dir, a lease object on a bucket, which a
trainer restarted in place, or after its holder died or went silent, takes over."""
import logging
import os
import re
import signal
import socket
import subprocess
import time

import pytest
import tensorflow as tf

from common import atomic_writes, files, lease
from common.errors import UserError
from helpers import path_on, wait_for_log, wait_until
from pid_namespace import start_as_pid1, unavailable_reason
from trainer.model_dir import checkpoints, train_lock


def test_local_lock_refuses_a_second_holder_until_released(tmp_path):
    first = train_lock.LocalLock(str(tmp_path / 'model'))
    first.acquire()
    with pytest.raises(UserError, match=r'is in use by another training run \(pid \d+ on '):
        train_lock.LocalLock(str(tmp_path / 'model')).acquire()
    first.release()
    second = train_lock.LocalLock(str(tmp_path / 'model'))
    second.acquire()
    second.release()


@pytest.mark.parametrize('store', ['s3', 'gcs', 'local'])
def test_bucket_lease_is_refreshed_and_taken_over_only_after_it_expires(store, request, tmp_path):
    """Waits for what the lease records (renewed past its first expiry; silent past its expiry),
    not for fixed times, which a loaded machine's renewal thread may not keep."""
    model_dir = lease_model_dir(store, request, tmp_path)
    first = train_lock.Lease(model_dir, lease_secs=1.0, settle_secs=0)
    first.acquire()
    acquired = first.read().renewed
    wait_until(lambda: first.read().renewed > acquired + 1.0)  # only the refreshes keep it
    with pytest.raises(UserError, match='is in use by another training run'):
        train_lock.Lease(model_dir, lease_secs=60.0, settle_secs=0).acquire()

    first._stop.set()  # the holder dies without releasing: its lease lapses
    first._thread.join()
    wait_until(lambda: time.time() > first.read().renewed + 1.0)
    second = train_lock.Lease(model_dir, lease_secs=1.0, settle_secs=0)
    second.acquire()
    first._thread = None  # the dead holder's release must not delete the new holder's lease
    second.release()
    assert second.read() is None  # released: the lease object is gone


@pytest.mark.parametrize('store', ['s3', 'gcs'])
def test_a_lease_on_s3_and_gcs_is_read_and_written_by_the_stores_own_client(store, request,
                                                                             tmp_path,
                                                                             monkeypatch):
    """One GET reads one version whole (never a read cut short by a renewal, as tf.io.gfile's
    could be), and every write is conditional on the version read: tf.io.gfile is not used for
    the lease object (one TF wrote reads all the same)."""
    model_dir = lease_model_dir(store, request, tmp_path)
    write_lease(model_dir, host='another-host', pid=1, renewed=time.time() - 200)
    for module, name in ((files, 'read_text'), (atomic_writes, 'write_json_atomic'),
                         (files, 'remove')):
        monkeypatch.setattr(module, name, lambda *args: pytest.fail(f'{name}{args}'))
    held = train_lock.Lease(model_dir, lease_secs=120, settle_secs=0)
    held.acquire()  # takes over the silent lease: If-Match / ifGenerationMatch its version
    record = held.read()
    assert record.token == held.token and record.version == held._version
    held.release()
    assert held.read() is None


def test_a_file_url_model_dir_gets_the_os_lock_not_a_lease(tmp_path):
    with train_lock.TrainLock(f'file://{tmp_path}/model') as held:
        assert isinstance(held._lock, train_lock.LocalLock)
        assert (tmp_path / 'model' / train_lock.LOCK_NAME).exists()
        with pytest.raises(UserError, match='is in use by another training run'):
            train_lock.LocalLock(str(tmp_path / 'model')).acquire()


def lease_model_dir(store, request, tmp_path):
    """On a test server's bucket, or on a local folder standing in for any other bucket."""
    return path_on(store, request, tmp_path)


def dead_pid() -> int:
    process = subprocess.Popen(['true'])
    process.wait()
    return process.pid


def write_lease(model_dir, **holder):
    """A lease as another holder left it: by default this host, renewed just now."""
    atomic_writes.write_json_atomic(f'{model_dir}/{train_lock.LEASE_NAME}', {
        'host': socket.gethostname(), 'pid': os.getpid(), 'token': 'the-earlier-holder',
        'process_started': lease.process_started(), 'since': '2024-01-01T00:00:00+0000',
        'renewed': time.time(), **holder})


@pytest.mark.parametrize('store', ['s3', 'gcs', 'local'])
def test_a_stale_lease_is_taken_over_in_one_line_saying_why(store, request, tmp_path, caplog):
    model_dir = lease_model_dir(store, request, tmp_path)
    pid = dead_pid()
    stale = {
        'its holder is this trainer restarted in place (same host and pid)':
            {'process_started': lease.process_started() - 60},
        f'pid {pid} no longer runs on this host': {'pid': pid},
        'not renewed for 200 s (--lease_timeout_secs=120)':
            {'host': 'another-host', 'pid': 1, 'renewed': time.time() - 200},
    }
    for reason, holder in stale.items():
        write_lease(model_dir, **holder)
        taking = train_lock.Lease(model_dir, lease_secs=120, settle_secs=0)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            taking.acquire()
        [line] = [r.getMessage() for r in caplog.records if 'taking over' in r.getMessage()]
        expected = (f'taking over the training lease {model_dir}/train.lease '
                    f'(pid {holder.get("pid", os.getpid())} on '
                    f'{holder.get("host", socket.gethostname())}, since '
                    f'2024-01-01T00:00:00+0000): {reason}')
        # the age is read a moment after the lease was written: a slow store adds a second
        assert re.fullmatch(re.escape(expected).replace('200', '20[0-9]'), line), line
        assert taking.read().token == taking.token
        taking.release()


def test_a_torn_lease_is_taken_over_as_unreadable(tmp_path, caplog):
    model_dir = str(tmp_path / 'model')
    os.makedirs(model_dir)
    with open(f'{model_dir}/{train_lock.LEASE_NAME}', 'w') as f:
        f.write('{"host": "h", "pid": 7, "tok')  # damaged: not the cut-short read of a renewal
    taking = train_lock.Lease(model_dir, lease_secs=120, settle_secs=0)
    with caplog.at_level(logging.WARNING):
        taking.acquire()
    assert (f'taking over the training lease {model_dir}/train.lease (pid ? on ?, since ?): '
            'it is unreadable') in caplog.text
    taking.release()


def test_a_failed_renewal_is_logged_in_one_line_and_renewal_goes_on(tmp_path, monkeypatch,
                                                                    caplog):
    held = train_lock.Lease(str(tmp_path / 'model'), lease_secs=0.4, settle_secs=0)
    write = atomic_writes.write_json_atomic
    failed = []

    def first_renewal_fails(path, record):
        if held._thread is not None and not failed:  # acquire's own write goes through
            failed.append(path)
            raise tf.errors.UnavailableError(None, None, 'the store is down\n(its details)')
        write(path, record)
    monkeypatch.setattr(atomic_writes, 'write_json_atomic', first_renewal_fails)
    with caplog.at_level(logging.WARNING):
        held.acquire()
        first = held.read()
        # Renewals every 0.1 s: the first fails, a later one goes through (waited for: a loaded
        # machine's renewal thread keeps no fixed time).
        wait_until(lambda: failed and held.read().renewed > first.renewed)
    assert held._thread.is_alive() and held.read().token == held.token
    [line] = [r.getMessage() for r in caplog.records if 'renew' in r.getMessage()]
    assert line == f'could not renew {held.path} (the store is down); trying again in 0.1 s'
    # The lease object in the format it always had.
    assert set(files.read_json(held.path)) == {'host', 'pid', 'process_started', 'since',
                                               'token', 'renewed'}
    held.release()
    assert held.read() is None


@pytest.mark.parametrize('store', ['s3', 'gcs', 'local'])
def test_a_live_holder_keeps_its_lease(store, request, tmp_path):
    model_dir = lease_model_dir(store, request, tmp_path)
    live = [{'host': 'another-host', 'pid': 1},  # renewed just now
            {'pid': os.getppid()},  # a process on this host that runs
            {}]  # this very process (same pid and start): another trainer in it
    for holder in live:
        write_lease(model_dir, **holder)
        with pytest.raises(UserError, match='is in use by another training run'):
            train_lock.Lease(model_dir, lease_secs=120, settle_secs=0).acquire()


@pytest.mark.slow  # a trainer killed -9 and restarted in a pid namespace; the takeover rules' own tests stay fast: ./run.sh test-slow
def test_a_trainer_restarted_in_place_as_pid_1_takes_over_its_lease_on_s3(s3_bucket,
                                                                          digit_shards, tmp_path):
    """As a pod restarts: same hostname, pid 1 again, after kill -9 (issue 25's case)."""
    if unavailable_reason():
        pytest.skip(unavailable_reason())
    model_dir = f'{s3_bucket}/model'
    args = ['--mode=train', f'--model_dir={model_dir}', f'--train_files={digit_shards.train_pattern}',
            '--train_steps=30', '--batch_size=16', '--log_every_n_steps=5',
            '--save_checkpoints_steps=100000']
    first, pid1 = start_as_pid1('trainer.main', *args, log_path=tmp_path / 'first.log',
                                hostname='jk-chief-0')
    wait_for_log(tmp_path / 'first.log', r'step \d+/30 \(', first)
    os.kill(pid1, signal.SIGKILL)
    first.wait()
    held = files.read_json(f'{model_dir}/{train_lock.LEASE_NAME}')
    assert (held['pid'], held['host']) == (1, 'jk-chief-0')

    second, _ = start_as_pid1('trainer.main', *args, log_path=tmp_path / 'second.log',
                              hostname='jk-chief-0')
    assert second.wait(timeout=300) == 0, open(tmp_path / 'second.log').read()[-3000:]
    log = open(tmp_path / 'second.log').read()
    line = re.search(r'taking over the training lease .*', log).group(0)
    print(f'\n{line}')
    assert line.startswith(f'taking over the training lease {model_dir}/train.lease (pid 1 on '
                           'jk-chief-0, since ')
    assert line.endswith('): its holder is this trainer restarted in place (same host and pid)')
    assert checkpoints.list_checkpoints(model_dir)[-1][0] == 30
    assert not files.exists(f'{model_dir}/{train_lock.LEASE_NAME}')  # released at the end
