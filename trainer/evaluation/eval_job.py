"""Eval jobs: every checkpoint of a model_dir evaluated exactly once, oldest first, into a ledger.

continuous_eval watches the model_dir while a trainer in another process (or a
cluster) writes checkpoints, like the loop over checkpoints in tensorflow/tpu's
resnet_main.py, but it lists every checkpoint file instead of waiting for the
latest, which skips those saved during an evaluation. evaluate_once serves a
scheduler: the latest checkpoint, all of them, or one step. Both skip what the
ledger already has and export as the ledger says (trainer/evaluation/export_policy.py).
Several jobs under one name share the checkpoints: each claims a step before evaluating it
(trainer/evaluation/claims.py), and writes its ledger entry through that claim.
SIGTERM or Ctrl-C abandons the checkpoint in hand without a ledger entry (common.termination)
and gives its claim up: the same command, or another job, evaluates it again.
"""
import math
import time
from typing import Callable, Dict, List, Optional, Set, Tuple

import tensorflow as tf
from absl import logging

from common import files, store_retries, termination
from common.errors import UserError
from models.eval_pictures import PER_CLASS_ACCURACY
from trainer.evaluation import claims as step_claims, wait_for_trainer
from trainer.evaluation.export_policy import LedgerExports
from trainer.model_dir import checkpoint_fit, checkpoints, ledger
from trainer.model_dir.ledger import LedgerEntry


