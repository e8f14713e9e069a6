"""A prepared table's rows written to their splits' shards, each split's rows summarized into the
schema's statistics a chunk at a time: `prepare csv`'s and `prepare examples`' last step."""
from typing import Dict, Iterator, List, Optional, Tuple

from absl import logging

from common.errors import UserError
from input_fns.records import split as data_split
from input_fns.tables import example_batches

CHUNK_ROWS = 4096  # rows summarized at a time (numpy per column)


def shard_counts(num_shards: int, num_eval_shards: int, validation_fraction: float,
                 only_split: Optional[str] = None) -> Dict[str, int]:
    """{split: its shards}: train (and validation, when rows are held out), or only_split's."""
    if only_split:
        return {only_split: num_shards if only_split == 'train' else num_eval_shards}
    return {'train': num_shards, **({'validation': num_eval_shards} if validation_fraction else {})}


def write_table(writers: Dict, rows: Iterator[Tuple[bytes, List, bytes]], stats, label: str,
                validation_fraction: float, what: str, only_split: Optional[str] = None):
    """Writes rows ((split key, typed values, serialized record)) to the train and validation
    splits' writers ({split: stream_shards.SplitWriter}; every row to only_split, when given),
    every split's rows into stats (which keep statistics of one, and the label's classes of all);
    rows without a label are skipped and counted.
    Returns {split: rows skipped}; the shards are written when they are published."""
    skipped = {split: 0 for split in writers}
    chunks = {split: [] for split in writers}
    for count, (key, values, record) in enumerate(rows, 1):
        split = only_split or ('validation' if data_split.is_validation(
            key, validation_fraction) else 'train')
        if values[stats.label_index] is None:
            skipped[split] += 1
            continue
        writers[split].write(record)
        chunks[split].append(values)
        if len(chunks[split]) == CHUNK_ROWS:
            stats.add_rows(chunks[split], split)
            chunks[split] = []
        if count % 1_000_000 == 0:
            logging.info('%s: %d rows read', what, count)
    for split, chunk in chunks.items():
        stats.add_rows(chunk, split)
    _check_splits(writers, stats, label, what, only_split)
    return skipped


def _check_splits(writers: Dict, stats, label: str, what: str, only_split: Optional[str]) -> None:
    """What write_table and write_batches refuse, or warn of, once every row is taken."""
    counted = only_split or 'train'
    if stats.classes:
        stats.classes.refuse_untrained(counted, what)
        stats.classes.warn_unlearnable(counted)
    if not writers[counted].written:
        raise UserError(f'{what}: no {counted} rows (rows with a {label!r} value'
                        + ('' if only_split else ', outside --validation_fraction')
                        + '); give data with rows')


class _Chunks:
    """A split's rows of typed columns, handed to the statistics CHUNK_ROWS at a time (the
    chunks write_table hands them, so the statistics come out the same); of a split the
    statistics are not of, only the label's (its classes are all they count there)."""

    def __init__(self, stats, split: str):
        self.stats, self.split = stats, split
        self._only = None if split == stats.statistics_of else stats.label_index
        self._pending: List[List[example_batches.TypedColumn]] = []
        self._rows = 0

    def add(self, columns: List[Optional[example_batches.TypedColumn]]) -> None:
        """A batch's rows of the split (its columns taken; of a split the statistics are not
        of, the label's alone is read)."""
        if self._only is not None and columns:
            columns = [columns[self._only]]
        self._pending.append(columns)
        self._rows += len(columns[0].present) if columns else 0
        if self._rows < CHUNK_ROWS:
            return
        columns = [example_batches.TypedColumn.concat(list(parts)) for parts in zip(*self._pending)]
        start = 0
        while self._rows - start >= CHUNK_ROWS:
            self._hand_on([column.rows(start, start + CHUNK_ROWS) for column in columns])
            start += CHUNK_ROWS
        self._pending = ([[column.rows(start, self._rows) for column in columns]]
                         if self._rows > start else [])
        self._rows -= start

    def flush(self) -> None:
        if not self._pending:  # as write_table's last chunk of a split, an empty one
            self.stats.add_rows([], self.split)
            return
        self._hand_on([example_batches.TypedColumn.concat(list(parts))
                       for parts in zip(*self._pending)])

    def _hand_on(self, chunk: List[example_batches.TypedColumn]) -> None:
        present = [column.present_values() for column in chunk]
        missing = [int((~column.present).sum()) for column in chunk]
        if self._only is not None:
            width = len(self.stats.columns)
            present = [present[0] if index == self._only else [] for index in range(width)]
            missing = [missing[0] if index == self._only else 0 for index in range(width)]
        self.stats.add_columns(present, missing, self.split)


def write_batches(writers: Dict, batches: Iterator[Dict], stats, label: str, what: str,
                  only_split: Optional[str] = None):
    """write_table of rows a batch at a time: each batch's rows of each split
    (batch_work.SplitRows: typed columns, records, their shuffle keys, rows skipped), the
    records and statistics taken whole. Returns {split: rows skipped}."""
    skipped = {split: 0 for split in writers}
    chunks, count = {split: _Chunks(stats, split) for split in writers}, 0
    for splits in batches:
        rows = 0
        for split, taken in splits.items():
            skipped[split] += taken.skipped
            writers[split].write_many(taken.data, taken.lengths, taken.keys)
            chunks[split].add(taken.columns)
            rows += len(taken.lengths) + taken.skipped
        if count // 1_000_000 != (count + rows) // 1_000_000:
            logging.info('%s: %d rows read', what, count + rows)
        count += rows
    for chunk in chunks.values():
        chunk.flush()
    _check_splits(writers, stats, label, what, only_split)
    return skipped
