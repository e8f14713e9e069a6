"""A lease object: a JSON file that says which process holds something, renewed while it does.

The training lease on a bucket model_dir (trainer/model_dir/train_lock.py) and an eval job's
claim on a checkpoint (trainer/evaluation/claims.py) are both this protocol: write the object
(the owner, a random token, when renewed), let other writers settle and read it back to learn
who won (a bucket's last writer wins; it has no locks), renew it every lease_secs / 4 from a
thread, and remove it at the end only while it still names this token. Another process takes
an object over only when common.process_lock.stale_reason says its holder is gone.
"""
import contextlib
import os
import socket
import threading
import time
import uuid
from typing import Callable, ContextManager, Dict, Optional

import tensorflow as tf
from absl import logging

from common import files, process_lock
from common.errors import StoreError

LEASE_SECS = 120
# A bucket's last writer wins: read the object back after this long to learn who did.
SETTLE_SECS = 2.0
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


def process_owner() -> Dict:
    """This process as a lease names it."""
    return {'pid': os.getpid(), 'host': socket.gethostname(),
            'process_started': process_started(),
            'since': time.strftime('%Y-%m-%dT%H:%M:%S%z')}


class LeaseObject:
    """The object at path, written by this process as owner (plus fields) under a fresh token.

    guard: the context every write and check is made under (an OS lock on a local disk, where
    several lease objects share one; nothing on a bucket).
    """

    def __init__(self, path: str, owner: Dict, lease_secs: float = LEASE_SECS,
                 settle_secs: float = SETTLE_SECS,
                 guard: Callable[[], ContextManager] = contextlib.nullcontext, **fields):
        self.path, self.owner, self.fields = path, owner, fields
        self.lease_secs, self.settle_secs, self.guard = lease_secs, settle_secs, guard
        self.token = uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread = None

    def read(self) -> Optional[Dict]:
        """The object as it stands: None when there is none, {} when it is torn or foreign."""
        try:
            held = files.read_json(self.path)
        except tf.errors.NotFoundError:
            return None
        except ValueError:
            return {}
        return held if isinstance(held, dict) else {}

    def write(self) -> None:
        files.write_json_atomic(self.path, dict(self.owner, **self.fields, token=self.token,
                                                renewed=time.time()))

    def is_mine(self, held: Optional[Dict]) -> bool:
        return (held or {}).get('token') == self.token

    def stale_reason(self, held: Dict, restarted: str) -> Optional[str]:
        """Why another holder's object no longer holds; None while that holder may still run."""
        return process_lock.stale_reason(held, self.owner, self.lease_secs, restarted)

    def settled(self) -> bool:
        """After writing: whether, once other writers have settled, the object is still ours."""
        time.sleep(self.settle_secs)
        return self.is_mine(self.read())

    def keep_renewed(self, on_lost: Callable[[Dict], None]) -> None:
        """Renews the object every lease_secs / 4 from a thread until stop(); once another
        process has taken it over (or removed it), calls on_lost with what it holds and stops."""
        self._thread = threading.Thread(target=self._renew, args=(on_lost,), daemon=True)
        self._thread.start()

    def _renew(self, on_lost: Callable[[Dict], None]) -> None:
        while not self._stop.wait(self.lease_secs / 4):
            try:
                with self.guard():
                    held = self.read()
                    if not self.is_mine(held):
                        on_lost(held or {})
                        return
                    self.write()
            except StoreError as e:  # a renewal missed is no loss: the next one is due long before
                logging.warning('could not renew %s: %s', self.path, e)

    def stop(self) -> None:
        """Stops renewing (at once; a renewal under way finishes first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def remove_if_mine(self) -> None:
        with self.guard():
            if self.is_mine(self.read()):
                files.remove(self.path)