class EvalJob:
    def __init__(self, estimator: tf.estimator.Estimator, input_fn: Callable, eval_files: str,
                 eval_ledger: ledger.Ledger, exports: Optional[LedgerExports] = None,
                 extra_metrics: Optional[Callable[[str], Dict]] = None,
                 report: Optional[Callable[[LedgerEntry, str], None]] = None,
                 claims: Optional[step_claims.Claims] = None):
        self.estimator = estimator
        self.report = report  # (ledger entry, eval folder) -> None: tells tuners (observe/tuner_metrics)
        self.extra_metrics = extra_metrics  # checkpoint path -> more metrics (LFW's protocol)
        self.input_fn = input_fn
        self.eval_files = eval_files
        self.ledger = eval_ledger
        self.exports = exports
        self.claims = claims or step_claims.Claims(eval_ledger, eval_files)
        self.identity = step_claims.identity()  # in each ledger entry: who evaluated the step

    def start(self) -> None:
        """Checks the ledger holds results on the same data, and mends exports a kill left undone."""
        for entry in self.ledger.entries():
            if entry.eval_files != self.eval_files:
                raise UserError(f'--eval_name={self.ledger.eval_name}: {self.ledger.path} holds '
                                f'results on --eval_files={entry.eval_files}; give '
                                f'{self.eval_files} its own --eval_name')
        self.update_exports()

    def evaluate(self, step: int, path: str,
                 claim: Optional[step_claims.Claim] = None) -> Optional[LedgerEntry]:
        """Evaluates one checkpoint, writes its ledger entry (through claim, if it holds one),
        then exports if the ledger says so; None when the claim was lost meanwhile."""
        if checkpoints.deleted(path):
            return self._skip(step, path, claim)
        started = time.time()
        try:
            with checkpoint_fit.restoring(path):  # the check, and the kind's predictions, too
                metrics = self.estimator.evaluate(self.input_fn, checkpoint_path=path,
                                                  name=self.ledger.eval_name)
                metrics = self.with_extra_metrics(metrics, path)
        except (tf.errors.OpError, ValueError) as e:  # ValueError: 'not a valid checkpoint'
            if store_retries.is_transient(e):
                raise  # the store failing: resumed (trainer/run/store_failures), not judged here
            if checkpoints.deleted(path):
                return self._skip(step, path, claim)  # deleted by the trainer while restored
            problem = checkpoints.damage(path)
            if problem is None:
                raise
            logging.warning('eval_%s: step %d: %s cannot be read (%s); recorded as damaged, '
                            'going on with the next checkpoint', self.ledger.eval_name, step,
                            path, problem)
            return self._append(claim, step, path, ledger.DAMAGED, reason=problem)
        return self.record(step, path, metrics, claim, eval_secs=round(time.time() - started, 2))

    def _append(self, claim: Optional[step_claims.Claim], step: int, path: str, status: str,
                **fields) -> Optional[LedgerEntry]:
        """The ledger entry, written through the claim when there is one (None: it was lost)."""
        def write():
            return self.ledger.append(step, path, status, eval_files=self.eval_files,
                                      evaluated_by=self.identity, **fields)
        return claim.commit(write) if claim else write()

    def with_extra_metrics(self, metrics: Dict, path: str) -> Dict:
        """Estimator's metrics as JSON numbers, without its pictures or the accuracy of a class
        the evaluated data has no example of (NaN), and the kind's own."""
        absent = sorted(key for key, value in metrics.items()
                        if key.startswith(PER_CLASS_ACCURACY) and math.isnan(value))
        if absent:
            logging.info('eval_%s: %s: --eval_files=%s has no example of %s; %s left out',
                         self.ledger.eval_name, path, self.eval_files,
                         ', '.join(key[len(PER_CLASS_ACCURACY):] for key in absent),
                         ', '.join(absent))
        metrics = {key: files.json_value(value) for key, value in metrics.items()
                   if not isinstance(value, bytes)  # pictures, already in TensorBoard
                   and key not in absent}
        if self.extra_metrics:
            metrics.update(self.extra_metrics(path))
        return metrics

    def record(self, step: int, path: str, metrics: Dict,
               claim: Optional[step_claims.Claim] = None, **fields) -> Optional[LedgerEntry]:
        """Appends a checkpoint's evaluation to the ledger, tells the tuners, then exports if
        the ledger says so."""
        entry = self._append(
            claim, step, path, ledger.EVALUATED,
            export_dir=self.exports.export_dir if self.exports else None,  # for ./run.sh status
            **fields, metrics=dict(sorted(metrics.items())))
        if entry is None:
            return None
        logging.info('eval_%s: step %d: %s', self.ledger.eval_name, step, ', '.join(
            f'{key} {value:.4g}' if isinstance(value, float) else f'{key} {value}'
            for key, value in sorted(entry.metrics.items()) if isinstance(value, (int, float))))
        if self.report:
            self.report(entry, self.ledger.dir)
        self.update_exports()
        return entry

    def _skip(self, step: int, path: str,
              claim: Optional[step_claims.Claim]) -> Optional[LedgerEntry]:
        logging.warning('eval_%s: skipped step %d: %s was deleted before it was evaluated '
                        '(raise --keep_checkpoint_max to keep checkpoints longer)',
                        self.ledger.eval_name, step, path)
        return self._append(claim, step, path, ledger.SKIPPED, reason='deleted before evaluation')

    def update_exports(self) -> None:
        if self.exports is not None:
            with self.claims.exporting():
                entries = self.ledger.entries()
                # Steps another job is still evaluating: choose only among the steps before
                # them, so that a later step finished first is not exported as "best".
                unfinished = self.claims.claimed_steps() - {e.step for e in entries}
                cut = min(unfinished, default=None)
                self.exports.update([e for e in entries if cut is None or e.step < cut])


