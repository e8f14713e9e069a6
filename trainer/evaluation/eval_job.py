"""Eval jobs: every checkpoint of a model_dir evaluated exactly once, oldest first, into a ledger.

continuous_eval watches the model_dir while a trainer in another process (or a
cluster) writes checkpoints, like the loop over checkpoints in tensorflow/tpu's
resnet_main.py, but it lists every checkpoint file instead of waiting for the
latest, which skips those saved during an evaluation. evaluate_once serves a
scheduler: the latest checkpoint, all of them, or one step. Both skip what the
ledger already has and export as the ledger says (trainer/evaluation/export_policy.py).
SIGTERM or Ctrl-C abandons the checkpoint in hand without a ledger entry (common.termination):
the same command evaluates it again.
"""
import time
from typing import Callable, Dict, List, Optional, Tuple

import tensorflow as tf
from absl import logging

from common import files, paths, termination
from common.errors import UserError
from trainer.evaluation import ledger
from trainer.evaluation.export_policy import LedgerExports
from trainer.run import checkpoints, run_files

POLL_SECS = 1.0
# How long an eval job waits for a model_dir that does not exist yet.
MODEL_DIR_GRACE_SECS = 120


class EvalTimeout(RuntimeError):
    """No checkpoint ever came: a runtime failure (exit 1), not bad input."""


class EvalJob:
    def __init__(self, estimator: tf.estimator.Estimator, input_fn: Callable, eval_files: str,
                 eval_ledger: ledger.Ledger, exports: Optional[LedgerExports] = None,
                 extra_metrics: Optional[Callable[[str], Dict]] = None,
                 report: Optional[Callable[[Dict, str], None]] = None):
        self.estimator = estimator
        self.report = report  # (ledger entry, eval folder) -> None: tells tuners (observe/tuner_metrics)
        self.extra_metrics = extra_metrics  # checkpoint path -> more metrics (LFW's protocol)
        self.input_fn = input_fn
        self.eval_files = eval_files
        self.ledger = eval_ledger
        self.exports = exports

    def start(self) -> None:
        """Checks the ledger holds results on the same data, and mends exports a kill left undone."""
        for entry in self.ledger.entries():
            if entry.get('eval_files', self.eval_files) != self.eval_files:
                raise UserError(f'--eval_name={self.ledger.eval_name}: {self.ledger.path} holds '
                                f'results on --eval_files={entry["eval_files"]}; give '
                                f'{self.eval_files} its own --eval_name')
        self.update_exports()

    def evaluate(self, step: int, path: str) -> Dict:
        """Evaluates one checkpoint, appends its ledger line, then exports if the ledger says so."""
        if not checkpoints.exists(path):
            return self._skip(step, path)
        started = time.time()
        try:
            metrics = self.estimator.evaluate(self.input_fn, checkpoint_path=path,
                                              name=self.ledger.eval_name)
            metrics = self.with_extra_metrics(metrics, path)
        except (tf.errors.OpError, ValueError):  # ValueError: 'not a valid checkpoint'
            if not checkpoints.exists(path):
                return self._skip(step, path)  # the trainer deleted it while it was being restored
            problem = checkpoints.damage(path)
            if problem is None:
                raise
            logging.warning('eval_%s: step %d: %s cannot be read (%s); recorded as damaged, '
                            'going on with the next checkpoint', self.ledger.eval_name, step,
                            path, problem)
            return self.ledger.append(step, path, ledger.DAMAGED, eval_files=self.eval_files,
                                      reason=problem)
        return self.record(step, path, metrics, eval_secs=round(time.time() - started, 2))

    def with_extra_metrics(self, metrics: Dict, path: str) -> Dict:
        """Estimator's metrics as JSON numbers, without its pictures, and the kind's own."""
        metrics = {key: run_files.json_value(value) for key, value in metrics.items()
                   if not isinstance(value, bytes)}  # pictures, already in TensorBoard
        if self.extra_metrics:
            metrics.update(self.extra_metrics(path))
        return metrics

    def record(self, step: int, path: str, metrics: Dict, **fields) -> Dict:
        """Appends a checkpoint's evaluation to the ledger, tells the tuners, then exports if
        the ledger says so."""
        entry = self.ledger.append(
            step, path, ledger.EVALUATED, eval_files=self.eval_files,
            export_dir=self.exports.export_dir if self.exports else None,  # for ./run.sh status
            **fields, metrics=dict(sorted(metrics.items())))
        logging.info('eval_%s: step %d: %s', self.ledger.eval_name, step, ', '.join(
            f'{key} {value:.4g}' if isinstance(value, float) else f'{key} {value}'
            for key, value in sorted(entry['metrics'].items()) if isinstance(value, (int, float))))
        if self.report:
            self.report(entry, self.ledger.dir)
        self.update_exports()
        return entry

    def _skip(self, step: int, path: str) -> Dict:
        logging.warning('eval_%s: skipped step %d: %s was deleted before it was evaluated '
                        '(raise --keep_checkpoint_max to keep checkpoints longer)',
                        self.ledger.eval_name, step, path)
        return self.ledger.append(step, path, ledger.SKIPPED, eval_files=self.eval_files,
                                  reason='deleted before evaluation')

    def update_exports(self) -> None:
        if self.exports is not None:
            self.exports.update(self.ledger.entries())


