"""Trying a bucket operation again while the store fails transiently (issue 38), then one line.

A bucket fails now and then (500, 503 SlowDown, 429, a reset connection, a stall) beyond what
TensorFlow's clients retry. The service's own objects (the training lease, claims, ledger
entries, pointers, models.config, manifests) go through common/files, whose bucket operations
run through in_store: tried again with backoff, then StoreError naming the path and the
operation (exit 1; the same command resumes). So do the calls of the stores' own clients that
write the training lease and claims (common/conditional_objects.py): TransientStoreFailure.
"""
import random
import time
from typing import Callable, TypeVar

import tensorflow as tf
from absl import logging

from common.errors import StoreError, op_error_summary
from common.paths import OBJECT_STORE_SCHEMES

# What a store's failures become once TensorFlow's client has retried them (tensorflow-io: a
# 500 or 503 is InternalError, a 429 UnknownError; TF's GCS client: UnavailableError...).
TRANSIENT_ERRORS = (tf.errors.UnavailableError, tf.errors.InternalError, tf.errors.UnknownError,
                    tf.errors.AbortedError, tf.errors.DeadlineExceededError,
                    tf.errors.ResourceExhaustedError)

# What a whole-folder operation in a bucket reports when one of its requests failed, in place of
# the failure (seen under the fault proxy's errors-20%, ./run.sh test-store-faults):
FOLDER_OPERATION_FAILURES = (
    # tensorflow-io's S3 copy (a folder renamed: copied), when its look at the source failed; an
    # object that is really empty is reported as missing instead (NotFoundError).
    (tf.errors.FailedPreconditionError, 'Source is a directory or empty file'),
    # tf.io.gfile.rmtree, when one of its deletes failed (the rest were done).
    (tf.errors.PermissionDeniedError, 'could not fully delete dir'),
)


class TransientStoreFailure(Exception):
    """A transient failure of a store's own client (the lease objects' calls, common/
    conditional_objects.py), after that client's retries: tried again as TRANSIENT_ERRORS are."""


def is_transient(error: BaseException) -> bool:
    """One of TRANSIENT_ERRORS, also as the bare OpError with its code that some of TensorFlow's
    wrappers raise (the checkpoint reader), or a FOLDER_OPERATION_FAILURES error."""
    return isinstance(error, (TransientStoreFailure, *TRANSIENT_ERRORS)) or (
        isinstance(error, tf.errors.OpError)
        and (error.error_code in {cls(None, None, '').error_code for cls in TRANSIENT_ERRORS}
             or any(isinstance(error, cls) and text in (error.message or '')
                    for cls, text in FOLDER_OPERATION_FAILURES)))


STORE_TRIES = 4
STORE_BACKOFF_SECS = 1.0  # before the 2nd try; doubled each time, jittered
T = TypeVar('T')


def in_store(operation: str, path: str, call: Callable[[], T]) -> T:
    """call() (an operation on path), tried again with backoff while a bucket fails transiently;
    after STORE_TRIES tries, StoreError naming the operation and the path."""
    if not path.startswith(OBJECT_STORE_SCHEMES):
        return call()
    for attempt in range(1, STORE_TRIES + 1):
        try:
            return call()
        except (tf.errors.OpError, TransientStoreFailure) as e:
            if not is_transient(e):
                raise
            summary = op_error_summary(e) if isinstance(e, tf.errors.OpError) else str(e)
            reason = f'{type(e).__name__}: {summary}'
            if attempt == STORE_TRIES:
                raise StoreError(f'{operation} {path} failed {STORE_TRIES} times, the last with '
                                 f'{reason}; the store keeps failing: run the same command '
                                 'again once it answers') from e
            delay = STORE_BACKOFF_SECS * 2 ** (attempt - 1) * random.uniform(0.5, 1.0)
            logging.warning('%s %s failed (%s); trying again in %.1f s', operation, path, reason,
                            delay)
            time.sleep(delay)
    raise AssertionError('unreachable')
