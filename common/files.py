"""Every file a user names (data, model_dir, export_dir, output_dir, saved_model) goes through here.

Paths may be local, gs:// (TensorFlow's own GCS filesystem), s3:// (tensorflow-io's
filesystem, imported the first time an s3:// path is used) or ram:// (TF's in-memory
filesystem, for tests). Object stores have no append, no atomic rename of a folder and
no locks, so the writers here only ever write whole files: locally through a temporary
name and a rename, in a bucket as one object put (which is atomic by itself).

A bucket is probed once per process before its first use, so that a missing bucket, an
unreachable endpoint or wrong credentials stop with a one-line UserError naming the
path within seconds, instead of tensorflow-io's retries (about 25 s a call) or an
empty listing that looks like "no checkpoints yet".
"""
import http.client
import fcntl
import json
import os
import posixpath
import shutil
import ssl
import sys
import threading
import urllib.parse
from typing import List, Optional

import tensorflow as tf

from common.errors import UserError

BUCKET_SCHEMES = ('gs://', 's3://')
# One probe of a bucket gets this long; the S3 endpoint check inside it gets part of it.
PROBE_TIMEOUT_SECS = 20.0
ENDPOINT_TIMEOUT_SECS = 8.0

_probed_buckets = {}  # 's3://bucket' -> None (fine) or the UserError message
_s3_loaded = False


def is_bucket(path: str) -> bool:
    return path.startswith(BUCKET_SCHEMES)


def is_local(path: str) -> bool:
    """A plain path or file://: a POSIX disk, with atomic rename and locks."""
    return '://' not in path or path.startswith('file://')


def local_path(path: str) -> str:
    return path[len('file://'):] if path.startswith('file://') else path


def join(*parts: str) -> str:
    return posixpath.join(*parts) if not is_local(parts[0]) else os.path.join(*parts)


def bucket_of(path: str) -> str:
    """'s3://bucket/a/b' -> 's3://bucket'."""
    scheme, rest = path.split('://', 1)
    return f'{scheme}://{rest.split("/", 1)[0]}'


def used_s3() -> bool:
    return _s3_loaded


def _load_s3_filesystem() -> None:
    global _s3_loaded
    if not _s3_loaded:
        import tensorflow_io  # noqa: F401  (registers s3:// with tf.io.gfile)
        _s3_loaded = True


def s3_endpoint() -> str:
    """The endpoint tensorflow-io talks to: S3_ENDPOINT (a URL; http:// for plain HTTP), or AWS."""
    endpoint = os.environ.get('S3_ENDPOINT')
    if not endpoint:
        return f'https://s3.{os.environ.get("AWS_REGION", "us-east-1")}.amazonaws.com'
    return endpoint if '://' in endpoint else f'https://{endpoint}'


def _check_s3_endpoint(path: str) -> Optional[str]:
    """Any HTTP answer from the endpoint will do; returns why not, or None."""
    endpoint = s3_endpoint()
    url = urllib.parse.urlsplit(endpoint)
    if url.scheme == 'https':
        context = ssl.create_default_context()
        if os.environ.get('S3_VERIFY_SSL', '1') == '0':
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        connection = http.client.HTTPSConnection(url.hostname, url.port,
                                                 timeout=ENDPOINT_TIMEOUT_SECS, context=context)
    else:
        connection = http.client.HTTPConnection(url.hostname, url.port,
                                                timeout=ENDPOINT_TIMEOUT_SECS)
    try:
        connection.request('HEAD', '/')
        connection.getresponse()
    except (OSError, http.client.HTTPException) as e:
        return (f'{path}: cannot reach the S3 endpoint {endpoint} ({e.__class__.__name__}: {e}); '
                'check S3_ENDPOINT (a URL such as http://host:9000) and the network')
    finally:
        connection.close()
    return None


