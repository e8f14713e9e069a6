"""Exports chosen from an eval job's ledger: the best checkpoint by a metric, or the latest.

The choice is recomputed from the whole ledger every time, never from memory, so
a restarted eval job cannot export a model worse than one it exported before (as
tf.estimator's BestExporter can), and one killed between its ledger line and the
export makes the export when it starts again. Exports go to EXPORT_DIR/<step>/; a
pointer EXPORT_DIR/best (or EXPORT_DIR/latest), a relative symlink, is replaced
atomically; only the newest `keep` exports stay.
"""
import os
import shutil
from typing import Callable, Dict, List, Optional

from absl import logging

from trainer import checkpoints
from trainer.metric_goal import MetricGoal, evaluated_by_step

class LedgerExports:
    def __init__(self, export_dir: str, policy: str, goal: MetricGoal, keep: int,
                 export_fn: Callable[[str], str]):
        self.export_dir = export_dir
        self.policy = policy
        self.goal = goal  # which evaluation is best, for policy 'best'
        self.keep = keep
        self._export_fn = export_fn  # checkpoint path -> EXPORT_DIR/<its step>

    @property
    def pointer(self) -> str:
        return os.path.join(self.export_dir, self.policy)

    def chosen(self, entries: List[Dict]) -> Optional[Dict]:
        if self.policy == 'latest':
            evaluated = evaluated_by_step(entries)
            return evaluated[-1] if evaluated else None
        return self.goal.best(entries)

    def update(self, entries: List[Dict]) -> Optional[str]:
        """Makes EXPORT_DIR agree with the ledger; returns the chosen export's folder."""
        entry = self.chosen(entries)
        if entry is None:
            return None
        name = str(checkpoints.saved_step(entry['checkpoint'], entry['metrics']))
        target = os.path.join(self.export_dir, name)
        if not os.path.exists(target):
            if not checkpoints.exists(entry['checkpoint']):
                logging.warning('cannot export step %d: its checkpoint %s was deleted',
                                entry['step'], entry['checkpoint'])
                return None
            self._export_fn(entry['checkpoint'])
            logging.info('exported %s (%s) to %s', entry['checkpoint'], self._why(entry), target)
        self._point_to(name)
        self._remove_old_exports(keep_name=name)
        return target

    def _why(self, entry: Dict) -> str:
        if self.policy == 'latest':
            return 'latest'
        return f'best {self.goal.metric} {entry["metrics"][self.goal.metric]:.6g}'

    def _point_to(self, name: str) -> None:
        if os.path.islink(self.pointer) and os.readlink(self.pointer) == name:
            return
        temp = f'{self.pointer}.tmp-{os.getpid()}'
        if os.path.lexists(temp):
            os.remove(temp)
        os.symlink(name, temp)
        os.replace(temp, self.pointer)

    def _remove_old_exports(self, keep_name: str) -> None:
        if not self.keep:
            return
        steps = sorted(int(name) for name in os.listdir(self.export_dir) if name.isdigit())
        for step in steps[:-self.keep]:
            if str(step) != keep_name:
                shutil.rmtree(os.path.join(self.export_dir, str(step)))
