"""One training run per model_dir: the chief holds this lock while it trains.

Two trainers on one model_dir would overwrite each other's checkpoints and events.
On a local disk the lock is an OS lock (flock) on MODEL_DIR/train.lock, which the
kernel releases when the process dies, even by kill -9. Object stores (gs://, s3://)
have no locks, so there it is a lease object (common/lease.py: written by the store's
conditional writes), MODEL_DIR/train.lease, saying who holds
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
from typing import Optional

from absl import logging

from common import lease, paths, process_lock
from common.errors import UserError

LOCK_NAME = 'train.lock'
LEASE_NAME = 'train.lease'


def describe(holder: Optional[lease.Owner]) -> str:
    """None: the holder's file is torn or not a lease."""
    if holder is None:
        return 'pid ? on ?, since ?'
    return f'pid {holder.pid} on {holder.host}, since {holder.since}'


def _held_error(model_dir: str, holder: Optional[lease.Owner]) -> UserError:
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
        self._file, holder = process_lock.try_exclusive_lock(
            self.path, json.dumps(lease.process_owner().to_json()))
        if self._file is None:
            try:
                owner = lease.Owner.from_json(json.loads(holder or '{}'))
            except ValueError:
                owner = None
            raise _held_error(self.model_dir, owner)

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing drops the flock; the file stays, naming the last holder
            self._file = None


class Lease(lease.LeaseObject):
    """The training lease on a bucket model_dir (common.lease), renewed while held."""

    def __init__(self, model_dir: str, lease_secs: float = lease.LEASE_SECS,
                 settle_secs: float = lease.SETTLE_SECS):
        super().__init__(model_dir.rstrip('/') + '/' + LEASE_NAME, lease.process_owner(),
                         lease_secs, settle_secs)
        self.model_dir = model_dir
        self._held = False

    def acquire(self) -> None:
        held = self.read()
        if held is not None:
            reason = self.stale_reason(held, 'this trainer')
            if reason is None:
                raise _held_error(self.model_dir, held.owner)
            logging.warning('taking over the training lease %s (%s): %s', self.path,
                            describe(held.owner), reason)
        if not self.take(held):  # another trainer wrote at the same moment, and won
            held = self.read()
            raise _held_error(self.model_dir, held and held.owner)
        self._held = True
        self.keep_renewed(self._lost)

    def _lost(self, held: Optional[lease.LeaseRecord]) -> None:
        logging.error('training lease %s was taken over by %s (this run stalled for more than '
                      '%g s); stop one of the two trainers', self.path,
                      describe(held and held.owner),
                      self.lease_secs)

    def release(self) -> None:
        self.stop()
        if self._held:
            self._held = False
            self.remove_if_mine()


class TrainLock:
    """with TrainLock(model_dir): ... raises UserError naming the holder when another run has it."""

    def __init__(self, model_dir: str, lease_secs: float = lease.LEASE_SECS):
        self._lock = (Lease(model_dir, lease_secs) if paths.is_bucket(model_dir)
                      else LocalLock(model_dir))

    def __enter__(self):
        self._lock.acquire()
        return self

    def __exit__(self, *exc_info):
        self._lock.release()
