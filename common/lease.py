"""A lease object: a JSON file that says which process holds something, renewed while it does.

The training lease on a bucket model_dir (trainer/model_dir/train_lock.py) and an eval job's
claim on a checkpoint (trainer/evaluation/claims.py) are both this protocol: write the object
(the owner, a random token, when renewed) only if it is as last read, renew it every
lease_secs / 4 from a thread, and remove it at the end only while it still names this token.
Another process takes an object over only when stale_reason says its holder is gone.

On s3:// and gs:// the store decides who won: every write is conditional on the version read
(common/conditional_objects.py), so of two writers over one version exactly one gets through,
however late. On a local disk the writes are made under an OS lock (the caller's guard). Any
other bucket (ram://) has neither: the object is written, other writers let settle and read
back to learn who won (the last writer wins).
"""
import contextlib
import dataclasses
import json
import os
import socket
import threading
import time
import uuid
from typing import Callable, ContextManager, Dict, Optional, Tuple

import tensorflow as tf
from absl import logging

from common import atomic_writes, conditional_objects, files, paths, process_lock
from common.errors import StoreError
from common.records import NUMBER, field

LEASE_SECS = 120
# Without conditional writes a bucket's last writer wins: read back after this long to learn who.
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


@dataclasses.dataclass(frozen=True)
class Owner:
    """A process as a lease object names its holder; process_started tells it from an earlier
    process with the same pid (a pod restarted in place). An eval job's claims add its task."""
    pid: int
    host: str
    process_started: Optional[float]  # None in leases of trainers from before it was recorded
    since: str
    task: Optional[str] = None  # the cluster task ('evaluator1', 'local'): claims only

    @classmethod
    def from_json(cls, record: Dict) -> 'Owner':
        """Raises ValueError naming the field when record names no process."""
        return cls(pid=field(record, 'pid', int), host=field(record, 'host', str),
                   process_started=field(record, 'process_started', NUMBER, optional=True),
                   since=field(record, 'since', str),
                   task=field(record, 'task', str, optional=True))

    def to_json(self) -> Dict:
        return {name: value for name, value in dataclasses.asdict(self).items()
                if value is not None}


def process_owner() -> Owner:
    """This process as a lease names it."""
    return Owner(pid=os.getpid(), host=socket.gethostname(), process_started=process_started(),
                 since=time.strftime('%Y-%m-%dT%H:%M:%S%z'))


@dataclasses.dataclass(frozen=True)
class LeaseRecord:
    """A lease object as read. owner None: damaged (it did not parse when read again:
    files.read_json) or not a lease object at all; such an object holds nothing, and is taken
    over as unreadable."""
    owner: Optional[Owner]
    token: Optional[str] = None
    renewed: float = 0.0
    fields: Dict = dataclasses.field(default_factory=dict)  # the kind's own: a claim's step...
    version: Optional[str] = None  # as the store read it (S3's ETag, GCS's generation)

    @classmethod
    def from_json(cls, record, field_names=(), version=None) -> 'LeaseRecord':
        """field_names: the fields its kind of lease adds, which it must have."""
        try:
            return cls(owner=Owner.from_json(record), token=field(record, 'token', str),
                       renewed=field(record, 'renewed', NUMBER),
                       fields={name: record[name] for name in field_names}, version=version)
        except (ValueError, KeyError, TypeError):
            return cls(owner=None, version=version)

    def to_json(self) -> Dict:
        return dict(self.owner.to_json(), **self.fields, token=self.token, renewed=self.renewed)


def stale_reason(held: LeaseRecord, me: Owner, lease_secs: float,
                 restarted: str) -> Optional[str]:
    """Why a lease object another process wrote no longer holds, seen by process `me`; None
    while its holder may still run. restarted: what to call `me` restarted in place."""
    if held.owner is None:
        return 'it is unreadable'
    holder = held.owner
    if holder.host == me.host and holder.pid == me.pid:
        # Another lease or claim of this very process started when it did: a live holder.
        if holder.process_started is not None and holder.process_started < me.process_started:
            return f'its holder is {restarted} restarted in place (same host and pid)'
    elif holder.host == me.host and not process_lock.pid_alive(holder.pid):
        return f'pid {holder.pid} no longer runs on this host'
    silent_secs = time.time() - held.renewed
    if silent_secs > lease_secs:
        return f'not renewed for {silent_secs:.0f} s (--lease_timeout_secs={lease_secs:g})'
    return None


