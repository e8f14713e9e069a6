"""A pool of worker processes that runs a plain-Python per-example function, in chunks.

No TensorFlow here: this module is all a worker needs, so workers stay light
(input_fns.records.parallel_python puts the pool behind a tf.data dataset). Workers are
started with 'forkserver' (or 'spawn'), never 'fork': forking a process in which
TensorFlow already runs threads can deadlock the child.
"""
import collections
import concurrent.futures
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import pickle
import signal
import sys
import threading
import traceback
import warnings
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Iterable, Iterator, List, Sequence, Tuple

import numpy as np

from common.errors import RunFailure

START_METHODS = ('forkserver', 'spawn')
# How often a wait for a result checks that every worker still runs.
WATCH_SECS = 1.0

# Workers forked from the fork server run the main module again, already imported there by
# name (see _context); the fork server imports this module too, so its workers inherit this.
warnings.filterwarnings('ignore', message=r".*found in sys.modules after import of package",
                        category=RuntimeWarning)

# (numpy dtype, shape) of each flattened output of the function, per example.
FlatSpecs = Sequence[Tuple[np.dtype, Tuple[int, ...]]]


class WorkerError(RuntimeError):
    """The user's function raised (or returned something unusable) on one example."""


class WorkerDied(RunFailure):
    """A worker process ended mid-task: killed, or by the kernel when memory ran out."""


def flatten(value) -> List:
    """tf.nest's order without TensorFlow: dict values by sorted key, tuples and lists in order."""
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in flatten(value[key])]
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in flatten(item)]
    return [value]


# ------------------------------------------------------------------ in the worker

_worker_fn = None


def _init_worker(fn):
    global _worker_fn
    _worker_fn = fn
    # Ctrl-C reaches the whole process group: the parent stops us (close()), with no traceback
    # of ours over its one line.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, daemon=True).start()


def _exit_with_parent():
    """A parent killed outright (SIGKILL, OOM) cannot shut us down, so we watch it."""
    parent = multiprocessing.parent_process()
    if parent is not None:
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(1)


def _to_array(value, dtype, shape, position):
    array = np.asarray(value, dtype=dtype)
    if array.shape != shape:
        raise ValueError(f'output {position} has shape {array.shape}, expected {shape}')
    return array


def run_chunk(first_index: int, items: Sequence, flat_specs: FlatSpecs):
    """Runs the function on items; returns ('ok', stacked outputs) or ('error', index, message)."""
    columns = [[] for _ in flat_specs]
    for offset, item in enumerate(items):
        try:
            outputs = flatten(_worker_fn(item))
            if len(outputs) != len(flat_specs):
                raise ValueError(f'returned {len(outputs)} values, expected {len(flat_specs)}')
            for position, (value, (dtype, shape)) in enumerate(zip(outputs, flat_specs)):
                columns[position].append(_to_array(value, dtype, shape, position))
        except Exception as e:  # reported with its example index, never lost in the pool
            return ('error', first_index + offset,
                    f'{type(e).__name__}: {e}'.splitlines()[0], traceback.format_exc())
    return ('ok', [np.stack(column) for column in columns])


def run_task(task: tuple):
    """A pool's function whose items are tasks: a picklable function, then its arguments."""
    function, *args = task
    return function(*args)


def run_item(index: int, item):
    """The function's whole result of one item (any picklable value), as run_chunk reports."""
    try:
        return ('ok', _worker_fn(item))
    except Exception as e:  # pylint: disable=broad-except
        return ('error', index, f'{type(e).__name__}: {e}'.splitlines()[0], traceback.format_exc())


# ------------------------------------------------------------------ in the parent


def check_picklable(fn: Callable) -> None:
    try:
        pickle.dumps(fn)
    except Exception as e:
        raise ValueError(f'{getattr(fn, "__qualname__", fn)!r} cannot be sent to worker '
                         f'processes ({e}); use a function defined at module level') from None


def _context(start_method: str, fn: Callable, preload: Sequence[str] = ()):
    if start_method not in START_METHODS:
        raise ValueError(f'start_method must be one of {START_METHODS}, got {start_method!r}')
    context = multiprocessing.get_context(start_method)
    if start_method == 'forkserver':
        # Each worker imports the main module and fn's module; importing them once in
        # the fork server (before it starts forking) makes starting a worker cheap.
        # By name: Python 3.11's own '__main__' preload never takes effect, and a
        # script run by path (not with -m) is imported again by every worker.
        main_name = getattr(getattr(sys.modules['__main__'], '__spec__', None), 'name', None)
        modules = [main_name, fn.__module__, __name__, *preload]
        context.set_forkserver_preload(
            [m for m in modules if m and not m.endswith('__main__')])
        _start_fork_server()
    return context


