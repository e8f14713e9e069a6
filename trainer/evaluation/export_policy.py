"""Exports chosen from an eval job's ledger: the best checkpoint by a metric, or the latest.

The choice is recomputed from the whole ledger every time, never from memory, so
a restarted eval job cannot export a model worse than one it exported before (as
tf.estimator's BestExporter can), and one killed between its ledger line and the
export makes the export when it starts again. Exports go to EXPORT_DIR/<step>/
(complete once marked: trainer/serving/export.py); the pointer EXPORT_DIR/best (or
EXPORT_DIR/latest) is a small file naming the step (a bucket has no symlinks), replaced
whole; only the newest `keep` complete exports stay.
"""
from typing import Callable, Dict, List, Optional, Set

from absl import logging

from common import files, paths
from trainer.model_dir import checkpoints
from trainer.model_dir.ledger import LedgerEntry
from trainer.model_dir.metric_goal import MetricGoal, evaluated_by_step
from trainer.serving import export, model_config

POLICIES = export.POINTERS  # each also names the pointer to the chosen export


def listed_exports(export_dir: str) -> Dict:
    """{'steps': the complete exports' steps, oldest first, 'pointers': {'best' or 'latest': step},
    'served': the version models.config pins for TF Serving, or None}."""
    if not files.isdir(export_dir):
        return {'steps': [], 'pointers': {}, 'served': None}
    pointers = {name: export.read_pointer(export_dir, name) for name in POLICIES}
    return {'steps': export.complete_versions(export_dir),
            'pointers': {name: step for name, step in pointers.items() if step is not None},
            'served': model_config.pinned_version(export_dir)}


class LedgerExports:
    def __init__(self, export_dir: str, policy: str, goal: MetricGoal, keep: int,
                 export_fn: Callable[[str], str], model_name: str):
        self.export_dir = export_dir
        self.policy = policy
        self.goal = goal  # which evaluation is best, for policy 'best'
        self.keep = keep
        self._export_fn = export_fn  # checkpoint path -> EXPORT_DIR/<its step>
        self.model_name = model_name  # TF Serving's name for it (models.config)

    def chosen(self, entries: List[LedgerEntry]) -> Optional[LedgerEntry]:
        if self.policy == 'latest':
            evaluated = evaluated_by_step(entries)
            return evaluated[-1] if evaluated else None
        return self.goal.best(entries)

    def update(self, entries: List[LedgerEntry]) -> Optional[str]:
        """Makes EXPORT_DIR agree with the ledger; returns the chosen export's folder."""
        entry = self.chosen(entries)
        if entry is None:
            return None
        step = checkpoints.saved_step(entry.checkpoint, entry.metrics)
        target = paths.join(self.export_dir, str(step))
        if not export.is_complete(target):
            if not checkpoints.exists(entry.checkpoint):
                logging.warning('cannot export step %d: its checkpoint %s was deleted',
                                entry.step, entry.checkpoint)
                return None
            self._export_fn(entry.checkpoint)
            logging.info('exported %s (%s) to %s', entry.checkpoint, self._why(entry), target)
        export.write_pointer(self.export_dir, self.policy, step)
        keep_steps = {step}
        if self.policy == 'best':
            # Kept until TF Serving has read the new config (it polls): it may still serve it.
            keep_steps.add(model_config.pinned_version(self.export_dir))
            if model_config.write(self.export_dir, self.model_name, step):
                logging.info('%s pins version %d for TF Serving: tensorflow_model_server '
                             '--model_config_file=%s --model_config_file_poll_wait_seconds=60',
                             model_config.config_path(self.export_dir), step,
                             model_config.config_path(self.export_dir))
        self._remove_old_exports(keep_steps)
        return target

    def _why(self, entry: LedgerEntry) -> str:
        if self.policy == 'latest':
            return 'latest'
        return f'best {self.goal.metric} {entry.metrics[self.goal.metric]:.6g}'

    def _remove_old_exports(self, keep_steps: Set[Optional[int]]) -> None:
        if not self.keep:
            return
        steps = export.complete_versions(self.export_dir)
        for step in steps[:-self.keep]:
            if step not in keep_steps:
                export.remove_version(paths.join(self.export_dir, str(step)))
