"""Evaluations that reach the eval ledger and the tuners outside the eval job's own loop.

On one machine, train_and_evaluate evaluates inside tf.estimator: LedgerRecorder records
those evaluations as the eval job does. In a tuning trial on a cluster, the evaluator
evaluates, but the trial ends with its chief, and Katib reads the chief's output: the
chief, having waited for the final evaluation (--wait_for_eval_secs, trainer.run.job_end),
reports the ledger (report_ledger).
"""

import tensorflow as tf
from absl import logging

from trainer.evaluation.eval_job import EvalJob
from trainer.model_dir.metric_goal import evaluated_by_step


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


def report_ledger(job: EvalJob) -> None:
    """Reports every evaluation in the eval job's ledger to the tuners, as the eval job did
    (without summaries: the evaluator wrote those); says so when there is none."""
    entries = evaluated_by_step(job.ledger.entries())
    if not entries:
        logging.warning('no evaluation in %s to report to a tuner', job.ledger.path)
    for entry in entries:
        job.report(entry, None)
