"""A split's records in a seeded random order over the whole split, in bounded memory: the
two-pass shuffle tensorflow_datasets uses (its core/shuffle.py).

Each record's key is a 64-bit hash of its bytes keyed by the seed, and the records come out in
the order of their keys: the same records and seed give the same order (byte-identical shards),
whatever order they came in and whatever the memory budget. Records are held in memory up to
MEMORY_BYTES; past that every record goes to one of 2**TOP_BUCKET_BITS temporary bucket files
by the top bits of its key (a bucket is a range of keys), and each bucket is read back, sorted
and handed on in turn. A bucket over the budget (past 2**TOP_BUCKET_BITS times the budget of
data, or by chance) is first split by the next bits of its keys into as many buckets as its
size needs (up to 2**TOP_BUCKET_BITS a time), so the peak is one bucket of at most
MEMORY_BYTES whatever the data's size, and the bucket files' write buffers (FLUSH_BYTES each).

Where the buckets go: beside the output on a local disk (the disk chosen to hold the data set,
where /tmp may be small or in memory); in TMPDIR when the output is a bucket (gs://, s3://),
where sending every record there and back would triple the transfer of writing the shards:
such a user needs TMPDIR on a local disk with room for the split's records once. The folder
(.prepare-shuffle-ID.buckets-HOST-PID) is removed as the records are handed on, and on an error
or a signal; one a killed prepare (kill -9) left is removed by the next prepare that spills to
that disk, by the rule every temporary follows (common/files.py's is_abandoned).
"""
import array
import hashlib
import itertools
import os
import secrets
import tempfile
from typing import Iterator, List, Optional

import numpy as np
from absl import logging

from common import file_trees, files, paths

MEMORY_BYTES = 256 << 20  # the records one bucket holds in memory, and their index
TOP_BUCKET_BITS = 6  # 64 bucket files when the records outgrow memory
# A record held costs its bytes and its index: key (8) and length (4), then as sorted: key and
# length as NumPy arrays (12), its offset (8) and its place in the order (8).
INDEX_BYTES_PER_RECORD = 40
FLUSH_BYTES = 1 << 16  # a bucket file is written 64 KiB at a time
KEY_BITS = 64
INDEX_DTYPE = np.dtype([('key', '<u8'), ('length', '<u4')])
READ_ENTRIES = 4096  # index entries read at a time when a bucket is split
FOLDER_PREFIX = '.prepare-shuffle-'
WRITER_MARK = '.buckets-'  # then HOST-PID: whose buckets they are (files.is_abandoned)


def temp_root(output_dir: str) -> str:
    """Where a prepare writing to output_dir puts its buckets (the module's docstring says why)."""
    return output_dir if paths.is_local(output_dir) else tempfile.gettempdir()


def remove_killed_shuffles(root: str) -> None:
    """Bucket folders a killed prepare left under root (their writer is gone)."""
    for folder in files.glob(paths.join(root, f'{FOLDER_PREFIX}*')):
        if files.is_abandoned(folder, WRITER_MARK):
            logging.info('removing %s, left by a killed prepare', folder)
            file_trees.remove_tree(folder)


class _HeldRecords:
    """Records and their keys in memory, as one buffer; sorted() hands them on by key."""

    def __init__(self):
        self.data, self.keys, self.lengths = bytearray(), array.array('Q'), array.array('I')

    def add(self, key: int, record: bytes) -> None:
        self.data += record
        self.keys.append(key)
        self.lengths.append(len(record))

    def add_many(self, keys: List[int], records: List[bytes]) -> None:
        self.data += b''.join(records)
        self.keys.extend(keys)
        self.lengths.extend(map(len, records))

    def held_bytes(self) -> int:
        return len(self.data) + INDEX_BYTES_PER_RECORD * len(self.keys)

    def sorted(self) -> Iterator[bytes]:
        return _in_key_order(self.data, np.frombuffer(self.keys, np.uint64),
                             np.frombuffer(self.lengths, np.uint32))


def _in_key_order(data, keys: np.ndarray, lengths: np.ndarray) -> Iterator[bytes]:
    ends = np.cumsum(lengths, dtype=np.int64)
    starts = ends - lengths
    # Stable: records with equal keys (the same bytes) keep their order.
    for index in np.argsort(keys, kind='stable'):
        yield bytes(data[starts[index]:ends[index]])


class _BucketFiles:
    """2**bits bucket files under folder, by the `bits` key bits below the first `shift`:
    NAME.records (the records, one after another) and NAME.index (INDEX_DTYPE entries)."""

    def __init__(self, folder: str, name: str, shift: int, bits: int):
        self.shift, self.bits = shift, bits
        self.names = [paths.join(folder, f'{name}{index:0{(bits + 3) // 4}x}')
                      for index in range(1 << bits)]
        self._pending = [(bytearray(), bytearray()) for _ in self.names]
        self._files = [(files.open_file(f'{path}.records', 'wb'),
                        files.open_file(f'{path}.index', 'wb')) for path in self.names]

    def add(self, key: int, record: bytes) -> None:
        index = (key >> (KEY_BITS - self.shift - self.bits)) & ((1 << self.bits) - 1)
        data, entries = self._pending[index]
        data += record
        entries += key.to_bytes(8, 'little') + len(record).to_bytes(4, 'little')
        if len(data) + len(entries) >= FLUSH_BYTES:
            self._flush(index)

    def _flush(self, index: int) -> None:
        for pending, file in zip(self._pending[index], self._files[index]):
            file.write(bytes(pending))
            pending.clear()

    def close(self) -> None:
        for index, pair in enumerate(self._files):
            self._flush(index)
            for file in pair:
                file.close()
        self._files = []


