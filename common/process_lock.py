"""OS locks on a local disk, and whether a process that left a file behind still runs.

flock exists only on a local disk; on a bucket callers use a lease object instead.
"""
import contextlib
import fcntl
import os
import time
from typing import Optional


def try_exclusive_lock(path: str, holder: str):
    """(file, None): an exclusive OS lock (flock) on the local file path, which now reads
    `holder`; or (None, what the current holder wrote) when another process has it. The
    kernel drops the lock when its file is closed or its process dies, even by kill -9."""
    return try_lock(path, holder)


def try_lock(path: str, holder: str = '', shared: bool = False):
    """try_exclusive_lock, or with shared=True a lock that many processes hold at once (none
    of them writes the file) and that excludes an exclusive holder."""
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    lock_file = open(path, 'a+')
    try:
        fcntl.flock(lock_file, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        lock_file.seek(0)
        current = lock_file.read().strip()
        lock_file.close()
        return None, current
    if not shared:
        lock_file.seek(0)
        lock_file.truncate()
        lock_file.write(holder)
        lock_file.flush()
    return lock_file, None


@contextlib.contextmanager
def locked(path: str):
    """Holds an exclusive flock on the local file path for a short critical section, waiting
    for it; the kernel drops it if this process dies inside."""
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    with open(path, 'a') as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        yield


def pid_alive(pid: int) -> bool:
    """Whether the process that owns a temporary (NAME.tmp-PID, .staging-HOST-PID) still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        pass
    return True


def stale_reason(holder: dict, me: dict, lease_secs: float, restarted: str) -> Optional[str]:
    """Why a lease or claim object another process wrote ({host, pid, process_started, token,
    renewed}) no longer holds, seen by process `me`; None while its holder may still run.
    restarted: what to call this process restarted in place ('this trainer')."""
    if not isinstance(holder, dict) or 'token' not in holder:
        return 'it is unreadable'
    same_host = holder.get('host') == me['host']
    pid, started = holder.get('pid'), holder.get('process_started')
    if same_host and pid == me['pid']:
        # Another lease or claim of this very process started when it did: a live holder.
        if isinstance(started, (int, float)) and started < me['process_started']:
            return f'its holder is {restarted} restarted in place (same host and pid)'
    elif same_host and isinstance(pid, int) and not pid_alive(pid):
        return f'pid {pid} no longer runs on this host'
    silent_secs = time.time() - float(holder.get('renewed', 0))
    if silent_secs > lease_secs:
        return f'not renewed for {silent_secs:.0f} s (--lease_timeout_secs={lease_secs:g})'
    return None
