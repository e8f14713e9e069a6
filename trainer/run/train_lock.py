"""One training run per model_dir: the chief holds this lock while it trains.

Two trainers on one model_dir would overwrite each other's checkpoints and events.
On a local disk the lock is an OS lock (flock) on MODEL_DIR/train.lock, which the
kernel releases when the process dies, even by kill -9. Object stores (gs://, s3://)
have no locks, so there it is a lease object, MODEL_DIR/train.lease, naming its owner
and when it expires; the holder refreshes it while it trains, and another trainer takes
it over only once it has expired (a killed trainer's lease lapses after LEASE_SECS).
Workers and parameter servers of the chief's cluster never take it.
"""
import json
import os
import socket
import threading
import time
import uuid

import tensorflow as tf
from absl import logging

from common import files, paths, process_lock
from common.errors import UserError

LOCK_NAME = 'train.lock'
LEASE_NAME = 'train.lease'
LEASE_SECS = 120
# A bucket's last writer wins: read the lease back after this long to learn who did.
SETTLE_SECS = 2


def _owner() -> dict:
    return {'pid': os.getpid(), 'host': socket.gethostname(),
            'since': time.strftime('%Y-%m-%dT%H:%M:%S%z')}


def describe(holder: dict) -> str:
    return (f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}, "
            f"since {holder.get('since', '?')}")


def _held_error(model_dir: str, holder: dict) -> UserError:
    return UserError(f'--model_dir={model_dir} is in use by another training run '
                     f'({describe(holder)}); wait for it to finish or stop it, or train into '
                     'another --model_dir')


class LocalLock:
    """flock on MODEL_DIR/train.lock; the file names the holder, for the second trainer's message."""

    def __init__(self, model_dir: str):
        self.model_dir = model_dir
        self.path = os.path.join(paths.local_path(model_dir), LOCK_NAME)
        self._file = None

    def acquire(self) -> None:
        self._file, holder = process_lock.try_exclusive_lock(self.path, json.dumps(_owner()))
        if self._file is None:
            try:
                holder = json.loads(holder or '{}')
            except ValueError:
                holder = {}
            raise _held_error(self.model_dir, holder)

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing drops the flock; the file stays, naming the last holder
            self._file = None


class Lease:
    """A lease object on a bucket, refreshed every lease_secs / 4 by a thread while held."""

    def __init__(self, model_dir: str, lease_secs: float = LEASE_SECS,
                 settle_secs: float = SETTLE_SECS):
        self.model_dir = model_dir
        self.path = model_dir.rstrip('/') + '/' + LEASE_NAME
        self.lease_secs, self.settle_secs = lease_secs, settle_secs
        self.token = uuid.uuid4().hex
        self.owner = _owner()
        self._stop = threading.Event()
        self._thread = None

    def _read(self):
        try:
            return files.read_json(self.path)
        except tf.errors.NotFoundError:
            return None
        except ValueError:  # torn or foreign: treat as expired
            return {}

    def _write(self) -> None:
        files.write_json_atomic(self.path, dict(self.owner, token=self.token,
                                                expires=time.time() + self.lease_secs))

    def _held_by_other(self, lease) -> bool:
        if not lease or lease.get('token') == self.token:
            return False
        if lease.get('host') == self.owner['host'] and isinstance(lease.get('pid'), int) and \
                not process_lock.pid_alive(lease['pid']):
            return False  # its trainer on this machine was killed: no need to wait for expiry
        return float(lease.get('expires', 0)) > time.time()

    def acquire(self) -> None:
        lease = self._read()
        if self._held_by_other(lease):
            raise _held_error(self.model_dir, lease)
        if lease:
            logging.warning('taking over the expired training lease %s (%s)', self.path,
                            describe(lease))
        self._write()
        time.sleep(self.settle_secs)  # another trainer writing at the same moment: one wins
        lease = self._read()
        if not lease or lease.get('token') != self.token:
            raise _held_error(self.model_dir, lease or {})
        self._thread = threading.Thread(target=self._refresh, daemon=True)
        self._thread.start()

    def _refresh(self) -> None:
        while not self._stop.wait(self.lease_secs / 4):
            lease = self._read()
            if lease and lease.get('token') != self.token:
                logging.error('training lease %s was taken over by %s (this run stalled for '
                              'more than %d s); stop one of the two trainers', self.path,
                              describe(lease), self.lease_secs)
                return
            self._write()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            lease = self._read()
            if lease and lease.get('token') == self.token:
                files.remove(self.path)


class TrainLock:
    """with TrainLock(model_dir): ... raises UserError naming the holder when another run has it."""

    def __init__(self, model_dir: str):
        self._lock = Lease(model_dir) if paths.is_bucket(model_dir) else LocalLock(model_dir)

    def __enter__(self):
        self._lock.acquire()
        return self

    def __exit__(self, *exc_info):
        self._lock.release()