def _records_in_file_order(path: str) -> Iterator[tuple]:
    """A bucket's (key, record)s as they were written, a record at a time."""
    with files.open_file(f'{path}.index', 'rb') as index_file, \
            files.open_file(f'{path}.records', 'rb') as data_file:
        while True:
            entries = np.frombuffer(index_file.read(INDEX_DTYPE.itemsize * READ_ENTRIES),
                                    INDEX_DTYPE)
            if not len(entries):
                return
            for key, length in zip(entries['key'].tolist(), entries['length'].tolist()):
                yield key, data_file.read(length)


class RecordShuffler:
    """add(record) every record, then shuffled() hands them all on in the seed's order; close()
    (or leaving a `with`) removes the temporary buckets, whether they were read or not."""

    def __init__(self, seed: int, root: str):
        self._hash_key = str(seed).encode()
        self.root, self.folder = root, None
        self.count = 0
        self._held: Optional[_HeldRecords] = _HeldRecords()
        self._buckets: Optional[_BucketFiles] = None
        self.buckets_read = 0  # bucket files read back, and the most memory one took
        self.largest_bucket_bytes = 0

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
        if self._held.held_bytes() > MEMORY_BYTES:
            self._spill()

    def add_many(self, records: List[bytes]) -> None:
        """add() of each record; held, all of them before the budget is checked."""
        keys = [self.key(record) for record in records]
        self.count += len(records)
        if self._buckets is not None:
            for key, record in zip(keys, records):
                self._buckets.add(key, record)
            return
        self._held.add_many(keys, records)
        if self._held.held_bytes() > MEMORY_BYTES:
            self._spill()

    def _spill(self) -> None:
        """Past the budget: every record held, and every one after, to a bucket file."""
        remove_killed_shuffles(self.root)
        self.folder = paths.join(self.root, f'{FOLDER_PREFIX}{secrets.token_hex(4)}{WRITER_MARK}'
                                            f'{files.writer_tag()}')
        files.makedirs(self.folder)
        logging.info('shuffling the records in %d buckets under %s (more than %d MiB)',
                     1 << TOP_BUCKET_BITS, self.folder, MEMORY_BYTES >> 20)
        self._buckets = _BucketFiles(self.folder, 'bucket-', 0, TOP_BUCKET_BITS)
        held, self._held = self._held, None
        starts = itertools.accumulate(held.lengths, initial=0)
        for key, start, length in zip(held.keys, starts, held.lengths):
            self._buckets.add(key, bytes(held.data[start:start + length]))

    def shuffled(self) -> Iterator[bytes]:
        """Every record added, in the order of their keys."""
        if self._buckets is None:
            self.largest_bucket_bytes = self._held.held_bytes()
            yield from self._held.sorted()
            return
        self._buckets.close()
        for path in self._buckets.names:
            yield from self._bucket_in_order(path, TOP_BUCKET_BITS)
        self.close()

    def _bucket_in_order(self, path: str, bits_used: int) -> Iterator[bytes]:
        """One bucket's records by key: read whole when it fits the budget, else split first."""
        data_path, index_path = f'{path}.records', f'{path}.index'
        needs = files.size(data_path) + (files.size(index_path) // INDEX_DTYPE.itemsize
                                         * INDEX_BYTES_PER_RECORD)
        if needs > MEMORY_BYTES and bits_used < KEY_BITS:
            yield from self._split_in_order(path, bits_used, needs)
        elif needs > MEMORY_BYTES:  # every key the same: equal records, in any order
            yield from (record for _, record in _records_in_file_order(path))
        else:
            entries = np.frombuffer(files.read_bytes(index_path), INDEX_DTYPE)
            self.buckets_read += 1
            self.largest_bucket_bytes = max(self.largest_bucket_bytes, needs)
            yield from _in_key_order(files.read_bytes(data_path), entries['key'],
                                     entries['length'])
        files.remove(data_path)
        files.remove(index_path)

    def _split_in_order(self, path: str, bits_used: int, needs: int) -> Iterator[bytes]:
        """A bucket over the budget, split by its next key bits into buckets that fit."""
        bits = min(KEY_BITS - bits_used, TOP_BUCKET_BITS,
                   int(np.ceil(np.log2(2 * needs / MEMORY_BYTES))))
        parts = _BucketFiles(self.folder, f'{os.path.basename(path)}-', bits_used, bits)
        for key, record in _records_in_file_order(path):
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
