"""Every prepare's shards: a split's records taken as a stream, put in a seeded random order over
the whole split in bounded memory (input_fns/records/record_shuffle.py), cut into its shards in turn
and listed in manifest.json (with the schema), by one protocol:

- Nothing in output_dir changes until every record has been taken without error: a bad row found
  midway (or a kill) leaves the data prepared before as it was.
- Then, on a local disk, the shards are written under temporary names (NAME.tmp-HOST-PID,
  common/atomic_writes.py's Temporary), and the manifest forgets the splits, the shards are renamed
  into place and the manifest lists them, in one section a signal does not cut short.
- In a bucket an object is written in place (no atomic rename): the manifest forgets the splits
  before their shards are written and lists them after, so a kill leaves them unlisted.

write_split takes records made by index (digits, faces) the same way; prepare images writes its
splits as its worker processes hand the records back, straight into streamed_splits.
"""
import contextlib
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from common import atomic_writes, files, paths, progress, termination
from input_fns.records import python_workers, record_shuffle, shards, shuffle_buckets


class SplitWriter:
    """One split: write(record) takes its records, write_shards() writes them shuffled."""

    def __init__(self, output_dir: str, split: str, num_shards: int, seed: int,
                 suffix: str = shards.SHARD_SUFFIX, open_writer: Callable = tf.io.TFRecordWriter,
                 share: float = 1.0, hold: bool = True):
        """share: of the shuffle's memory budget, this split's; hold: RecordShuffler's."""
        self.output_dir, self.split, self.suffix = output_dir, split, suffix
        self.names = [shards.shard_name(split, index, num_shards, suffix)
                      for index in range(num_shards)]
        self.final_paths = [paths.join(output_dir, name) for name in self.names]
        self.temporaries = [atomic_writes.Temporary(path) for path in self.final_paths]
        self.counts: List[int] = []
        self._begun = 0  # shards whose writing began (workers' may all have)
        self.records = record_shuffle.RecordShuffler(seed, record_shuffle.temp_root(output_dir),
                                                     share, hold)
        self._open_writer = open_writer

    @property
    def written(self) -> int:
        return self.records.count

    def write(self, record: bytes) -> None:
        self.records.add(record)

    def write_many(self, data, lengths: np.ndarray, keys: Optional[np.ndarray] = None) -> None:
        """Records one after another in data, of these lengths (keys: their shuffle keys,
        record_shuffle.record_keys', where a worker process made them)."""
        self.records.add_many(data, lengths, keys)

    def write_shards(self, pool: Optional[python_workers.WorkerPool] = None) -> None:
        """The records in the seed's order, cut into the shards in turn (as evenly as counts
        go); by pool's worker processes (python_workers.run_task's), a shard each, where the
        records went to buckets that each fit the budget and the shards are TFRecords."""
        bounds = np.linspace(0, self.written, len(self.names) + 1).astype(int)
        buckets = (self.records.bucket_counts() if pool is not None
                   and self._open_writer is tf.io.TFRecordWriter else None)
        if buckets is not None:
            self._write_in_workers(pool, buckets, bounds)
            return
        # A big split's buckets take a while to read back: the time left, as for its reading.
        written = progress.ProgressLog(f'{self.split}: writing the shards,', self.written, 'records')
        chunks, chunk = self.records.shuffled(), []
        for index, (name, temporary) in enumerate(zip(self.names, self.temporaries)):
            self.counts.append(int(bounds[index + 1] - bounds[index]))
            self._begun += 1
            with self._open_writer(temporary.path) as writer:
                left = self.counts[-1]
                while left:
                    chunk = chunk or next(chunks)
                    for record in chunk[:left]:
                        writer.write(record)
                    written.advance(min(left, len(chunk)))
                    left, chunk = max(0, left - len(chunk)), chunk[left:]
            logging.info('%s: wrote %s (%d records, shard %d/%d)', self.split, name,
                         self.counts[-1], index + 1, len(self.names))
        self.records.close()

    def _write_in_workers(self, pool: python_workers.WorkerPool, buckets: List[Tuple[str, int]],
                          bounds: np.ndarray) -> None:
        """write_shards' shards written by the pool: each the records of its ranks of the
        buckets' key order; a bucket removed once the shards that take its records are written."""
        ends = np.cumsum([count for _, count in buckets]).tolist()
        tasks = []
        for index, temporary in enumerate(self.temporaries):
            first, last = int(bounds[index]), int(bounds[index + 1])
            parts = [(path, max(first, end - count) - (end - count), min(last, end) - (end - count))
                     for (path, count), end in zip(buckets, ends)
                     if end - count < last and end > first]
            tasks.append((write_shard, temporary.path, parts))
        removed, self._begun = 0, len(tasks)
        for index, _ in enumerate(pool.map_items(tasks)):
            self.counts.append(int(bounds[index + 1] - bounds[index]))
            logging.info('%s: wrote %s (%d records, shard %d/%d)', self.split, self.names[index],
                         self.counts[-1], index + 1, len(self.names))
            while removed < len(buckets) and ends[removed] <= bounds[index + 1]:
                shuffle_buckets.remove_bucket(buckets[removed][0])
                removed += 1
        self.records.close()

    def remove_temporaries(self) -> None:
        """The buckets, and what of the shards was written (in a bucket: the objects themselves)."""
        self.records.close()
        for temporary in self.temporaries[:self._begun]:
            temporary.discard()

    def put_in_place(self) -> List[Dict]:
        """Renames the shards into place; their manifest entries ({file, records, bytes})."""
        for temporary in self.temporaries:
            temporary.put_in_place()
        shards.remove_stale_shards(self.output_dir, self.split, self.names, self.suffix)
        # The input check compares sizes with these: a shard cut short is caught before reading.
        return [{'file': name, 'records': count, 'bytes': files.size(path)}
                for name, count, path in zip(self.names, self.counts, self.final_paths)]


