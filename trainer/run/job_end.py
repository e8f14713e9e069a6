"""The end of a cluster job: the chief waits for the eval job, parameter servers and workers leave.

On a TFJob the job is over when the chief exits (the default success policy), and the
operator then deletes every replica still running (cleanPodPolicy: Running), the evaluator
included; on Vertex AI the primary replica (workerpool0) reports the job's state. So the
chief, told --wait_for_eval_secs, stays until the eval job's ledger has an entry for the
final checkpoint. Parameter servers have no end of their own in tf.estimator (they block
in server.join() for ever); here they serve until train_finished.json appears. A worker then
leaves too, if it has not ended by itself: one that was creating its session as they left
would wait for them for ever, silently, inside TensorFlow's C++ runtime (issue 38: a loopback
cluster on gs:// hung so once in 16 runs; a worker started with its ps gone shows it at once).
"""
import contextlib
import threading
import time
from typing import Optional

import tensorflow as tf
from absl import logging

from common import cli, paths, termination, tf_config
from common.errors import StoreError
from trainer.model_dir import checkpoints, ledger, run_files

# How long a parameter server told to stop serves on for the chief's last save (within
# Kubernetes' default 30 s grace period).
PS_GRACE_SECS = 20
# How long a worker has to end by itself once training has finished (its next step ends it).
WORKER_GRACE_SECS = 20


def wait_for_eval(eval_ledger: ledger.Ledger, final_step: int, wait_secs: float) -> None:
    """Returns once the ledger has an entry (evaluated, skipped or damaged) for final_step,
    or after wait_secs, saying so in one line: the job still ends well."""
    logging.info('waiting up to %d s (--wait_for_eval_secs) for eval job %s to record the '
                 'final checkpoint, step %d, in %s', wait_secs, eval_ledger.eval_name,
                 final_step, eval_ledger.path)
    deadline = time.time() + wait_secs
    while not _all_recorded(eval_ledger, final_step):
        if time.time() >= deadline:
            logging.warning('eval job %s has no entry for the final checkpoint (step %d) in %s '
                            'after %d s (--wait_for_eval_secs); ending without it',
                            eval_ledger.eval_name, final_step, eval_ledger.path, wait_secs)
            return
        time.sleep(checkpoints.POLL_SECS)
    logging.info('eval job %s recorded the final checkpoint (step %d)', eval_ledger.eval_name,
                 final_step)


def _all_recorded(eval_ledger: ledger.Ledger, final_step: int) -> bool:
    """The final step is in the ledger, and so is every checkpoint kept before it (several
    eval jobs under one name finish steps out of order)."""
    recorded = {entry.step for entry in eval_ledger.entries()}
    kept = [step for step, _ in checkpoints.list_checkpoints(eval_ledger.model_dir)]
    return (max(recorded, default=-1) >= final_step
            and all(step in recorded for step in kept if step < final_step))


def serve_until_training_ends(config: tf.estimator.RunConfig, model_dir: str) -> None:
    """A parameter server: serves the variables until the chief writes a new
    train_finished.json (one already there when it starts is an earlier run's)."""
    earlier = run_files.train_finished(model_dir)
    server = tf.distribute.Server(  # as tf.estimator's run_ps starts it
        config.cluster_spec, job_name=config.task_type, task_index=config.task_id,
        config=tf.compat.v1.ConfigProto(
            gpu_options=config.session_config.gpu_options if config.session_config else None),
        protocol=config.protocol, start=True)
    logging.info('parameter server %s serving until %s is written', server.target,
                 paths.join(model_dir, run_files.TRAIN_FINISHED_FILE))
    # Polled in Python, not blocked in server.join(), so that a signal is seen. A whole job
    # stopped at once: the chief saves the step it reached from the variables served here.
    with termination.finish_first('serving while the chief saves its checkpoint'):
        while True:
            finished = _finished_since(model_dir, earlier)
            if finished is not None:
                logging.info('training finished at step %d; parameter server done',
                             finished.step)
                return
            latest = tf.train.latest_checkpoint(model_dir)  # before a signal in the sleep
            time.sleep(checkpoints.POLL_SECS)
            if termination.requested():
                return _serve_for_the_last_save(model_dir, latest)


def _finished_since(model_dir: str, earlier) -> Optional[run_files.TrainFinished]:
    """train_finished.json if the chief has written one other than earlier (an earlier run's
    record, or None), else None."""
    finished = run_files.train_finished(model_dir)
    return finished if finished is not None and finished != earlier else None


def _serve_for_the_last_save(model_dir: str, latest_before: str) -> None:
    """After a signal: serves on until a checkpoint newer than latest_before appears, or
    PS_GRACE_SECS pass (the chief may not be stopping)."""
    deadline = time.time() + PS_GRACE_SECS
    while tf.train.latest_checkpoint(model_dir) == latest_before and time.time() < deadline:
        time.sleep(checkpoints.POLL_SECS / 4)


@contextlib.contextmanager
def leaving_when_training_ends(task_type: str, model_dir: str, train_steps: int):
    """Around a cluster task's training. A worker started after training reached --train_steps
    (train_finished.json says so: restarted by the operator, or late) exits at once (0), where
    it would wait for its departed chief and parameter servers for ever. For a worker beside
    parameter servers: once the chief writes a new train_finished.json, a worker still training
    WORKER_GRACE_SECS later exits (0: the job's training is done). A thread and os._exit, because
    the worker may be blocked in TensorFlow's C++ session creation, where no Python signal
    handler runs. The thread is stopped and joined as training returns: a daemon thread inside a
    gs:// read as the interpreter exits aborts the process ('FATAL: exception not rethrown')."""
    earlier = run_files.train_finished(model_dir) if task_type == 'worker' else None
    if earlier is not None and not earlier.early_stopped and earlier.step >= train_steps:
        logging.info('training already finished at step %d (%s, --train_steps=%d): worker done',
                     earlier.step, paths.join(model_dir, run_files.TRAIN_FINISHED_FILE),
                     train_steps)
        cli.exit_at_once(0)
    if task_type != 'worker' or 'ps' not in tf_config.cluster_jobs():
        yield
        return
    training_returned = threading.Event()

    def watch():
        finished = None
        while finished is None:
            if training_returned.wait(checkpoints.POLL_SECS):
                return
            try:
                finished = _finished_since(model_dir, earlier)
            except (tf.errors.OpError, StoreError) as e:  # the store failing: ask again
                logging.warning('reading %s/%s failed (%s); asking again', model_dir,
                                run_files.TRAIN_FINISHED_FILE, e)
        if training_returned.wait(WORKER_GRACE_SECS):
            return
        logging.info('training finished at step %d (the chief wrote %s) and this worker is still '
                     'running %d s later, its parameter servers gone: worker done', finished.step,
                     run_files.TRAIN_FINISHED_FILE, WORKER_GRACE_SECS)
        cli.exit_at_once(0)

    watcher = threading.Thread(target=watch, name='leaving_when_training_ends', daemon=True)
    watcher.start()
    try:
        yield
    finally:
        training_returned.set()
        watcher.join()