def continuous_eval(job: EvalJob, model_dir: str, train_steps: Optional[int],
                    timeout_secs: float) -> None:
    """Evaluates checkpoints as they appear until the final one, or until none came for timeout_secs.

    train_steps: the trainer's --train_steps if known; None takes the trainer's word.
    """
    _wait_for_model_dir(model_dir, min(timeout_secs, MODEL_DIR_GRACE_SECS))
    with job.ledger.lock():
        job.start()
        last = job.ledger.last_step()
        if last >= 0:
            logging.info('eval_%s: resuming after step %d (%s)', job.ledger.eval_name, last,
                         job.ledger.path)
        listed = {}  # step -> path of every checkpoint seen, so one deleted later is logged
        waiting_since, said_waiting = time.time(), False
        while not _is_final(last, model_dir, train_steps):
            termination.check()  # a signal that a library swallowed mid-evaluation
            listed.update(checkpoints.list_checkpoints(model_dir))
            pending = sorted(step for step in listed if step > last)
            if pending:
                last = pending[0]
                path = listed.pop(last)
                logging.info('eval_%s: on checkpoint %s, %d waiting', job.ledger.eval_name, path,
                             len(pending) - 1)
                job.evaluate(last, path)
                waiting_since, said_waiting = time.time(), False
            elif not said_waiting:
                logging.info('eval_%s: waiting for %s', job.ledger.eval_name,
                             f'a checkpoint after step {last}' if last >= 0 else 'the first checkpoint')
                said_waiting = True
            elif time.time() - waiting_since > timeout_secs:
                if last < 0:
                    raise _no_checkpoint(model_dir, timeout_secs)
                logging.info('eval_%s: no new checkpoint in %d s (--eval_timeout_secs); '
                             'stopping after step %d', job.ledger.eval_name, timeout_secs, last)
                return
            else:
                time.sleep(POLL_SECS)
        logging.info('eval_%s: evaluated the final checkpoint (step %d); done',
                     job.ledger.eval_name, last)


def wait_for_training_run(model_dir: str, timeout_secs: float) -> None:
    """Waits until a trainer has written model_dir's flags.txt, or any checkpoint.

    An eval job started beside its trainer must read the model's flags.txt (which model,
    and how it sees its input) before it builds anything; the trainer writes it before
    its first checkpoint.
    """
    _wait_for_model_dir(model_dir, min(timeout_secs, MODEL_DIR_GRACE_SECS))
    deadline, said_waiting = time.time() + timeout_secs, False
    while (run_files.recorded_flags(model_dir) is None
           and not checkpoints.list_checkpoints(model_dir)):
        if not said_waiting:
            logging.info('waiting for a trainer to write %s or a checkpoint',
                         paths.join(model_dir, run_files.FLAGS_FILE))
            said_waiting = True
        if time.time() > deadline:
            raise _no_checkpoint(model_dir, timeout_secs)
        time.sleep(POLL_SECS)


def _no_checkpoint(model_dir: str, timeout_secs: float) -> EvalTimeout:
    return EvalTimeout(f'--model_dir={model_dir}: no checkpoint appeared in {timeout_secs} s '
                       '(--eval_timeout_secs); is a trainer writing there?')


def _wait_for_model_dir(model_dir: str, grace_secs: float) -> None:
    """A trainer started at the same time creates model_dir within seconds; a typo never does.

    Waits without creating it (the ledger would), then stops instead of polling for
    --eval_timeout_secs.
    """
    deadline = time.time() + grace_secs
    while not files.isdir(model_dir):
        if time.time() > deadline:
            raise UserError(f'--model_dir={model_dir}: no such folder (waited {grace_secs:.0f} s '
                            'for a trainer to create it); check the path')
        time.sleep(POLL_SECS)


def _is_final(step: int, model_dir: str, train_steps: Optional[int]) -> bool:
    """Whether step is the last checkpoint of the trainer, as it recorded when it finished.

    Not simply step >= --train_steps: a cluster's chief saves once more after that, and
    early stopping ends short of it. A record from an earlier, shorter run does not count.
    """
    finished = run_files.train_finished(model_dir)
    return bool(finished and step >= finished['step'] and
                (finished['early_stopped'] or train_steps is None
                 or finished['train_steps'] >= train_steps))


def evaluate_once(job: EvalJob, chosen: List[Tuple[int, str]]) -> List[Dict]:
    """Ledger entries of the chosen checkpoints, evaluating only those the ledger lacks."""
    entries = []
    with job.ledger.lock():
        job.start()
        for index, (step, path) in enumerate(chosen):
            termination.check()
            entry = job.ledger.find(step)
            if entry is None:
                logging.info('eval_%s: on checkpoint %s, %d waiting', job.ledger.eval_name, path,
                             len(chosen) - index - 1)
                entry = job.evaluate(step, path)
            else:
                logging.info('eval_%s: step %d is already in %s; not evaluated again',
                             job.ledger.eval_name, step, job.ledger.path)
            entries.append(entry)
    return entries

