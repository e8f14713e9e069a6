"""A split's records in a seeded random order over the whole split, in bounded memory: the
two-pass shuffle tensorflow_datasets uses (its core/shuffle.py).

Each record's key is a 64-bit hash of its bytes keyed by the seed, and the records come out
in the order of their keys: the same records and seed give the same order (byte-identical
shards), whatever order they came in and whatever the memory budget. Records are held in memory
up to MEMORY_BYTES (shared by the splits one prepare writes: each its share; none where worker
processes write the shards from the buckets); past that every record goes to one of
2**TOP_BUCKET_BITS temporary bucket files by the top bits of its key (a bucket is a range of
keys), and each bucket is read back, sorted and handed on in turn. A bucket over the budget
(past 2**TOP_BUCKET_BITS times the budget of data, or by chance) is first split by the next
bits of its keys into as many buckets as its size needs (up to 2**TOP_BUCKET_BITS a time), so
the peak is one bucket of at most the budget whatever the data's size, and the bucket files'
write buffers (FLUSH_BYTES each).

Where the buckets go: beside the output on a local disk (the disk chosen to hold the data set,
where /tmp may be small or in memory); in TMPDIR when the output is a bucket (gs://, s3://),
where sending every record there and back would triple the transfer of writing the shards:
such a user needs TMPDIR on a local disk with room for the split's records once. The folder
(.prepare-shuffle-ID.buckets-HOST-PID) is removed as the records are handed on, and on an error
or a signal; one a killed prepare (kill -9) left is removed by the next prepare that spills to
that disk, by the rule every temporary follows (common/atomic_writes.py's is_abandoned).
"""
import hashlib
import os
import secrets
import tempfile
from typing import Iterator, List, Optional, Tuple

import numpy as np
from absl import logging

from common import atomic_writes, file_trees, files, paths
from input_fns.records.shuffle_buckets import (INDEX_BYTES_PER_RECORD, INDEX_DTYPE, KEY_BITS,
                                               BucketFiles, HeldRecords, bucket_in_key_order,
                                               records_in_file_order, remove_bucket, starts_of)

MEMORY_BYTES = 256 << 20  # the records a prepare's shuffles hold in memory, and their index
TOP_BUCKET_BITS = 6  # 64 bucket files when the records outgrow memory
SPILL_BYTES = 4 << 20  # records moved to the buckets at a time when they outgrow memory
FOLDER_PREFIX = '.prepare-shuffle-'
WRITER_MARK = '.buckets-'  # then HOST-PID: whose buckets they are (atomic_writes.is_abandoned)


def temp_root(output_dir: str) -> str:
    """Where a prepare writing to output_dir puts its buckets (the module's docstring says why)."""
    return output_dir if paths.is_local(output_dir) else tempfile.gettempdir()


def remove_killed_shuffles(root: str) -> None:
    """Bucket folders a killed prepare left under root (their writer is gone)."""
    for folder in files.glob(paths.join(root, f'{FOLDER_PREFIX}*')):
        if atomic_writes.is_abandoned(folder, WRITER_MARK):
            logging.info('removing %s, left by a killed prepare', folder)
            file_trees.remove_tree(folder)


def hash_key(seed: int) -> bytes:
    """What a seed's record keys are hashed with."""
    return str(seed).encode()


def record_keys(data, lengths: np.ndarray, seed: int) -> np.ndarray:
    """RecordShuffler.key() of each record data holds one after another, of these lengths."""
    view, key = memoryview(data), hash_key(seed)
    digests = b''.join([hashlib.blake2b(view[start:start + length], digest_size=8,
                                        key=key).digest()
                        for start, length in zip(starts_of(lengths).tolist(), lengths.tolist())])
    return np.frombuffer(digests, '>u8').astype(np.uint64)


