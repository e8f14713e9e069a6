"""Where the shuffle's records wait (input_fns/records/record_shuffle.py): held in memory as one
buffer and its index, or in bucket files on disk, each a range of keys; and how they come back,
in the order of their keys.

Records come in and go out a batch at a time (NumPy over a batch's keys and lengths): a record
at a time, the Python around each cost more than a table row's parse.
"""
import array
from typing import Iterator, List, Optional

import numpy as np
import pyarrow as pa

from common import files, paths

# A record held costs its bytes and its index: key (8) and length (4), then as sorted: key and
# length as NumPy arrays (12), its offset (8) and its place in the order (8).
INDEX_BYTES_PER_RECORD = 40
FLUSH_BYTES = 1 << 16  # a bucket file is written 64 KiB at a time
KEY_BITS = 64
INDEX_DTYPE = np.dtype([('key', '<u8'), ('length', '<u4')])
READ_ENTRIES = 4096  # index entries read at a time when a bucket is split
OUT_RECORDS = 4096  # records handed on at a time, in key order


def starts_of(lengths: np.ndarray) -> np.ndarray:
    """Each record's offset in a buffer of records one after another."""
    lengths = lengths.astype(np.int64)
    return np.cumsum(lengths) - lengths


def as_array(data, lengths: np.ndarray) -> pa.Array:
    """The records data holds one after another, of these lengths, as an Arrow binary array
    (no copy): its take() gathers them a record at a time, not an index a byte."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(lengths), [
        None, pa.py_buffer(offsets), pa.py_buffer(data)])


def data_of(records: pa.Array) -> pa.Buffer:
    """A gathered array's records one after another (from its first)."""
    offsets = np.frombuffer(records.buffers()[1], np.int64)[records.offset:]
    return records.buffers()[2][offsets[0]:offsets[len(records)]]


class HeldRecords:
    """Records and their keys in memory, as one buffer; sorted() hands them on by key."""

    def __init__(self):
        self.data, self.keys, self.lengths = bytearray(), array.array('Q'), array.array('I')

    def add(self, key: int, record: bytes) -> None:
        self.data += record
        self.keys.append(key)
        self.lengths.append(len(record))

    def add_many(self, keys: np.ndarray, data, lengths: np.ndarray) -> None:
        """Records data holds one after another, of these lengths and keys."""
        self.data += data
        self.keys.frombytes(keys.astype(np.uint64).tobytes())
        self.lengths.frombytes(lengths.astype(np.uint32).tobytes())

    def __len__(self) -> int:
        return len(self.keys)

    def held_bytes(self) -> int:
        return len(self.data) + INDEX_BYTES_PER_RECORD * len(self.keys)

    def arrays(self):
        """(keys, lengths) of every record held, in the order they came (views)."""
        return np.frombuffer(self.keys, np.uint64), np.frombuffer(self.lengths, np.uint32)

    def sorted(self) -> Iterator[List[bytes]]:
        keys, lengths = self.arrays()
        return in_key_order(self.data, keys, lengths)


def in_key_order(data, keys: np.ndarray, lengths: np.ndarray, first: int = 0,
                 last: Optional[int] = None) -> Iterator[List[bytes]]:
    """The records, OUT_RECORDS at a time, by key (those from the first-th to the last-th)."""
    # Stable: records with equal keys (the same bytes) keep their order.
    order = np.argsort(keys, kind='stable')[first:last]
    records = as_array(data, lengths)
    for at in range(0, len(order), OUT_RECORDS):
        yield records.take(pa.array(order[at:at + OUT_RECORDS])).to_pylist()


class BucketFiles:
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

    def add_many(self, keys: np.ndarray, data, lengths: np.ndarray) -> None:
        """Records data holds one after another, of these lengths and keys: each batch's
        records of a bucket gathered at once, then appended to its buffer."""
        shift = np.uint64(KEY_BITS - self.shift - self.bits)
        buckets = ((keys.astype(np.uint64) >> shift) & np.uint64((1 << self.bits) - 1))
        order = np.argsort(buckets, kind='stable')
        sorted_lengths = lengths.astype(np.int64)[order]
        records = data_of(as_array(data, lengths).take(pa.array(order)))
        entries = np.empty(len(order), INDEX_DTYPE)
        entries['key'], entries['length'] = keys[order], sorted_lengths
        entries = entries.tobytes()
        bounds = np.searchsorted(buckets[order], np.arange((1 << self.bits) + 1, dtype=np.uint64))
        byte_bounds = np.concatenate([[0], np.cumsum(sorted_lengths)])[bounds].tolist()
        bounds = bounds.tolist()
        for index in np.flatnonzero(np.diff(bounds)).tolist():
            pending_data, pending_entries = self._pending[index]
            pending_data += records[byte_bounds[index]:byte_bounds[index + 1]]
            pending_entries += entries[bounds[index] * INDEX_DTYPE.itemsize:
                                       bounds[index + 1] * INDEX_DTYPE.itemsize]
            if len(pending_data) + len(pending_entries) >= FLUSH_BYTES:
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


def bucket_in_key_order(path: str, first: int = 0, last: Optional[int] = None
                        ) -> Iterator[List[bytes]]:
    """A bucket's records by key (from the first-th to the last-th), read whole."""
    entries = np.frombuffer(files.read_bytes(f'{path}.index'), INDEX_DTYPE)
    return in_key_order(files.read_bytes(f'{path}.records'), entries['key'], entries['length'],
                        first, last)


def remove_bucket(path: str) -> None:
    files.remove(f'{path}.records')
    files.remove(f'{path}.index')


def records_in_file_order(path: str) -> Iterator[tuple]:
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
