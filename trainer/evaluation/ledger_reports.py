"""Evaluations that reach the eval ledger and the tuners outside the eval job's own loop.

On one machine, train_and_evaluate evaluates inside tf.estimator: LedgerRecorder records
those evaluations as the eval job does. In a tuning trial on a cluster, the evaluator
evaluates, but the trial ends with its chief, and Katib reads the chief's output:
await_final_evaluation has the chief wait for the final checkpoint's evaluation, then report
the ledger.
"""
import time

import tensorflow as tf
from absl import logging

from trainer.evaluation.eval_job import POLL_SECS, EvalJob, EvalTimeout
from trainer.evaluation.metric_goal import evaluated_by_step
from trainer.run import run_files


class LedgerRecorder(tf.estimator.Exporter):
    """train_and_evaluate on one machine: each evaluation tf.estimator makes goes into the eval
    job's ledger and to the tuners, as the eval job's own do (an exporter is what
    tf.estimator calls after every evaluation, with its result)."""

    def __init__(self, job: EvalJob):
        self._job = job

    @property
    def name(self) -> str:
        return 'ledger'

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        self._job.record(int(eval_result['global_step']), checkpoint_path,
                         self._job.with_extra_metrics(eval_result, checkpoint_path))
        return None  # nothing exported here; --export_dir follows the ledger (export_policy)


def await_final_evaluation(job: EvalJob, model_dir: str, timeout_secs: float) -> None:
    """Waits until the ledger holds the final checkpoint's evaluation, then reports every
    evaluation in it (without summaries: the evaluator wrote those)."""
    final_step = run_files.train_finished(model_dir)['step']
    logging.info('--await_final_eval: waiting for eval_%s to evaluate step %d',
                 job.ledger.eval_name, final_step)
    deadline = time.time() + timeout_secs
    while job.ledger.last_step() < final_step:
        if time.time() > deadline:
            raise EvalTimeout(f'--await_final_eval: {job.ledger.path} has no evaluation of the '
                              f'final checkpoint (step {final_step}) after {timeout_secs} s '
                              '(--eval_timeout_secs); is an evaluator running with '
                              f'--eval_name={job.ledger.eval_name}?')
        time.sleep(POLL_SECS)
    for entry in evaluated_by_step(job.ledger.entries()):
        job.report(entry, None)