class RecordShuffler:
    """add(record) every record, then shuffled() hands them all on in the seed's order; close()
    (or leaving a `with`) removes the temporary buckets, whether they were read or not."""

    def __init__(self, seed: int, root: str, share: float = 1.0, hold: bool = True):
        """share: of MEMORY_BYTES, this shuffle's (a prepare's splits share it); hold: False
        sends the records to the buckets from the first (a prepare whose worker processes
        write the shards from them, and which so holds none)."""
        self.seed, self.share, self.hold = seed, share, hold
        self._hash_key = hash_key(seed)  # key() runs once a record
        self.root, self.folder = root, None
        self.count = 0
        self._held: Optional[HeldRecords] = HeldRecords()
        self._buckets: Optional[BucketFiles] = None
        self.buckets_read = 0  # bucket files read back, and the most memory one took
        self.largest_bucket_bytes = 0

    @property
    def budget(self) -> int:
        """The bytes of records (and their index) this shuffle holds in memory at most."""
        return int(MEMORY_BYTES * self.share)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def key(self, record: bytes) -> int:
        digest = hashlib.blake2b(record, digest_size=8, key=self._hash_key).digest()
        return int.from_bytes(digest, 'big')

    def add(self, record: bytes) -> None:
        key = self.key(record)
        self.count += 1
        if self._buckets is not None:
            self._buckets.add(key, record)
            return
        self._held.add(key, record)
        if not self.hold or self._held.held_bytes() > self.budget:
            self._spill()

    def add_many(self, data, lengths: np.ndarray, keys: Optional[np.ndarray] = None) -> None:
        """Records data holds one after another, of these lengths (and record_keys' keys, where
        a worker process made them); held, all of them before the budget is checked."""
        keys = record_keys(data, lengths, self.seed) if keys is None else keys
        self.count += len(keys)
        if self._buckets is not None:
            self._buckets.add_many(keys, data, lengths)
            return
        self._held.add_many(keys, data, lengths)
        if not self.hold or self._held.held_bytes() > self.budget:
            self._spill()

    def _spill(self) -> None:
        """Past the budget: every record held, and every one after, to a bucket file."""
        remove_killed_shuffles(self.root)
        self.folder = paths.join(self.root, f'{FOLDER_PREFIX}{secrets.token_hex(4)}{WRITER_MARK}'
                                            f'{atomic_writes.writer_tag()}')
        files.makedirs(self.folder)
        logging.info('shuffling the records in %d buckets under %s (more than %d MiB)',
                     1 << TOP_BUCKET_BITS, self.folder, self.budget >> 20)
        self._buckets = BucketFiles(self.folder, 'bucket-', 0, TOP_BUCKET_BITS)
        held, self._held = self._held, None
        keys, lengths = held.arrays()
        starts, view = starts_of(lengths), memoryview(held.data)
        # SPILL_BYTES of records at a time: the gather's index is 8 bytes a record's byte.
        cuts = np.searchsorted(starts, np.arange(0, len(held.data), SPILL_BYTES))
        for first, last in zip(cuts.tolist(), cuts[1:].tolist() + [len(keys)]):
            begin = int(starts[first])
            end = int(starts[last]) if last < len(keys) else len(held.data)
            self._buckets.add_many(keys[first:last], view[begin:end], lengths[first:last])
        del keys, lengths, view
        held.data = None

    def shuffled(self) -> Iterator[List[bytes]]:
        """Every record added, in the order of their keys, in lists of up to
        shuffle_buckets.OUT_RECORDS."""
        if self._buckets is None:
            self.largest_bucket_bytes = self._held.held_bytes()
            yield from self._held.sorted()
            return
        self._buckets.close()
        for path in self._buckets.names:
            yield from self._bucket_in_order(path, TOP_BUCKET_BITS)
        self.close()

    def _bucket_in_order(self, path: str, bits_used: int) -> Iterator[List[bytes]]:
        """One bucket's records by key: read whole when it fits the budget, else split first."""
        needs = self._needs(path)
        if needs > self.budget and bits_used < KEY_BITS:
            yield from self._split_in_order(path, bits_used, needs)
        elif needs > self.budget:  # every key the same: equal records, in any order
            yield from ([record] for _, record in records_in_file_order(path))
        else:
            self.buckets_read += 1
            self.largest_bucket_bytes = max(self.largest_bucket_bytes, needs)
            yield from bucket_in_key_order(path)
        remove_bucket(path)

    @staticmethod
    def _needs(path: str) -> int:
        """The memory a bucket takes read back whole: its records and their index."""
        return files.size(f'{path}.records') + (files.size(f'{path}.index')
                                                // INDEX_DTYPE.itemsize * INDEX_BYTES_PER_RECORD)

    def bucket_counts(self) -> Optional[List[Tuple[str, int]]]:
        """Each bucket file and its count of records, in key order, where every record went to
        one and each fits the budget (read back whole, as shuffled() reads it); else None.
        Then bucket_in_key_order reads them, in any process (stream_shards' workers)."""
        if self._buckets is None:
            return None
        self._buckets.close()
        if any(self._needs(path) > self.budget for path in self._buckets.names):
            return None
        return [(path, files.size(f'{path}.index') // INDEX_DTYPE.itemsize)
                for path in self._buckets.names]

    def _split_in_order(self, path: str, bits_used: int, needs: int) -> Iterator[List[bytes]]:
        """A bucket over the budget, split by its next key bits into buckets that fit."""
        bits = min(KEY_BITS - bits_used, TOP_BUCKET_BITS,
                   int(np.ceil(np.log2(2 * needs / self.budget))))
        parts = BucketFiles(self.folder, f'{os.path.basename(path)}-', bits_used, bits)
        for key, record in records_in_file_order(path):
            parts.add(key, record)
        parts.close()
        for part in parts.names:
            yield from self._bucket_in_order(part, bits_used + bits)

    def close(self) -> None:
        """Removes the temporary buckets (none were written for records that fit in memory)."""
        if self._buckets is not None:
            self._buckets.close()
        if self.folder is not None:
            file_trees.remove_tree(self.folder)
            self.folder = None