def write_shard(path: str, parts: List[Tuple[str, int, int]]) -> None:
    """A shard of records from buckets, in a worker process: each part (a bucket file, the
    first and last of its records in key order to take) in turn."""
    with tf.io.TFRecordWriter(path) as writer:
        for bucket, first, last in parts:
            for chunk in shuffle_buckets.bucket_in_key_order(bucket, first, last):
                for record in chunk:
                    writer.write(record)


@contextlib.contextmanager
def streamed_splits(output_dir: str, shard_counts: Dict[str, int], seed: int,
                    suffix: str = shards.SHARD_SUFFIX,
                    open_writer: Callable = tf.io.TFRecordWriter, hold: bool = True):
    """{split: SplitWriter} to write records into, then publish() inside; on an error or a
    signal every temporary (buckets, shards not in place) is removed. hold: False where
    worker processes will write the shards (RecordShuffler's)."""
    if min(shard_counts.values()) < 1:
        raise ValueError(f'shard counts must be >= 1, got {shard_counts}')
    files.makedirs(output_dir)
    atomic_writes.remove_abandoned_temporaries(output_dir)
    # The splits share the shuffle's budget: a prepare's memory is the budget, however many.
    writers = {split: SplitWriter(output_dir, split, count, seed, suffix, open_writer,
                                  1 / len(shard_counts), hold)
               for split, count in shard_counts.items()}
    try:
        yield writers
    except BaseException:
        for writer in writers.values():
            writer.remove_temporaries()
        raise
    finally:
        for writer in writers.values():
            writer.records.close()


def _forget_splits(output_dir: str, splits) -> Dict:
    """The manifest, written without these splits (their shards are about to be replaced)."""
    manifest = shards.read_manifest(output_dir)
    for split in splits:
        manifest.setdefault('splits', {}).pop(split, None)
    shards.write_manifest(output_dir, manifest)
    return manifest


def publish(output_dir: str, writers: Dict[str, SplitWriter], entries: Dict[str, Dict],
            dataset: str, schema: Optional[Dict] = None,
            pool: Optional[python_workers.WorkerPool] = None) -> Dict[str, Dict]:
    """Writes the splits' shards, puts them in place and lists them (with the schema, when
    given and the splits take it: shards.takes_schema) in manifest.json.

    entries: {split: shards.split_entry's arguments but the shards}; pool: worker processes
    that write the shards (SplitWriter.write_shards).
    """
    if paths.is_bucket(output_dir):
        _forget_splits(output_dir, writers)
    for writer in writers.values():
        writer.write_shards(pool)
    with termination.finish_first(f'putting the shards in place under {output_dir}'):
        manifest = _forget_splits(output_dir, writers)
        for split, writer in writers.items():
            entries[split] = shards.split_entry(writer.put_in_place(), **entries[split])
        manifest['dataset'] = dataset
        if schema is not None and shards.takes_schema(manifest, writers):
            manifest['schema'] = schema
        manifest['splits'].update(entries)
        shards.write_manifest(output_dir, manifest)
    for split, entry in entries.items():
        logging.info('%s: %d records in %d shards under %s', split, entry['num_records'],
                     len(entry['shards']), output_dir)
    return entries


def write_split(output_dir: str, split: str, num_records: int,
                make_record: Callable[[int], Optional[bytes]], num_shards: int, seed: int,
                dataset: str, features: Dict[str, str], sources: List[str],
                extra: Optional[Dict] = None, suffix: str = shards.SHARD_SUFFIX,
                open_writer: Callable = tf.io.TFRecordWriter) -> Dict:
    """Writes records 0..num_records-1, in the seed's order, into num_shards files.

    make_record(i) returns a serialized tf.train.Example, or None to skip record i
    (counted in the manifest as skipped). Returns the split's manifest entry.
    Other formats: open_writer(path) gives a context manager with write(bytes) (for
    CSV, a file opened 'wb', records being lines), and suffix ends the file names.
    """
    made, skipped = progress.ProgressLog(f'{split}:', num_records, 'records'), 0
    with streamed_splits(output_dir, {split: num_shards}, seed, suffix, open_writer) as writers:
        for index in range(num_records):
            record = make_record(index)
            made.advance()
            if record is None:
                skipped += 1
            else:
                writers[split].write(record)
        entry = dict(skipped=skipped, features=features, sources=sources, seed=seed, extra=extra)
        entry = publish(output_dir, writers, {split: entry}, dataset)[split]
    logging.info('%s: made and written in %.1fs', split, time.time() - made.start_time)
    return entry
