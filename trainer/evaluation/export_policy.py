"""Exports chosen from an eval job's ledger: the best checkpoint by a metric, or the latest.

The choice is recomputed from the whole ledger every time, never from memory, so
a restarted eval job cannot export a model worse than one it exported before (as
tf.estimator's BestExporter can), and one killed between its ledger line and the
export makes the export when it starts again. Exports go to EXPORT_DIR/<step>/
(complete once marked: trainer/serving/export.py); the pointer EXPORT_DIR/best (or
EXPORT_DIR/latest) is a small file naming the step (a bucket has no symlinks), replaced
whole; only the newest `keep` complete exports stay.
"""
from typing import Callable, Dict, List, Optional

from absl import logging

from common import files, paths
from trainer.evaluation.metric_goal import MetricGoal, evaluated_by_step
from trainer.run import checkpoints
from trainer.serving import export

POLICIES = ('best', 'latest')  # each also names the pointer to the chosen export

def listed_exports(export_dir: str) -> Dict:
    """{'steps': the complete exports' steps, oldest first, 'pointers': {'best' or 'latest': step}}."""
    if not files.isdir(export_dir):
        return {'steps': [], 'pointers': {}}
    pointers = {}
    for name in POLICIES:
        pointer = paths.join(export_dir, name)
        if files.exists(pointer) and files.read_text(pointer).strip().isdigit():
            pointers[name] = int(files.read_text(pointer).strip())
    return {'steps': export.complete_versions(export_dir), 'pointers': pointers}


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
        return paths.join(self.export_dir, self.policy)

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
        target = paths.join(self.export_dir, name)
        if not export.is_complete(target):
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
        if files.exists(self.pointer) and files.read_text(self.pointer).strip() == name:
            return
        files.write_text_atomic(self.pointer, name + '\n')

    def _remove_old_exports(self, keep_name: str) -> None:
        if not self.keep:
            return
        steps = export.complete_versions(self.export_dir)
        for step in steps[:-self.keep]:
            if str(step) != keep_name:
                export.remove_version(paths.join(self.export_dir, str(step)))
