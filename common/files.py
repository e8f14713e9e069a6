"""Every file a user names (data, model_dir, export_dir, output_dir, saved_model) goes through here.

Paths may be local, gs:// (TensorFlow's own GCS filesystem), s3:// (tensorflow-io's filesystem)
or ram:// (TF's in-memory filesystem, for tests); common.paths says which kind a path is. Writes
that must appear whole (and the temporaries they go through) are common.atomic_writes'. Each
bucket is probed before its first use (common.bucket_probe).

A bucket's transient failures are tried again (common.store_retries), then one line naming
the path and the operation.
"""
import concurrent.futures
import fnmatch
import json
import os
import posixpath
import socket
import time
from typing import Dict, List

import numpy as np
import tensorflow as tf

from common import bucket_probe, store_clients
from common.errors import NO_SPACE, UserError
from common.paths import OBJECT_STORE_SCHEMES, as_folder, is_local, join, local_path
from common.store_retries import in_store


def ready(path: str) -> str:
    """path, once its bucket has been probed (common.bucket_probe)."""
    bucket_probe.check_bucket(path)
    return path


# Reading and writing whole files.

def read_bytes(path: str) -> bytes:
    def read():
        with tf.io.gfile.GFile(ready(path), 'rb') as f:
            return f.read()
    return bucket_probe.found_again(lambda: in_store('reading', path, read), path)


def read_text(path: str) -> str:
    return read_bytes(path).decode('utf-8')


# A whole-object read races an overwrite: TensorFlow's bucket readers ask for the size, then
# for that many bytes of whatever the object holds by then, so a lease renewed in between comes
# back cut short (seen on the GCS test server: 1 read in ~130 while a lease was rewritten
# nonstop). A read that does not parse is tried again before the object is called damaged.
TORN_READ_PAUSES_SECS = (0.1, 0.5)


def read_parsed(path: str, parse):
    """parse(the file's text); on a bucket, text that parse refuses (ValueError) is read again
    after each of TORN_READ_PAUSES_SECS, then the ValueError is raised."""
    for pause in TORN_READ_PAUSES_SECS if path.startswith(OBJECT_STORE_SCHEMES) else ():
        try:
            return parse(read_text(path))
        except ValueError:
            time.sleep(pause)
    return parse(read_text(path))


def read_json(path: str):
    return read_parsed(path, json.loads)


def json_value(value):
    """What TensorFlow or NumPy gives, as JSON takes it: NumPy scalars and arrays as numbers
    and lists, bytes (a SavedModel's class names) as text."""
    if isinstance(value, (np.generic, np.ndarray)):
        value = value.tolist()
    if isinstance(value, bytes):
        return value.decode('utf-8')
    if isinstance(value, list):
        return [json_value(item) for item in value]
    return value


def rename(source: str, destination: str) -> None:
    """Replaces destination by one file (atomic on a local disk; a copy then delete in a bucket)."""
    if is_local(source):
        os.replace(local_path(source), local_path(destination))
    else:
        in_store('renaming', source, lambda: tf.io.gfile.rename(ready(source), destination,
                                                                overwrite=True))


def copy(source: str, destination: str) -> None:
    """Copies one file over destination, within a store or between one and a local disk (not
    atomic: callers mark completion themselves)."""
    in_store_side = source if not is_local(source) else destination
    in_store('copying', in_store_side, lambda: tf.io.gfile.copy(ready(source), ready(destination),
                                                                overwrite=True))


def open_file(path: str, mode: str = 'rb'):
    """A file object for streaming (tf.io.gfile.GFile); writes are not atomic."""
    return tf.io.gfile.GFile(ready(path), mode)


# Folders.

def exists(path: str) -> bool:
    return bucket_probe.asked_again(
        lambda: in_store('looking up', path, lambda: tf.io.gfile.exists(ready(path))), path)


def isdir(path: str) -> bool:
    return bucket_probe.asked_again(
        lambda: in_store('looking up', path, lambda: tf.io.gfile.isdir(ready(path))), path)


def makedirs(path: str) -> None:
    """A local folder and its parents; nothing in a bucket: no 'folder/' marker objects (gs://)."""
    if not path.startswith(OBJECT_STORE_SCHEMES):
        in_store('making the folder', path, lambda: tf.io.gfile.makedirs(ready(path)))


def listdir(path: str) -> List[str]:
    """The sorted names in a folder, without trailing slashes; [] when it does not exist."""
    path = as_folder(path)  # a bucket's root too
    def names():
        try:
            return in_store('listing', path, lambda: tf.io.gfile.listdir(path))
        except tf.errors.NotFoundError:  # on s3://, maybe failed requests (asked again)
            return []
    if not isdir(path):
        return []
    return sorted(name.rstrip('/') for name in bucket_probe.asked_again(names, path))


def is_glob(pattern: str) -> bool:
    """Whether a path has a wildcard tf.io.gfile.glob expands."""
    return any(char in pattern for char in '*?[')


