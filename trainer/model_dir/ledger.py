"""An eval job's ledger: MODEL_DIR/eval_NAME/results/step-000012000.json, one JSON object per checkpoint.

An object is written whole (a bucket has no append), and only once its evaluation is
complete, so an eval job killed mid-evaluation leaves nothing for that checkpoint and
evaluates it again on restart; evaluating a checkpoint twice only rewrites the same
answer. Eval jobs under one name share its checkpoints through claims
(trainer/evaluation/claims.py), each holding the name's lock shared on a local disk;
train_and_evaluate on one machine, which evaluates without claims, holds it alone.
"""
import contextlib
import os
import re
import time
from typing import Dict, List, Optional

import tensorflow as tf

from common import files, paths, process_lock
from common.errors import UserError

RESULTS_DIR = 'results'
RESULT_NAME = re.compile(r'^step-(\d{9,})\.json$')
LOCK_NAME = '.lock'
EVALUATED = 'evaluated'
SKIPPED = 'skipped'
DAMAGED = 'damaged'  # its files could not be read: recorded so that later checkpoints go on


def eval_dir(model_dir: str, eval_name: str) -> str:
    """Where Estimator.evaluate(name=eval_name) writes its TensorBoard events, and the ledger."""
    return paths.join(model_dir, f'eval_{eval_name}')


def result_name(step: int) -> str:
    return f'step-{step:09d}.json'


def eval_names(model_dir: str) -> List[str]:
    """The names of the eval jobs that have a ledger in model_dir."""
    if not files.isdir(model_dir):
        return []
    return sorted(name[len('eval_'):] for name in files.listdir(model_dir)
                  if name.startswith('eval_')
                  and files.isdir(paths.join(model_dir, name, RESULTS_DIR)))


class Ledger:
    def __init__(self, model_dir: str, eval_name: str):
        self.model_dir = model_dir
        self.dir = eval_dir(model_dir, eval_name)
        self.path = paths.join(self.dir, RESULTS_DIR)
        self.eval_name = eval_name
        self._read = {}  # file name -> entry: a result, once written, is never changed

    def entries(self) -> List[Dict]:
        """Every result, oldest step first."""
        names = [name for name in files.listdir(self.path) if RESULT_NAME.match(name)]
        for name in names:
            if name not in self._read:
                path = paths.join(self.path, name)
                try:
                    self._read[name] = files.read_json(path)
                except (ValueError, UnicodeDecodeError):
                    raise UserError(f'{path}: not a JSON object; delete it to evaluate that '
                                    'checkpoint again')
                except tf.errors.NotFoundError:  # deleted since listed
                    continue
        return sorted((self._read[name] for name in names if name in self._read),
                      key=lambda entry: entry['step'])

    def last_step(self) -> int:
        return max((entry['step'] for entry in self.entries()), default=-1)

    def find(self, step: int) -> Optional[Dict]:
        return next((entry for entry in self.entries() if entry['step'] == step), None)

    def append(self, step: int, checkpoint: str, status: str, **fields) -> Dict:
        """Records a checkpoint's result as one whole object (again: the same answer replaced)."""
        entry = {'step': step, 'checkpoint': checkpoint, 'status': status,
                 'time': time.strftime('%Y-%m-%dT%H:%M:%S%z'), **fields}
        files.write_json_atomic(paths.join(self.path, result_name(step)), entry)
        self._read[result_name(step)] = entry
        return entry

    def lock(self, shared: bool = False):
        """The name's lock on a local disk, shared by eval jobs that claim checkpoints or held
        alone; in a bucket, nothing (see the module's docstring)."""
        if not paths.is_local(self.dir):
            return contextlib.nullcontext()
        return EvalLock(os.path.join(paths.local_path(self.dir), LOCK_NAME), self.eval_name,
                        shared)


class EvalLock:
    """A lock on an eval name, exclusive or shared; the OS drops it when the process dies, even
    by kill -9."""

    def __init__(self, path: str, eval_name: str, shared: bool = False):
        self._path = path
        self._eval_name = eval_name
        self._shared = shared
        self._file = None

    def __enter__(self):
        self._file, holder = process_lock.try_lock(self._path, f'pid {os.getpid()}\n',
                                                   self._shared)
        if self._file is None:
            # Shared holders write nothing: an empty file means eval jobs hold it.
            raise UserError(f'--eval_name={self._eval_name}: '
                            f'{holder or "an eval job (continuous_eval or evaluate)"} is '
                            f'evaluating under this name ({self._path}); wait for it, or use '
                            'another --eval_name')
        return self

    def __exit__(self, *exc):
        if not self._shared:
            self._file.truncate(0)  # the next shared holders leave it empty
        self._file.close()  # closing drops the flock