class LeaseObject:
    """The object at path, written by this process as owner (plus fields) under a fresh token.

    guard: the context every write and check is made under (an OS lock on a local disk, where
    several lease objects share one; nothing on a bucket).
    """

    def __init__(self, path: str, owner: Owner, lease_secs: float = LEASE_SECS,
                 settle_secs: float = SETTLE_SECS,
                 guard: Callable[[], ContextManager] = contextlib.nullcontext, **fields):
        self.path, self.owner, self.fields = path, owner, fields
        self.lease_secs, self.settle_secs, self.guard = lease_secs, settle_secs, guard
        self.token = uuid.uuid4().hex
        self._objects = conditional_objects.for_path(path)  # None: no conditional writes
        self._version = None  # of this process's last write, where the store has versions
        self._stop = threading.Event()
        self._thread = None

    def read(self) -> Optional[LeaseRecord]:
        """The object as it stands: None when there is none."""
        version = None
        try:
            if self._objects is not None:
                found = self._objects.read(self.path)
                if found is None:
                    return None
                data, version = found
                held = json.loads(data)  # one GET: never a read cut short by a rewrite
            else:
                held = files.read_json(self.path)
        except tf.errors.NotFoundError:
            return None
        except ValueError:
            held = None
        return LeaseRecord.from_json(held, field_names=tuple(self.fields), version=version)

    def _record(self) -> LeaseRecord:
        return LeaseRecord(self.owner, self.token, time.time(), self.fields)

    def write(self) -> None:
        """Writes the object whatever stands (no conditional writes: under the guard, or not)."""
        atomic_writes.write_json_atomic(self.path, self._record().to_json())

    def take(self, held: Optional[LeaseRecord]) -> bool:
        """Writes this process's object over held (None: there was none); whether this process
        holds it now. Conditional where the store can (held's version), exact under a local
        disk's guard, else written and read back after settle_secs."""
        if self._objects is not None:
            return self._write_over(held.version if held else None)[0]
        self.write()
        return paths.is_local(self.path) or self.settled()

    def _write_over(self, version: Optional[str]) -> Tuple[bool, Optional[LeaseRecord]]:
        """The conditional write over version (None: create): (won, what the object holds when
        lost)."""
        data = json.dumps(self._record().to_json()).encode()
        written = (self._objects.create(self.path, data) if version is None
                   else self._objects.replace(self.path, data, version))
        if written is conditional_objects.LOST:
            held = self.read()  # lost, or an earlier try of this very write went through
            if not self.is_mine(held):
                return False, held
            written = held.version
        self._version = written
        return True, None

    def is_mine(self, held: Optional[LeaseRecord]) -> bool:
        return held is not None and held.token == self.token

    def stale_reason(self, held: LeaseRecord, restarted: str) -> Optional[str]:
        """Why another holder's object no longer holds; None while that holder may still run."""
        return stale_reason(held, self.owner, self.lease_secs, restarted)

    def settled(self) -> bool:
        """After writing: whether, once other writers have settled, the object is still ours."""
        time.sleep(self.settle_secs)
        return self.is_mine(self.read())

    def keep_renewed(self, on_lost: Callable[[Optional[LeaseRecord]], None]) -> None:
        """Renews the object every lease_secs / 4 from a thread until stop(); once another
        process has taken it over (or removed it), calls on_lost with what it holds and stops.
        A store error is logged and the next renewal tried: it is not a lost lease."""
        self._thread = threading.Thread(target=self._renew, args=(on_lost,), daemon=True)
        self._thread.start()

    def _renew(self, on_lost: Callable[[Optional[LeaseRecord]], None]) -> None:
        while not self._stop.wait(self.lease_secs / 4):
            try:
                with self.guard():
                    if self._objects is not None:
                        won, held = self._write_over(self._version)
                        if not won:
                            on_lost(held)
                            return
                        continue
                    held = self.read()
                    if not self.is_mine(held):
                        on_lost(held)
                        return
                    self.write()
            except (tf.errors.OpError, OSError, StoreError) as error:  # StoreError: files' retries
                first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
                logging.warning('could not renew %s (%s); trying again in %g s', self.path,
                                first_line, self.lease_secs / 4)

    def stop(self) -> None:
        """Stops renewing (at once; a renewal under way finishes first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def remove(self) -> None:
        """Removes the object this process holds (while still its last write, where versioned)."""
        if self._objects is not None:
            if self._version is not None:
                self._objects.delete(self.path, self._version)
            return
        files.remove(self.path)

    def remove_if_mine(self) -> None:
        with self.guard():
            if self.is_mine(self.read()):
                self.remove()
