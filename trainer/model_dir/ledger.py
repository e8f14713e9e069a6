"""An eval job's ledger: MODEL_DIR/eval_NAME/results/step-000012000.json, one JSON object per checkpoint.

An object is written whole (a bucket has no append), and only once its evaluation is
complete, so an eval job killed mid-evaluation leaves nothing for that checkpoint and
evaluates it again on restart; evaluating a checkpoint twice only rewrites the same
answer. Eval jobs under one name share its checkpoints through claims
(trainer/evaluation/claims.py), each holding the name's lock shared on a local disk;
train_and_evaluate on one machine, which evaluates without claims, holds it alone.
"""
import contextlib
import dataclasses
import os
import re
import time
from typing import Dict, List, Optional

import tensorflow as tf

from common import atomic_writes, files, paths, process_lock
from common.errors import UserError
from common.records import NUMBER, field

RESULTS_DIR = 'results'
RESULT_NAME = re.compile(r'^step-(\d{9,})\.json$')
LOCK_NAME = '.lock'
EVALUATED = 'evaluated'
SKIPPED = 'skipped'
DAMAGED = 'damaged'  # its files could not be read: recorded so that later checkpoints go on


@dataclasses.dataclass(frozen=True)
class Evaluator:
    """Who evaluated a step, as its ledger entry and status name it: host, pid, cluster task."""
    host: str
    pid: int
    task: str

    @classmethod
    def from_json(cls, record: Dict) -> 'Evaluator':
        return cls(host=field(record, 'host', str), pid=field(record, 'pid', int),
                   task=field(record, 'task', str))


@dataclasses.dataclass(frozen=True)
class LedgerEntry:
    """One checkpoint's result: EVALUATED with its metrics, or SKIPPED or DAMAGED with the reason.

    On disk, a field that is None is left out, except the export_dir of an evaluation (null
    when its eval job exported nothing), as entries have always been written."""
    step: int
    checkpoint: str
    status: str
    time: str
    eval_files: str  # the --eval_files it was evaluated on
    evaluated_by: Optional[Evaluator] = None  # None in ledgers older than claims
    metrics: Optional[Dict] = None  # an evaluation's, by name
    export_dir: Optional[str] = None  # where the eval job exported to, for status
    eval_secs: Optional[float] = None
    reason: Optional[str] = None  # why skipped or damaged

    @classmethod
    def from_json(cls, record: Dict) -> 'LedgerEntry':
        """Raises ValueError naming the field when record is not a ledger entry."""
        status = field(record, 'status', str)
        if status not in (EVALUATED, SKIPPED, DAMAGED):
            raise ValueError(f'"status" is {status!r}, not {EVALUATED}, {SKIPPED} or {DAMAGED}')
        evaluated_by = field(record, 'evaluated_by', dict, optional=True)
        return cls(step=field(record, 'step', int), checkpoint=field(record, 'checkpoint', str),
                   status=status, time=field(record, 'time', str),
                   eval_files=field(record, 'eval_files', str),
                   evaluated_by=evaluated_by and Evaluator.from_json(evaluated_by),
                   metrics=field(record, 'metrics', dict, optional=status != EVALUATED),
                   export_dir=field(record, 'export_dir', str, optional=True),
                   eval_secs=field(record, 'eval_secs', NUMBER, optional=True),
                   reason=field(record, 'reason', str, optional=True))

    def to_json(self) -> Dict:
        record = {name: value for name, value in dataclasses.asdict(self).items()
                  if value is not None}
        if self.status == EVALUATED:
            record.setdefault('export_dir', None)
        return record


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

    def entries(self) -> List[LedgerEntry]:
        """Every result, oldest step first."""
        names = [name for name in files.listdir(self.path) if RESULT_NAME.match(name)]
        for name in names:
            if name not in self._read:
                path = paths.join(self.path, name)
                try:
                    record = files.read_json(path)
                except (ValueError, UnicodeDecodeError):
                    raise UserError(f'{path}: not a JSON object; delete it to evaluate that '
                                    'checkpoint again')
                except tf.errors.NotFoundError:  # deleted since listed
                    continue
                try:
                    self._read[name] = LedgerEntry.from_json(record)
                except ValueError as e:
                    raise UserError(f'{path}: not a ledger entry ({e}); delete it to evaluate '
                                    'that checkpoint again')
        return sorted((self._read[name] for name in names if name in self._read),
                      key=lambda entry: entry.step)

    def last_step(self) -> int:
        return max((entry.step for entry in self.entries()), default=-1)

    def find(self, step: int) -> Optional[LedgerEntry]:
        return next((entry for entry in self.entries() if entry.step == step), None)

    def append(self, step: int, checkpoint: str, status: str, **fields) -> LedgerEntry:
        """Records a checkpoint's result as one whole object (again: the same answer replaced);
        fields: LedgerEntry's."""
        entry = LedgerEntry(step=step, checkpoint=checkpoint, status=status,
                            time=time.strftime('%Y-%m-%dT%H:%M:%S%z'), **fields)
        atomic_writes.write_json_atomic(paths.join(self.path, result_name(step)), entry.to_json())
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