def _probe_bucket(path: str) -> Optional[str]:
    bucket = bucket_of(path)
    if bucket.startswith('s3://'):
        problem = _check_s3_endpoint(path)
        if problem:
            return problem
    if not tf.io.gfile.isdir(bucket + '/'):
        keys = ('S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION'
                if bucket.startswith('s3://') else 'GOOGLE_APPLICATION_CREDENTIALS')
        return (f'{path}: bucket {bucket} does not exist or these credentials cannot read it; '
                f'create the bucket or check {keys}')
    return None


def check_bucket(path: str) -> None:
    """For a gs:// or s3:// path, makes sure its bucket answers (once per bucket and process).

    Raises UserError naming the path when it does not, within PROBE_TIMEOUT_SECS.
    """
    if path.startswith('s3://'):
        _load_s3_filesystem()
    if not is_bucket(path):
        return
    bucket = bucket_of(path)
    if bucket not in _probed_buckets:
        answer = []
        # Filesystem calls cannot be interrupted: a daemon thread lets us give up on them.
        worker = threading.Thread(target=lambda: answer.append(_probe_bucket(path)), daemon=True)
        worker.start()
        worker.join(PROBE_TIMEOUT_SECS)
        if not answer:
            raise UserError(f'{path}: no answer from {bucket} within {PROBE_TIMEOUT_SECS:.0f} s; '
                            'check the network and the storage credentials')
        _probed_buckets[bucket] = answer[0]
    if _probed_buckets[bucket]:
        raise UserError(_probed_buckets[bucket])


def check_buckets(paths) -> None:
    """check_bucket for each path (None and '' skipped; comma-separated patterns split)."""
    for value in paths:
        for path in filter(None, (value or '').split(',')):
            check_bucket(path.strip())


def _ready(path: str) -> str:
    check_bucket(path)
    return path


# Reading and writing whole files.

def read_bytes(path: str) -> bytes:
    with tf.io.gfile.GFile(_ready(path), 'rb') as f:
        return f.read()


def read_text(path: str) -> str:
    return read_bytes(path).decode('utf-8')


def read_json(path: str):
    return json.loads(read_text(path))


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Readers see the old file or the whole new one, never part of it. Creates the folder."""
    if is_local(path):
        path = local_path(path)
        os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
        temp_path = f'{path}.tmp-{os.getpid()}'
        try:
            with open(temp_path, 'wb') as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp_path, path)
        finally:
            if os.path.exists(temp_path):
                os.remove(temp_path)
    elif is_bucket(path):
        with tf.io.gfile.GFile(_ready(path), 'wb') as f:  # one PUT when closed
            f.write(data)
    else:  # ram:// and other filesystems with a rename
        tf.io.gfile.makedirs(posixpath.dirname(path))
        temp_path = f'{path}.tmp-{os.getpid()}'
        with tf.io.gfile.GFile(temp_path, 'wb') as f:
            f.write(data)
        tf.io.gfile.rename(temp_path, path, overwrite=True)


def write_text_atomic(path: str, text: str) -> None:
    write_bytes_atomic(path, text.encode('utf-8'))


def write_json_atomic(path: str, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + '\n')


def rename(source: str, destination: str) -> None:
    """Replaces destination by one file (atomic on a local disk; a copy then delete in a bucket)."""
    if is_local(source):
        os.replace(local_path(source), local_path(destination))
    else:
        tf.io.gfile.rename(_ready(source), destination, overwrite=True)


def open_file(path: str, mode: str = 'rb'):
    """A file object for streaming (tf.io.gfile.GFile); writes are not atomic."""
    return tf.io.gfile.GFile(_ready(path), mode)


# Folders.

def exists(path: str) -> bool:
    return tf.io.gfile.exists(_ready(path))


def isdir(path: str) -> bool:
    return tf.io.gfile.isdir(_ready(path))


def makedirs(path: str) -> None:
    """Creates a local folder (and its parents); in a bucket folders exist by their objects."""
    tf.io.gfile.makedirs(_ready(path))


def listdir(path: str) -> List[str]:
    """The sorted names in a folder, without trailing slashes; [] when it does not exist."""
    if not tf.io.gfile.isdir(_ready(path)):
        return []
    return sorted(name.rstrip('/') for name in tf.io.gfile.listdir(path))


def glob(pattern: str) -> List[str]:
    return sorted(tf.io.gfile.glob(_ready(pattern)))


def size(path: str) -> int:
    """A file's size in bytes."""
    return tf.io.gfile.stat(_ready(path)).length