def start_fork_server(fn: Callable, preload: Sequence[str] = ()) -> None:
    """The fork server a WorkerPool of fn (and preload) forks its workers from, started now,
    importing their modules while the caller does other work first."""
    _context('forkserver', fn, preload)


def _start_fork_server():
    """Python 3.11's fork server is sent our sys.path but ignores it, so modules found through
    it (tests/, a user's folder) would fail to preload, silently; PYTHONPATH gets it there."""
    saved = os.environ.get('PYTHONPATH')
    os.environ['PYTHONPATH'] = os.pathsep.join(path for path in sys.path if path)
    try:
        multiprocessing.forkserver.ensure_running()  # a no-op once it runs
    finally:
        if saved is None:
            del os.environ['PYTHONPATH']
        else:
            os.environ['PYTHONPATH'] = saved


def _chunks(items: Iterable, chunk_size: int) -> Iterator[Tuple[int, List]]:
    chunk, first = [], 0
    for index, item in enumerate(items):
        if not chunk:
            first = index
        chunk.append(item)
        if len(chunk) == chunk_size:
            yield first, chunk
            chunk = []
    if chunk:
        yield first, chunk


class WorkerPool:
    """fn(item) for every item, in num_workers processes, chunk_size items per task."""

    def __init__(self, fn: Callable, flat_specs: FlatSpecs, num_workers: int,
                 start_method: str = 'forkserver', preload: Sequence[str] = (),
                 name: str = ''):
        """preload: modules the items' functions are in (run_task's), imported once for all
        the workers. name: what the workers do, for the messages (fn's name by default)."""
        self.flat_specs = [(np.dtype(dtype), tuple(shape)) for dtype, shape in flat_specs]
        self.name = name or getattr(fn, '__qualname__', repr(fn))
        self.num_workers = num_workers
        self._executor = concurrent.futures.ProcessPoolExecutor(
            num_workers, mp_context=_context(start_method, fn, preload), initializer=_init_worker,
            initargs=(fn,))

    def map_chunks(self, items: Iterable, chunk_size: int, ordered: bool) -> Iterator[List]:
        """Yields each chunk's stacked outputs: in input order if ordered, else as they finish.

        At most two chunks per worker are in flight, so an endless input is fine.
        """
        return self._map(((run_chunk, first, chunk, self.flat_specs)
                          for first, chunk in _chunks(items, chunk_size)), ordered)

    def map_items(self, items: Iterable) -> Iterator:
        """Yields fn(item) of each item, whole (any picklable value), in input order; an item a
        task, at most two per worker in flight (map_chunks' bound)."""
        return self._map(((run_item, index, item) for index, item in enumerate(items)), True)

    def _map(self, tasks: Iterable[tuple], ordered: bool) -> Iterator:
        pending = collections.deque()
        max_in_flight = 2 * self.num_workers
        for task in tasks:
            try:
                pending.append(self._executor.submit(*task))
            except BrokenProcessPool:  # one died since the last result was taken
                raise self._died() from None
            while len(pending) >= max_in_flight:
                yield self._result(self._next_done(pending, ordered))
        while pending:
            yield self._result(self._next_done(pending, ordered))

    @staticmethod
    def _next_done(pending, ordered):
        if ordered:
            return pending.popleft()
        done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
        future = next(iter(done))
        pending.remove(future)
        return future

    def _result(self, future) -> List:
        while True:
            try:
                result = future.result(timeout=WATCH_SECS)
                break
            except concurrent.futures.TimeoutError:
                if any(worker.exitcode is not None for worker in self._workers()):
                    self._unblock_the_executor()
            except BrokenProcessPool:
                raise self._died() from None
        if result[0] == 'error':
            _, index, message, worker_traceback = result
            raise WorkerError(f'{self.name} failed on example {index}: {message}\n'
                              f'worker traceback:\n{worker_traceback}')
        return result[1]

    def _workers(self) -> List[multiprocessing.Process]:
        return list(self._executor._processes.values())

    def _unblock_the_executor(self) -> None:
        """A worker killed while it sent a result leaves the executor's manager thread reading
        the rest of that message for ever (CPython 3.11 notices a dead worker only between
        messages): the other workers are ended and this process's end of the result pipe closed,
        so that the read fails and the executor breaks, failing every future."""
        for worker in self._workers():
            worker.kill()
        self._executor._result_queue._writer.close()

    def _died(self) -> WorkerDied:
        return WorkerDied(f'a worker process ({self.name}) died: killed, or out of memory; '
                          'run the same command again')

    def close(self) -> None:
        """Cancels chunks not started, waits for running ones, and ends the workers."""
        self._executor.shutdown(wait=True, cancel_futures=True)
