"""Writes that readers see whole or not at all, and the one rule for what a killed writer left.

Object stores have no append, no atomic rename of a folder and no locks, so these writers only
ever write whole files: locally through a temporary name and a rename (Temporary,
written_in_place: NAME.tmp-HOST-PID; remove_abandoned_temporaries), in a bucket as one object
put (atomic by itself). Everything else about files is common.files'.
"""
import contextlib
import json
import os
import posixpath
import re
import socket
import time

import tensorflow as tf
from absl import logging

from common import process_lock
from common.files import glob, ready, remove, rename
from common.paths import OBJECT_STORE_SCHEMES, is_local, join, local_path
from common.store_retries import in_store


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Readers see the old file or the whole new one, never part of it. Creates the folder."""
    if path.startswith(OBJECT_STORE_SCHEMES):
        def put():
            with tf.io.gfile.GFile(ready(path), 'wb') as f:  # one PUT when closed
                f.write(data)
        in_store('writing', path, put)  # a failed put leaves the old object: nothing to remove
        return
    if is_local(path):
        os.makedirs(os.path.dirname(local_path(path)) or '.', exist_ok=True)
    else:  # ram:// and other filesystems with a rename
        tf.io.gfile.makedirs(posixpath.dirname(path))
    with written_in_place(path) as temporary:
        if is_local(temporary):
            with open(local_path(temporary), 'wb') as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        else:
            with tf.io.gfile.GFile(temporary, 'wb') as f:
                f.write(data)


# Temporaries: a file is written under NAME.tmp-HOST-PID beside NAME, then renamed into place
# whole. Its writer's host and pid are in its name because a pid alone is not unique across the
# hosts that share a folder (NFS): a clean-up on one must not remove another's file mid-write.
TEMPORARY_MARK = '.tmp-'
# Another host's temporary is abandoned once untouched this long (its pid says nothing here):
# a writer touches its file at every buffer it writes, and no job here pauses for days.
FOREIGN_TEMPORARY_MAX_AGE_SECS = 3 * 24 * 3600
# What follows the mark: HOST-PID, or PID alone as releases before hosts were named wrote it.
_WRITER = re.compile(r'(?:(?P<host>.+)-)?(?P<pid>\d+)')


def writer_tag() -> str:
    """'HOST-PID' of this process, for the names of the temporaries it writes."""
    return f'{socket.gethostname()}-{os.getpid()}'


class Temporary:
    """Where a file is written before it is put in place at final_path, whole.

    path: NAME.tmp-HOST-PID, renamed to NAME by put_in_place (atomic on a local disk); in an
    object store (gs://, s3://) the final path itself, where an object appears whole when its
    writer closes (a rename there is a copy)."""

    def __init__(self, final_path: str):
        self.final_path = final_path
        self.path = (final_path if final_path.startswith(OBJECT_STORE_SCHEMES)
                     else f'{final_path}{TEMPORARY_MARK}{writer_tag()}')

    def put_in_place(self) -> None:
        if self.path != self.final_path:
            rename(self.path, self.final_path)

    def discard(self) -> None:
        """Removes what was written; in an object store the object, which a writer stopped
        midway (an error, SIGTERM) still closed whole-looking."""
        remove(self.path)


@contextlib.contextmanager
def written_in_place(final_path: str):
    """Yields the path to write final_path's content to (Temporary.path); put in place when the
    block ends, removed when it raises."""
    temporary = Temporary(final_path)
    try:
        yield temporary.path
        temporary.put_in_place()
    except BaseException:
        temporary.discard()
        raise


def is_abandoned(path: str, mark: str = TEMPORARY_MARK) -> bool:
    """Whether the writer named after `mark` in path's name (HOST-PID) is provably gone: one of
    this host whose pid no longer runs; another host's (or one without a host) untouched for
    FOREIGN_TEMPORARY_MAX_AGE_SECS. False for a name without a writer."""
    name = posixpath.basename(path.rstrip('/'))
    match = _WRITER.fullmatch(name.rsplit(mark, 1)[1]) if mark in name else None
    if not match:
        return False
    if match['host'] == socket.gethostname():
        return not process_lock.pid_alive(int(match['pid']))
    return _age_secs(path) > FOREIGN_TEMPORARY_MAX_AGE_SECS


def _age_secs(path: str) -> float:
    """Seconds since path was last written; 0 where its store keeps no time (a bucket's folder)."""
    try:
        mtime_secs = tf.io.gfile.stat(ready(path)).mtime_nsec / 1e9
    except tf.errors.OpError:
        return 0.0
    return time.time() - mtime_secs if mtime_secs > 0 else 0.0


def remove_abandoned_temporaries(folder: str) -> None:
    """Removes the temporaries in folder (NAME.tmp-HOST-PID) whose writers are gone (is_abandoned),
    which a kill left behind: they would match a pattern of the files they were to become."""
    if folder.startswith(OBJECT_STORE_SCHEMES):  # written in place there: no temporaries
        return
    for path in glob(join(folder, f'*{TEMPORARY_MARK}*')):
        if is_abandoned(path):
            logging.info('removing %s, left by a writer that is gone', path)
            remove(path)


def write_text_atomic(path: str, text: str) -> None:
    write_bytes_atomic(path, text.encode('utf-8'))


def write_json_atomic(path: str, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + '\n')
