"""`prepare csv`'s work on a batch of rows once Arrow has split its fields, on both cores: the
fields typed (column_typing.ColumnTyping), the rows split into train and validation, each split's
rows encoded as Examples (example_batches) and keyed for the shuffle
(record_shuffle.record_keys), in worker processes (input_fns/records/python_workers.py), while
the process reading the file takes their results, in the batches' order, into the statistics and
the shuffle (table_splits.write_batches). The shuffle orders records by their keys, so the shards
are the same bytes whoever encoded them; a small source is worked in the one process.

A batch whose fields only the rows path reads (or refuses) comes back untyped: the reading
process reads it by the rows path, which raises its one-line error naming the row."""
import collections
import contextlib
import dataclasses
from typing import Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from common import files
from common.errors import UserError
from input_fns.records import (parallel_python, python_workers, record_shuffle, split as data_split,
                               stream_shards)
from input_fns.tables import column_typing, example_batches

_PRELOAD = [__name__, stream_shards.__name__]  # the modules of the workers' tasks
# Below this much source a worker pool costs more (its start, the batches sent) than it saves.
WORKERS_FROM_BYTES = 64 << 20


@dataclasses.dataclass
class SplitRows:
    """A batch's rows of one split: their typed columns (for the statistics; of a split they
    are not of, the label's alone), their records one after another with each one's length and
    shuffle key; the rows skipped (no label)."""
    columns: List[Optional[example_batches.TypedColumn]]  # None: not the statistics
    data: bytes
    lengths: np.ndarray
    keys: np.ndarray
    skipped: int


class BatchWork:
    """A batch (column_typing.Fields to type, or a Batch the rows path typed) -> {split: SplitRows}
    of the splits written; None for Fields that need the rows path. Picklable: the function a
    worker process runs."""

    def __init__(self, typing: column_typing.ColumnTyping, encoder: example_batches.BatchEncoder,
                 label_index: int, validation_fraction: float, only_split: Optional[str],
                 splits: Sequence[str], seed: int, statistics_of: str):
        """statistics_of: the split the statistics are of (TableStats')."""
        self.typing, self.encoder, self.label_index = typing, encoder, label_index
        self.validation_fraction, self.only_split = validation_fraction, only_split
        self.splits, self.seed, self.statistics_of = list(splits), seed, statistics_of

    def __call__(self, piece: Union[column_typing.Fields, column_typing.Batch]
                 ) -> Optional[Dict[str, SplitRows]]:
        try:
            batch = (self.typing.typed(piece.columns) if isinstance(piece, column_typing.Fields)
                     else piece)
            return None if batch is None else self.split(batch)
        except UserError:  # the reading process works it again, and says why in one line
            return None

    def split(self, batch: column_typing.Batch) -> Dict[str, SplitRows]:
        labelled = batch.columns[self.label_index].present
        held_out = (np.zeros(len(batch), bool) if self.only_split else
                    data_split.validation_mask(batch.keys, self.validation_fraction))
        out = {}
        for split, rows in ([(self.only_split, ~held_out)] if self.only_split else
                            [('train', ~held_out), ('validation', held_out)]):
            if split not in self.splits:
                continue
            kept = np.flatnonzero(rows & labelled)
            columns = [column.take(kept) for column in batch.columns]
            data, lengths = self.encoder.encode_flat(columns)
            if split != self.statistics_of:  # the label's classes are all that is counted
                columns = [column if index == self.label_index else None
                           for index, column in enumerate(columns)]
            out[split] = SplitRows(columns, data, lengths,
                                   record_shuffle.record_keys(data, lengths, self.seed),
                                   int((rows & ~labelled).sum()))
        return out


def worker_count(paths: List[str]) -> int:
    """Worker processes for a source: one a core where there are two or more and the source is
    big enough to repay them; else none."""
    cores = parallel_python.default_num_workers()
    if cores < 2 or sum(files.size(path) for path in paths) < WORKERS_FROM_BYTES:
        return 0
    return cores


def start_early(workers: int) -> None:
    """Where `workers` will run, their fork server started now: it imports their modules while
    the table's first rows are read, and the pool's first batches wait less."""
    if workers:
        python_workers.start_fork_server(python_workers.run_task, _PRELOAD)


@contextlib.contextmanager
def worker_pool(workers: int) -> Iterator[Optional[python_workers.WorkerPool]]:
    """`workers` processes that run tasks (python_workers.run_task: a batch's work, a shard's
    writing); None where none. Closed on leaving, the tasks running finished first."""
    if not workers:
        yield None
        return
    pool = python_workers.WorkerPool(python_workers.run_task, [], workers, preload=_PRELOAD,
                                     name='typing, encoding and writing the rows')
    try:
        yield pool
    finally:
        pool.close()


def worked_batches(table, work: BatchWork, pool: Optional[python_workers.WorkerPool]
                   ) -> Iterator[Dict[str, SplitRows]]:
    """Each batch of the table (csv_tables.Table) worked, in order: by the pool's processes, or
    here where none."""
    pending = collections.deque()  # the batches out working, oldest first: for the rows path

    def pieces():
        for batches, piece in table.pieces():
            pending.append((batches, piece))
            yield piece

    for result in (pool.map_items((work, piece) for piece in pieces()) if pool
                   else map(work, pieces())):
        batches, piece = pending.popleft()
        if result is None:  # the rows path's reading, or its error
            result = work.split(batches.by_rows(piece) if isinstance(
                piece, column_typing.Fields) else piece)
        yield result
    table.warn_of_overflow()
