"""Buckets are probed once per process before their first use.

A missing bucket, an unreachable endpoint or wrong credentials stop with a one-line
UserError naming the path within seconds, instead of tensorflow-io's retries (about 25 s a
call) or an empty listing that looks like "no checkpoints yet". tensorflow-io (s3://) is
imported the first time an s3:// path is used.
"""
import http.client
import os
import ssl
import threading
import urllib.parse
from typing import Callable, Optional, TypeVar

from common import paths
from common.errors import UserError

# One probe of a bucket gets this long; the S3 endpoint check inside it gets part of it.
PROBE_TIMEOUT_SECS = 20.0
ENDPOINT_TIMEOUT_SECS = 8.0
ENDPOINT_TRIES = 3

# tensorflow-io's stat answers "does not exist" (False), and a glob nothing, when its requests
# fail (500, 503, 429, resets): an s3:// "no" is asked this many times before it is believed. A
# bucket probed as missing would stop the run with the wrong advice; a manifest read as missing
# would be rewritten without the splits it had.
S3_STAT_ASKS = 3
T = TypeVar('T')
_probed_buckets = {}  # 's3://bucket' -> None (fine) or the UserError message
_s3_loaded = False


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
    for _ in range(ENDPOINT_TRIES):  # a store drops a connection now and then: asked again
        try:
            connection.request('HEAD', '/')
            connection.getresponse()
            return None
        except (ConnectionResetError, http.client.RemoteDisconnected) as e:
            problem = e
        except (OSError, http.client.HTTPException) as e:
            problem = e
            break
        finally:
            connection.close()
    return (f'{path}: cannot reach the S3 endpoint {endpoint} ({problem.__class__.__name__}: '
            f'{problem}); check S3_ENDPOINT (a URL such as http://host:9000) and the network')


def asked_again(ask: Callable[[], T], path: str) -> T:
    """ask() about path (exists, isdir, a glob); on s3://, a False or empty answer asked again
    (S3_STAT_ASKS)."""
    answer = ask()
    for _ in range(S3_STAT_ASKS - 1 if path.startswith('s3://') else 0):
        if answer:
            break
        answer = ask()
    return answer


def found_again(call: Callable[[], T], path: str) -> T:
    """call() about path (a read, a stat); on s3://, a NotFoundError asked again (S3_STAT_ASKS)
    before it is believed."""
    import tensorflow as tf  # here: see _probe_bucket
    for asks_left in range(S3_STAT_ASKS if path.startswith('s3://') else 1, 0, -1):
        try:
            return call()
        except tf.errors.NotFoundError:
            if asks_left == 1:
                raise
    raise AssertionError('unreachable')


def _probe_bucket(path: str, bucket: str) -> Optional[str]:
    """Why path's bucket (gs://NAME or s3://NAME) does not answer, or None."""
    if bucket.startswith('s3://'):
        problem = _check_s3_endpoint(path)
        if problem:
            return problem
    import tensorflow as tf  # here, so commands that never touch a bucket (deploy) start without it
    if not asked_again(lambda: tf.io.gfile.isdir(bucket + '/'), bucket):
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
    if not path.startswith(paths.OBJECT_STORE_SCHEMES):
        return
    bucket = paths.bucket_of(path)
    if bucket not in _probed_buckets:
        answer = []
        # Filesystem calls cannot be interrupted: a daemon thread lets us give up on them.
        worker = threading.Thread(target=lambda: answer.append(_probe_bucket(path, bucket)),
                                  daemon=True)
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