def glob(pattern: str) -> List[str]:
    """The sorted matches. A pattern that matches nothing is tried again with every '[' taken
    as itself, not as a set of characters: a folder named 'runs[1]' or 'Photos [2024]'."""
    def matches(pattern):
        return sorted(bucket_probe.asked_again(lambda: in_store(
            'listing', pattern, lambda: _matching_paths(ready(pattern))), pattern))
    found = matches(pattern)
    if not found and '[' in pattern:
        found = matches(pattern.replace('[', '[[]'))  # fnmatch's '[' as a one-character set
    return found


def _matching_paths(pattern: str) -> List[str]:
    """tf.io.gfile.glob's matches; in a bucket, a pattern whose wildcards are in its last part is
    matched against one listing of its folder instead: s3://'s glob asks two stats a match (a
    HEAD and a LIST each), a thousand shards four thousand requests in a row."""
    folder, name_glob = posixpath.split(pattern)
    if not pattern.startswith(OBJECT_STORE_SCHEMES) or is_glob(folder) or not is_glob(name_glob):
        return tf.io.gfile.glob(pattern)
    try:
        names = tf.io.gfile.listdir(as_folder(folder))
    except tf.errors.NotFoundError:  # no such folder: nothing matches
        return []
    return [join(folder, name.rstrip('/')) for name in names
            if fnmatch.fnmatchcase(name.rstrip('/'), name_glob)]


def matching_names(names: List[str], name_glob: str) -> List[str]:
    """The sorted names that a pattern's last part matches, with glob's second try: where none
    does, every '[' taken as itself."""
    found = sorted(name for name in names if fnmatch.fnmatchcase(name, name_glob))
    if not found and '[' in name_glob:
        return matching_names(names, name_glob.replace('[', '[[]'))
    return found


def folder_sizes(folder: str) -> Dict[str, int]:
    """{name: bytes} of the files in a folder ({} where there is none), from one listing where it
    gives sizes: a bucket's by its store's own client (1,000 objects a request), a local disk's
    by os.scandir; elsewhere (ram://) a listing and a stat a file."""
    if is_local(folder):
        try:
            with os.scandir(local_path(folder) or '.') as entries:
                return {entry.name: entry.stat().st_size for entry in entries if entry.is_file()}
        except FileNotFoundError:
            return {}
    if folder.startswith(OBJECT_STORE_SCHEMES):
        # The client raises a failed request (tensorflow-io's listing answers it as empty).
        return in_store('listing', folder, lambda: store_clients.listed_sizes(ready(folder)))
    names = listdir(folder)
    return dict(zip(names, sizes([join(folder, name) for name in names])))


def size(path: str) -> int:
    """A file's size in bytes."""
    return bucket_probe.found_again(lambda: tf.io.gfile.stat(ready(path)).length, path)


# Stats of a bucket's files asked at once: each is a round trip (on s3:// a HEAD and a LIST), so
# a thousand shards in a row cost a thousand round trips.
STAT_THREADS = 32


def sizes(paths: List[str]) -> List[int]:
    """The files' sizes in bytes, in order; in a bucket up to STAT_THREADS asked at a time, each
    tried again while the store fails transiently."""
    def size_of(path):
        return in_store('looking up', path, lambda: size(path))
    in_bucket = [path for path in paths if path.startswith(OBJECT_STORE_SCHEMES)]
    if len(in_bucket) < 2:
        return [size_of(path) for path in paths]
    for path in in_bucket:
        ready(path)  # each bucket probed once, before the threads ask
    with concurrent.futures.ThreadPoolExecutor(min(STAT_THREADS, len(paths))) as pool:
        return list(pool.map(size_of, paths))


def remove(path: str) -> None:
    """Removes one file; a file already gone is fine."""
    def delete():
        try:
            tf.io.gfile.remove(ready(path))
        except tf.errors.NotFoundError:
            pass
    in_store('removing', path, delete)


def check_writable(path: str, flag: str) -> None:
    """Writes and removes a small file in PATH (locally: in the nearest folder that exists,
    so nothing is made): a read-only disk, a folder without permission or a bucket these
    credentials cannot write is one line at start, not an error after training."""
    folder = path
    if is_local(path):
        folder = os.path.abspath(local_path(path))
        while not os.path.isdir(folder):
            folder = os.path.dirname(folder)
    probe = join(folder, f'.write-check-{socket.gethostname()}-{os.getpid()}')
    def write_and_remove():
        with tf.io.gfile.GFile(ready(probe), 'wb') as f:
            f.write(b'ok')  # GFile makes the file at its first write
        tf.io.gfile.remove(probe)
    try:
        in_store('writing', probe, write_and_remove)
    except (tf.errors.OpError, OSError) as e:
        reason = e.message if isinstance(e, tf.errors.OpError) else (e.strerror or str(e))
        advice = ('free space there' if NO_SPACE in reason else
                  'give a folder or bucket this job may write, or fix its permissions')
        raise UserError(f'--{flag}={path}: cannot write there ({reason.splitlines()[0]}, writing '
                        f'{probe}); {advice}') from e
