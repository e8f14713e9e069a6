"""Training hooks."""
import time
from typing import Optional

import tensorflow as tf
from absl import logging

from common import progress, termination
from trainer.model_dir.metric_goal import MetricGoal


class ProgressHook(tf.estimator.SessionRunHook):
    """Every N steps logs progress and the time left, and writes the speed to TensorBoard.

    'step 1,200/12,000 (10%), loss 0.0425, accuracy 0.9900, 3,310 examples/sec, ETA 5m26s':
    the ETA is at the speed of about the last minute (common/progress.py). TensorBoard
    gets `global_step/sec` (the name tf.estimator's own step counter uses) and
    `examples_per_sec`.
    """

    def __init__(self, every_n_steps: int, batch_size: int, model_dir: str,
                 total_steps: Optional[int] = None,
                 loss_tensor='cross_entropy:0', accuracy_tensor='train_accuracy:0'):
        self._every_n_steps = every_n_steps
        self._batch_size = batch_size
        self._model_dir = model_dir
        self._total_steps = total_steps
        self._tensor_names = {'loss': loss_tensor, 'accuracy': accuracy_tensor}

    def begin(self):
        graph = tf.compat.v1.get_default_graph()
        self._global_step = tf.compat.v1.train.get_global_step()
        self._tensors = {'step': self._global_step}
        for key, name in self._tensor_names.items():
            try:
                self._tensors[key] = graph.get_tensor_by_name(name)
            except KeyError:
                pass  # a model without that tensor logs the rest
        self._writer = tf.compat.v1.summary.FileWriterCache.get(self._model_dir)
        self._last_step = None
        self._last_time = None
        self._recent = progress.RecentRate()

    def before_run(self, run_context):
        return tf.estimator.SessionRunArgs(self._tensors)

    def after_run(self, run_context, run_values):
        values = run_values.results
        step, now = int(values['step']), time.time()
        if self._last_step is None:  # the first step includes the graph's warm-up: not timed
            self._last_step, self._last_time = step, now
            self._recent.add(step, now)
            return
        if step - self._last_step < self._every_n_steps:
            return
        steps_per_sec = (step - self._last_step) / (now - self._last_time)
        examples_per_sec = steps_per_sec * self._batch_size
        self._recent.add(step, now)
        parts = [f'step {progress.fraction_text(step, self._total_steps)}']
        parts += [f'{key} {values[key]:.4f}' for key in ('loss', 'accuracy') if key in values]
        parts.append(f'{examples_per_sec:,.0f} examples/sec')
        parts.append(progress.eta_text(step, self._total_steps, self._recent.per_sec()))
        logging.info(', '.join(part for part in parts if part))
        self._writer.add_summary(tf.compat.v1.Summary(value=[
            tf.compat.v1.Summary.Value(tag='global_step/sec', simple_value=steps_per_sec),
            tf.compat.v1.Summary.Value(tag='examples_per_sec', simple_value=examples_per_sec),
        ]), step)
        self._last_step, self._last_time = step, now


class EarlyStoppingHook(tf.estimator.SessionRunHook):
    """Stops training when an eval job's ledger shows no improvement of a metric for N evaluations.

    The eval job runs in another process; every training task reads the ledger
    itself, so the workers of a cluster stop too.
    """

    def __init__(self, eval_ledger, goal: MetricGoal, patience: int, check_every_secs: float):
        self._ledger = eval_ledger
        self._goal, self._patience = goal, patience
        self._check_every_secs = check_every_secs
        self.reason = None

    def begin(self):
        self._global_step = tf.compat.v1.train.get_global_step()
        self._timer = tf.estimator.SecondOrStepTimer(every_secs=self._check_every_secs)

    def before_run(self, run_context):
        return tf.estimator.SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        step = int(run_values.results)
        if not self._timer.should_trigger_for_step(step):
            return
        self._timer.update_last_triggered_step(step)
        stalled = self._goal.stalled(self._ledger.entries(), self._patience)
        if stalled:
            self.reason = f'{stalled} ({self._ledger.path})'
            logging.info('early stopping at step %d: %s', step, self.reason)
            run_context.request_stop()


class StopOnSignalHook(tf.estimator.SessionRunHook):
    """Ends training at the step it reached once SIGTERM or Ctrl-C asked for a stop
    (common.termination); the session's end then saves that step's checkpoint
    (tf.estimator's CheckpointSaverHook.end)."""

    def begin(self):
        self._global_step = tf.compat.v1.train.get_global_step()

    def after_run(self, run_context, run_values):
        if termination.requested() and not run_context.stop_requested:
            step = run_context.session.run(self._global_step)
            logging.info('%s: stopping training at step %d; its checkpoint is saved before '
                         'the exit', termination.signal_name(), step)
            run_context.request_stop()


class NoEvaluationAfterSignal(tf.estimator.CheckpointSaverListener):
    """After a signal, skips the evaluations train_and_evaluate runs on one machine after a
    save and once training ends: the checkpoint of the step reached is saved by then, and an
    evaluation could outlast the grace period before SIGKILL.

    Listed first among the saving listeners, so it is called before the evaluating one;
    raising also skips the hooks' end(), so the summaries are flushed here.
    """

    def __init__(self, model_dir: str):
        self._model_dir = model_dir

    def after_save(self, session, global_step_value):
        self.end(session, global_step_value)

    def end(self, session, global_step_value):
        if termination.requested():
            tf.compat.v1.summary.FileWriterCache.get(self._model_dir).flush()
            raise termination.Terminated(termination.received())
