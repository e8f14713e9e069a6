"""A bucket that fails inside TensorFlow's own code (a checkpoint save, a restore, a data read,
summaries, an export), after TensorFlow's client has retried (issue 38): training and an eval
job resume in place a few times, as the same command run again would, then stop with one line
naming the path and what TensorFlow was doing with it. (The service's own small objects are
retried one by one in common.store_retries.)

tensorflow-io's S3 client does not retry a 429 whose code it does not know, and a checkpoint
save is a dozen requests: under a store that throttles, most saves would otherwise stop the run.
"""
import os
import random
import time
import traceback
from typing import Callable, Optional, Tuple

from absl import logging

import tensorflow as tf

from common import paths, store_retries
from common.errors import StoreError, op_error_summary
from trainer.config import modes

# A run that got further resumes again: each try costs a restore, not the work done.
RESUME_TRIES = 6
MAX_RESUME_DELAY_SECS = 8.0
NOT_FOUND_AFTER_FAILURES = ('not found in checkpoint', 'Error executing an HTTP request: HTTP response '
                            'code 404', 'Failed to find any matching files for')
TRAINING_MODES = ('train', 'train_and_evaluate')
DATA = 'data'  # stands for the mode's data flag (train_files, eval_files)
# By the failing op's type: (what it was doing, the flag that names the path).
_BY_OP = {
    'SaveV2': ('saving a checkpoint into', 'model_dir'),
    'MergeV2Checkpoints': ('saving a checkpoint into', 'model_dir'),
    'RestoreV2': ('restoring a checkpoint from', 'model_dir'),
    'IteratorGetNext': ('reading', DATA),
}
# Else by the innermost of TensorFlow's files in the traceback that says what it was doing.
_BY_FILE = {
    'saver.py': ('saving or restoring a checkpoint in', 'model_dir'),
    'checkpoint_management.py': ('writing the checkpoint state file in', 'model_dir'),
    'graph_io.py': ('writing the graph into', 'model_dir'),
    'writer.py': ('writing summaries into', 'model_dir'),
    'event_file_writer.py': ('writing summaries into', 'model_dir'),
    'builder_impl.py': ('writing an export into', 'export_dir'),
    'export.py': ('writing an export into', 'export_dir'),  # trainer/serving's: Estimator's rename
    'readers.py': ('reading', DATA),
}


def what_failed(error: tf.errors.OpError, mode: str) -> Tuple[str, str]:
    """(what TensorFlow was doing, the flag naming the path) when error came up."""
    op_type = getattr(getattr(error, 'op', None), 'type', None)
    found = _BY_OP.get(op_type) or next(  # an eager op names itself only in the message
        (found for name, found in _BY_OP.items() if f'__wrapped__{name}_' in error.message), None)
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if found:
            break
        found = _BY_FILE.get(os.path.basename(frame.filename))
    doing, flag = found or (('loading the SavedModel', 'saved_model') if mode == 'predict'
                            else ('using', 'model_dir'))
    if flag == DATA:
        flag = (modes.MODES[mode].data_flags or ('model_dir',))[0]
    if doing.startswith('saving') and mode not in TRAINING_MODES:  # it saves only exports
        doing, flag = 'writing an export into', 'export_dir'
    return doing, flag


def as_store_error(error: tf.errors.OpError, settings) -> Optional[StoreError]:
    """A store's transient failure under a bucket flag, as StoreError; None for other errors.

    TensorFlow's checkpoint reader reports a failed read of a bucket's .index as "Key
    global_step not found in checkpoint", a restore whose listing tensorflow-io's S3 client
    answered empty after failed requests as "Failed to find any matching files for", and its GCS
    client a resumable upload whose session a failed request lost as a bare HTTP 404: counted
    as the store's failure too. A key the
    checkpoint truly lacks is a UserError before it comes here (checkpoint_fit.restoring);
    what else really is missing fails every try, then stops with this line."""
    if not (store_retries.is_transient(error) or (
            isinstance(error, tf.errors.NotFoundError)
            and any(text in error.message for text in NOT_FOUND_AFTER_FAILURES))):
        return None
    doing, flag = what_failed(error, settings.mode)
    path = getattr(settings, flag, None) or settings.model_dir
    if not paths.is_bucket(path or ''):
        return None
    return StoreError(f'{doing} --{flag}={path} failed: the store answered '
                      f'{type(error).__name__}: {op_error_summary(error)}, after retries; run the '
                      'same command again once it answers (it resumes)')


def resuming(run: Callable[[], None], settings, what: str,
             mend: Callable[[], None] = lambda: None) -> None:
    """run() (training, or an eval job), run again from where it stopped while a bucket fails
    transiently, up to RESUME_TRIES times with backoff, mend() before each; then the
    StoreError."""
    for attempt in range(1, RESUME_TRIES + 1):
        try:
            return run()
        except tf.errors.OpError as e:
            error = as_store_error(e, settings)
            if error is None or attempt == RESUME_TRIES:
                raise error or e
            delay = min(store_retries.STORE_BACKOFF_SECS * 2 ** attempt, MAX_RESUME_DELAY_SECS)
            delay *= random.uniform(0.5, 1.0)
            logging.warning('%s; %s resumes in %.0f s (try %d of %d)', error, what, delay,
                            attempt + 1, RESUME_TRIES)
            time.sleep(delay)
            mend()
