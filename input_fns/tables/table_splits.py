"""A prepared table's rows written to their splits' shards, each split's rows summarized into the
schema's statistics a chunk at a time: `prepare csv`'s and `prepare examples`' last step."""
from typing import Dict, Iterator, List, Optional, Tuple

from absl import logging

from common.errors import UserError
from input_fns.records import split as data_split

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
    chunks, counted = {split: [] for split in writers}, only_split or 'train'
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
    if stats.classes:
        stats.classes.refuse_untrained(counted, what)
        stats.classes.warn_unlearnable(counted)
    if not writers[counted].written:
        raise UserError(f'{what}: no {counted} rows (rows with a {label!r} value'
                        + ('' if only_split else ', outside --validation_fraction')
                        + '); give data with rows')
    return skipped