def remove(path: str) -> None:
    """Removes one file; a file already gone is fine."""
    try:
        tf.io.gfile.remove(_ready(path))
    except tf.errors.NotFoundError:
        pass


def remove_tree(path: str) -> None:
    """Removes a folder and everything under it; a folder already gone is fine."""
    if is_local(path):
        shutil.rmtree(local_path(path), ignore_errors=True)
    elif tf.io.gfile.isdir(_ready(path)):
        try:
            tf.io.gfile.rmtree(path)
        except tf.errors.NotFoundError:
            pass


def copy_tree(source: str, destination: str) -> List[str]:
    """Copies every file under source to the same relative path under destination.

    Returns the relative paths copied. Not atomic: callers write a marker when it is done.
    """
    copied = []
    source = source.rstrip('/')
    for folder, _, names in tf.io.gfile.walk(_ready(source)):
        relative_folder = folder.rstrip('/')[len(source):].lstrip('/')
        makedirs(join(destination, relative_folder) if relative_folder else destination)
        for name in names:
            relative = posixpath.join(relative_folder, name) if relative_folder else name
            tf.io.gfile.copy(join(source, relative), join(_ready(destination), relative),
                             overwrite=True)
            copied.append(relative)
    return sorted(copied)


def move_tree(source: str, destination: str) -> None:
    """Puts folder source in place of destination (replacing any folder there).

    On a local disk a rename: atomic. Elsewhere a copy, then source is removed; callers mark
    completion themselves (a bucket has no atomic rename of a folder).
    """
    if is_local(source) and is_local(destination):
        source, destination = local_path(source), local_path(destination)
        if os.path.exists(destination):  # swap it in: the old one out of the way first
            old = f'{destination}.old-{os.getpid()}'
            os.rename(destination, old)
            os.rename(source, destination)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(source, destination)
    else:
        remove_tree(destination)  # an incomplete copy left by a kill, or an older version
        copy_tree(source, destination)
        remove_tree(source)


def try_exclusive_lock(path: str, holder: str):
    """(file, None): an exclusive OS lock (flock) on the local file path, which now reads
    `holder`; or (None, what the current holder wrote) when another process has it. The
    kernel drops the lock when its file is closed or its process dies, even by kill -9."""
    # local: flock exists only on a local disk; callers use a lease object on a bucket
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    lock_file = open(path, 'a+')
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock_file.seek(0)
        current = lock_file.read().strip()
        lock_file.close()
        return None, current
    lock_file.seek(0)
    lock_file.truncate()
    lock_file.write(holder)
    lock_file.flush()
    return lock_file, None


def pid_alive(pid: int) -> bool:
    """Whether the process that owns a temporary (NAME.tmp-PID, .staging-HOST-PID) still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        pass
    return True


# Leaving the process.

def exit_process(code: int) -> None:
    """Exits with code. After s3:// was used, skips the interpreter's teardown: tensorflow-io
    0.36.0's AWS SDK aborts in it ("pure virtual method called", status 134) even when all the
    work is done, which would turn every success into a failure."""
    if not _s3_loaded:
        sys.exit(code)
    try:
        from absl import logging
        logging.flush()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def cli_main(main):
    """Wraps an absl main(argv) so its exit status survives exit_process (see there)."""
    def wrapped(argv):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # noqa: B902  (printed, then a failure status)
            import traceback
            traceback.print_exc()
            code = 1
        exit_process(code or 0)
    return wrapped
