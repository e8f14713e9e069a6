"""An eval job's ledger, MODEL_DIR/eval_NAME/results.jsonl: one JSON line per checkpoint.

A line is appended only once its evaluation is complete (write, flush, fsync), so
an eval job killed mid-evaluation leaves no line and evaluates that checkpoint
again on restart. A torn last line (killed mid-write) is ignored when reading
and cut off before the next append. Every process that evaluates under a name
holds that name's lock, so two of them never evaluate a checkpoint twice.
"""
import fcntl
import json
import os
import time
from typing import Dict, List, Optional

from common.errors import UserError

LEDGER_NAME = 'results.jsonl'
LOCK_NAME = '.lock'
EVALUATED = 'evaluated'
SKIPPED = 'skipped'
DAMAGED = 'damaged'  # its files could not be read: recorded so that later checkpoints go on


def eval_dir(model_dir: str, eval_name: str) -> str:
    """Where Estimator.evaluate(name=eval_name) writes its TensorBoard events, and the ledger."""
    return os.path.join(model_dir, f'eval_{eval_name}')


class Ledger:
    def __init__(self, model_dir: str, eval_name: str):
        self.dir = eval_dir(model_dir, eval_name)
        self.path = os.path.join(self.dir, LEDGER_NAME)
        self.eval_name = eval_name

    def entries(self) -> List[Dict]:
        """The complete lines, oldest first; a torn last line is left out."""
        return [entry for entry, _ in self._read()]

    def _read(self):
        """(entry, end offset) per complete line."""
        if not os.path.exists(self.path):
            return []
        with open(self.path, 'rb') as f:
            data = f.read()
        rows, offset = [], 0
        lines = data.split(b'\n')
        for number, line in enumerate(lines, 1):
            end = offset + len(line) + 1
            if number == len(lines):  # after the last newline: empty, or torn by a kill mid-write
                break
            try:
                rows.append((json.loads(line), end))
            except ValueError:
                raise UserError(f'{self.path}:{number}: not a JSON line; fix or delete that line')
            offset = end
        return rows

    def last_step(self) -> int:
        return max((entry['step'] for entry in self.entries()), default=-1)

    def find(self, step: int) -> Optional[Dict]:
        return next((entry for entry in self.entries() if entry['step'] == step), None)

    def append(self, step: int, checkpoint: str, status: str, **fields) -> Dict:
        entry = {'step': step, 'checkpoint': checkpoint, 'status': status,
                 'time': time.strftime('%Y-%m-%dT%H:%M:%S%z'), **fields}
        rows = self._read()
        complete = rows[-1][1] if rows else 0
        os.makedirs(self.dir, exist_ok=True)
        with open(self.path, 'ab') as f:
            if f.tell() > complete:  # a torn line from a killed writer
                f.truncate(complete)
            f.write(json.dumps(entry, sort_keys=True).encode() + b'\n')
            f.flush()
            os.fsync(f.fileno())
        return entry

    def lock(self) -> 'EvalLock':
        return EvalLock(os.path.join(self.dir, LOCK_NAME), self.eval_name)


class EvalLock:
    """An exclusive lock on an eval name; the OS drops it when the process dies, even by kill -9."""

    def __init__(self, path: str, eval_name: str):
        self._path = path
        self._eval_name = eval_name
        self._file = None

    def __enter__(self):
        os.makedirs(os.path.dirname(self._path), exist_ok=True)
        self._file = open(self._path, 'a+')
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.seek(0)
            holder = self._file.read().strip() or 'another process'
            self._file.close()
            raise UserError(f'--eval_name={self._eval_name}: {holder} is evaluating under this '
                            f'name ({self._path}); wait for it, or use another --eval_name')
        self._file.seek(0)
        self._file.truncate()
        self._file.write(f'pid {os.getpid()}\n')
        self._file.flush()
        return self

    def __exit__(self, *exc):
        fcntl.flock(self._file, fcntl.LOCK_UN)
        self._file.close()