def continuous_eval(job: EvalJob, model_dir: str, train_steps: Optional[int],
                    timeout_secs: float) -> None:
    """Evaluates checkpoints as they appear until the final one, or until none came for timeout_secs.

    Jobs under one name share the work: each evaluates the oldest step that neither has a
    ledger entry nor another live job's claim, and all stop once the ledger has every
    checkpoint up to the final one. train_steps: the trainer's --train_steps if known; None
    takes the trainer's word.
    """
    wait_for_trainer.wait_for_model_dir(model_dir, timeout_secs)
    name = job.ledger.eval_name
    with job.ledger.lock(shared=True):
        job.start()
        done = recorded_steps(job)
        if done:
            logging.info('eval_%s: resuming after step %d (%s)', name, max(done), job.ledger.path)
        listed = {}  # step -> path of every checkpoint seen, so one deleted later is logged
        waiting_since, said = time.time(), None
        while True:
            termination.check()  # a signal that a library swallowed mid-evaluation
            listed.update(checkpoints.list_checkpoints(model_dir))
            done = recorded_steps(job)
            pending = sorted(step for step in listed if step not in done)
            if not pending and wait_for_trainer.is_final(max(done, default=-1), model_dir, train_steps):
                break
            if _evaluate_first_unclaimed(job, pending, listed):
                waiting_since, said = time.time(), None
                continue
            if pending:  # all claimed by live jobs: they are at work, this one is not idle
                waiting_since = time.time()
                said = _say_once(said, f'eval_{name}: waiting for ' + '; '.join(
                    f'step {step} ({step_claims.describe(job.claims.holders.get(step))})'
                    for step in pending))
            elif said is None:
                said = _say_once(said, f'eval_{name}: waiting for ' + (
                    f'a checkpoint after step {max(done)}' if done else 'the first checkpoint'))
            elif time.time() - waiting_since > timeout_secs:
                if not done:
                    raise wait_for_trainer.no_checkpoint(model_dir, timeout_secs)
                logging.info('eval_%s: no new checkpoint in %d s (--eval_timeout_secs); '
                             'stopping after step %d', name, timeout_secs, max(done))
                return
            time.sleep(checkpoints.POLL_SECS)
        logging.info('eval_%s: evaluated the final checkpoint (step %d); done', name, max(done))


def recorded_steps(job: EvalJob) -> Set[int]:
    return {entry.step for entry in job.ledger.entries()}


def _say_once(said: Optional[str], line: str) -> str:
    if line != said:
        logging.info('%s', line)
    return line


def _evaluate_first_unclaimed(job: EvalJob, pending: List[int], listed: Dict[int, str]) -> bool:
    """Claims the oldest pending step no live job holds and evaluates it; False if none."""
    for index, step in enumerate(pending):
        claim = job.claims.try_claim(step)
        if claim is not None:
            with claim:
                logging.info('eval_%s: on checkpoint %s, %d waiting', job.ledger.eval_name,
                             listed[step], len(pending) - index - 1)
                job.evaluate(step, listed[step], claim)
            return True
    return False


def evaluate_once(job: EvalJob, chosen: List[Tuple[int, str]]) -> List[LedgerEntry]:
    """Ledger entries of the chosen checkpoints, evaluating only those the ledger lacks."""
    entries = []
    with job.ledger.lock(shared=True):
        job.start()
        for index, (step, path) in enumerate(chosen):
            termination.check()
            entry = job.ledger.find(step)
            if entry is None:
                logging.info('eval_%s: on checkpoint %s, %d waiting', job.ledger.eval_name, path,
                             len(chosen) - index - 1)
                entry = _evaluate_when_claimed(job, step, path)
            else:
                logging.info('eval_%s: step %d is already in %s; not evaluated again',
                             job.ledger.eval_name, step, job.ledger.path)
            entries.append(entry)
    return entries


def _evaluate_when_claimed(job: EvalJob, step: int, path: str) -> LedgerEntry:
    """The step's entry: evaluated here once claimed, or written by the live job that holds
    its claim (if that job dies, its claim goes stale and this one takes the step)."""
    said = None
    while True:
        entry = job.ledger.find(step)
        if entry is not None:
            return entry
        claim = job.claims.try_claim(step)
        if claim is not None:
            with claim:
                entry = job.evaluate(step, path, claim)
            if entry is not None:
                return entry
            continue
        said = _say_once(said, f'eval_{job.ledger.eval_name}: step {step} is being evaluated '
                         f'by {step_claims.describe(job.claims.holders.get(step))}; waiting')
        termination.check()
        time.sleep(checkpoints.POLL_SECS)
