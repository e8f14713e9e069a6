"""OS locks on a local disk, and whether a process that left a file behind still runs.

flock exists only on a local disk; on a bucket callers use a lease object instead.
"""
import contextlib
import fcntl
import os


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
    """Whether a process of this host still runs (the writer of a temporary,
    atomic_writes.is_abandoned)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        pass
    return True

