"""One training run per model_dir: the chief holds this lock while it trains.

Two trainers on one model_dir would overwrite each other's checkpoints and events.
On a local disk the lock is an OS lock (flock) on MODEL_DIR/train.lock, which the
kernel releases when the process dies, even by kill -9. Object stores (gs://, s3://)
have no locks, so there it is a lease object, MODEL_DIR/train.lease, saying who holds
it (host, pid, when that process started, a random token) and when it was last renewed;
the holder renews it every --lease_timeout_secs / 4 while it trains. A lease is stale,
and the next trainer takes it over saying why in one line, when its holder is this
trainer restarted in place (same host and pid, an earlier process: a pod restarted by
Kubernetes or Vertex AI keeps its hostname and is pid 1 again), is a process on this host
that no longer runs, or has not renewed it for --lease_timeout_secs.
Workers and parameter servers of the chief's cluster never take it.
"""
import json
import os
import socket
import threading
import time
import uuid
from typing import Optional

import tensorflow as tf
from absl import logging

from common import files, paths, process_lock
from common.errors import UserError

LOCK_NAME = 'train.lock'
LEASE_NAME = 'train.lease'
LEASE_SECS = 120
# A bucket's last writer wins: read the lease back after this long to learn who did.
SETTLE_SECS = 2
_IMPORTED_AT = time.time()


def process_started() -> float:
    """When this process started, in seconds since the epoch (from /proc where there is one,
    else when this module was imported): tells this process from an earlier one that had
    the same pid."""
    try:
        # Field 22 of /proc/self/stat: the start time in clock ticks after boot.
        with open('/proc/self/stat') as f:  # local: this machine's /proc
            start_ticks = int(f.read().rsplit(')', 1)[1].split()[19])
        with open('/proc/stat') as f:  # local: this machine's boot time
            boot_time = next(int(line.split()[1]) for line in f if line.startswith('btime '))
        return boot_time + start_ticks / os.sysconf('SC_CLK_TCK')
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED_AT


def process_owner() -> dict:
    """This process as a lease or claim names it."""
    return {'pid': os.getpid(), 'host': socket.gethostname(),
            'process_started': process_started(),
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
        self._file, holder = process_lock.try_exclusive_lock(self.path, json.dumps(process_owner()))
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
    """A lease object on a bucket, renewed every lease_secs / 4 by a thread while held."""

    def __init__(self, model_dir: str, lease_secs: float = LEASE_SECS,
                 settle_secs: float = SETTLE_SECS):
        self.model_dir = model_dir
        self.path = model_dir.rstrip('/') + '/' + LEASE_NAME
        self.lease_secs, self.settle_secs = lease_secs, settle_secs
        self.token = uuid.uuid4().hex
        self.owner = process_owner()
        self._stop = threading.Event()
        self._thread = None

    def _read(self):
        try:
            return files.read_json(self.path)
        except tf.errors.NotFoundError:
            return None
        except ValueError:  # torn or foreign
            return {}

    def _write(self) -> None:
        files.write_json_atomic(self.path, dict(self.owner, token=self.token,
                                                renewed=time.time()))

    def stale_reason(self, lease: dict) -> Optional[str]:
        """Why another holder's lease no longer holds; None while that holder may still train."""
        return process_lock.stale_reason(lease, self.owner, self.lease_secs, 'this trainer')

    def acquire(self) -> None:
        lease = self._read()
        if lease is not None:
            reason = self.stale_reason(lease)
            if reason is None:
                raise _held_error(self.model_dir, lease)
            logging.warning('taking over the training lease %s (%s): %s', self.path,
                            describe(lease), reason)
        self._write()
        time.sleep(self.settle_secs)  # another trainer writing at the same moment: one wins
        lease = self._read()
        if not lease or lease.get('token') != self.token:
            raise _held_error(self.model_dir, lease or {})
        self._thread = threading.Thread(target=self._renew, daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.lease_secs / 4):
            lease = self._read()
            if lease and lease.get('token') != self.token:
                logging.error('training lease %s was taken over by %s (this run stalled for '
                              'more than %g s); stop one of the two trainers', self.path,
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

    def __init__(self, model_dir: str, lease_secs: float = LEASE_SECS):
        self._lock = (Lease(model_dir, lease_secs) if paths.is_bucket(model_dir)
                      else LocalLock(model_dir))

    def __enter__(self):
        self._lock.acquire()
        return self

    def __exit__(self, *exc_info):
        self._lock.release()
