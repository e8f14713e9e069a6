"""A batch of typed columns as serialized tf.train.Examples, whole columns at a time: the bytes
table_records.RowEncoder writes for each row (the same keys, fields and order), built with
numpy and Arrow's element-wise joins instead of Python per value (`prepare csv`'s fast path,
input_fns/tables/csv_batches.py). tests/test_csv_batches.py checks the two give equal bytes."""
import dataclasses
from typing import List, Optional, Tuple

import numpy as np
import pyarrow as pa

from input_fns.tables import table_records



@dataclasses.dataclass
class TypedColumn:
    """One column of a batch: present (False: missing); numbers (int64 or float64) for int and
    float columns, else texts; what a missing row holds there is not read."""
    present: np.ndarray
    numbers: Optional[np.ndarray] = None
    texts: Optional[pa.Array] = None

    def present_values(self):
        """The present values: numbers as a NumPy array, texts as a list of str."""
        if self.numbers is not None:
            return self.numbers[self.present]
        # One str a distinct value, gathered by its dictionary's indices: far fewer objects made.
        encoded = self.texts.filter(pa.array(self.present)).dictionary_encode()
        distinct = np.array(encoded.dictionary.to_pylist(), object)
        return distinct[encoded.indices.to_numpy(zero_copy_only=False)].tolist()

    def take(self, rows: np.ndarray) -> 'TypedColumn':
        """The column's values of these rows (indices)."""
        if self.numbers is not None:
            return TypedColumn(self.present[rows], numbers=self.numbers[rows])
        return TypedColumn(self.present[rows], texts=self.texts.take(pa.array(rows)))

    def rows(self, start: int, stop: int) -> 'TypedColumn':
        """The column's rows from start to stop (views, not copies)."""
        if self.numbers is not None:
            return TypedColumn(self.present[start:stop], numbers=self.numbers[start:stop])
        return TypedColumn(self.present[start:stop], texts=self.texts.slice(start, stop - start))

    @staticmethod
    def concat(columns: List['TypedColumn']) -> 'TypedColumn':
        present = np.concatenate([column.present for column in columns])
        if columns[0].numbers is not None:
            return TypedColumn(present, numbers=np.concatenate([column.numbers
                                                                for column in columns]))
        return TypedColumn(present, texts=pa.concat_arrays([column.texts for column in columns]))


_Part = Tuple[np.ndarray, np.ndarray]  # (bytes matrix, rows x width; each row's length used)
_ONE_BYTE = 0x80  # a length below it is its own varint


def _varint(values: np.ndarray) -> _Part:
    """Each value's protobuf varint (values as uint64)."""
    values = values.astype(np.uint64)
    if not len(values) or values.max() < _ONE_BYTE:
        return values.astype(np.uint8)[:, None], np.ones(len(values), np.int64)
    width = (int(values.max()).bit_length() + 6) // 7
    shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
    groups = ((values[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    lengths = 1 + (values[:, None] >= (np.uint64(1) << shifts[1:])).sum(axis=1)
    groups[np.arange(width) < (lengths - 1)[:, None]] |= 0x80
    return groups, lengths


def _matrix(columns: List, rows: int) -> np.ndarray:
    """Byte columns side by side: a bytes constant, a byte a row, or a matrix."""
    # Each part as bytes first: a length (an int64 a row) would make the whole matrix int64.
    parts = [np.broadcast_to(np.frombuffer(part, np.uint8), (rows, len(part)))
             if isinstance(part, bytes) else part.reshape(rows, -1).astype(np.uint8, copy=False)
             for part in columns]
    return np.hstack(parts)


def _texts(texts: pa.Array) -> _Part:
    """Each text's UTF-8 bytes, left-aligned in a matrix."""
    offsets = np.frombuffer(texts.buffers()[1], np.int32)[texts.offset:texts.offset + len(texts) + 1]
    lengths = np.diff(offsets).astype(np.int64)
    matrix = np.zeros((len(lengths), int(lengths.max()) if len(lengths) else 0), np.uint8)
    matrix[np.arange(matrix.shape[1]) < lengths[:, None]] = np.frombuffer(
        texts.buffers()[2], np.uint8)[offsets[0]:offsets[-1]]
    return matrix, lengths


class BatchEncoder:
    """Batches of typed columns (names and dtypes as RowEncoder's) as serialized Examples.

    Each column's map entry is one matrix row a record: where its lengths each fit one varint
    byte (a name, and a text, under about 110 bytes), its bytes are laid out whole; a batch
    with a longer one is encoded by RowEncoder, a row at a time."""

    def __init__(self, names: List[str], dtypes: List[str]):
        self.rows = table_records.RowEncoder(names, dtypes)
        self.columns = self.rows.columns

    @staticmethod
    def _entry(key: bytes, dtype: str, column: TypedColumn) -> Optional[_Part]:
        """The column's map entries (Features.feature's: the key, then the Feature)."""
        rows = len(column.present)
        if dtype == 'float':  # float_list's one packed float: 8 bytes of Feature
            values = column.numbers.astype('<f4').view(np.uint8)
            matrix = _matrix([b'\x0a', bytes([len(key) + 9]), key, b'\x08\x12\x06\x0a\x04',
                              values], rows)
            return matrix, np.full(rows, matrix.shape[1])
        if dtype == 'int':  # int64_list's one packed varint, of the two's complement
            varint, size = _varint(column.numbers.view(np.uint64))
            matrix = _matrix([b'\x0a', len(key) + 5 + size, key, size + 4, b'\x1a', size + 2,
                              b'\x0a', size, varint], rows)
            return matrix, len(key) + 7 + size
        text, size = _texts(column.texts)
        if len(key) + 5 + (int(size.max()) if rows else 0) >= _ONE_BYTE:
            return None
        matrix = _matrix([b'\x0a', len(key) + 5 + size, key, size + 4, b'\x0a', size + 2,
                          b'\x0a', size, text], rows)
        return matrix, len(key) + 7 + size

    def encode(self, columns: List[TypedColumn]) -> List[bytes]:
        """The batch's records, one bytes a row."""
        data, lengths = self.encode_flat(columns)
        ends = np.cumsum(lengths).tolist()
        return [data[start:end] for start, end in zip([0] + ends, ends)]

    def encode_flat(self, columns: List[TypedColumn]) -> Tuple[bytes, np.ndarray]:
        """The batch's records one after another, and each one's length."""
        if not len(columns[0].present):
            return b'', np.zeros(0, np.int64)
        parts = []
        for (key, dtype), column in zip(self.columns, columns):
            entry = self._entry(key, dtype, column)
            if entry is None or len(key) + 20 >= _ONE_BYTE:
                records = [self.rows.encode(row) for row in _rows(columns)]
                return b''.join(records), np.fromiter(map(len, records), np.int64, len(records))
            parts.append((entry[0], np.where(column.present, entry[1], 0)))
        body = sum(lengths for _, lengths in parts)
        head = _varint(body)
        parts = [(_matrix([b'\x0a', head[0]], len(body)), 1 + head[1]), *parts]
        matrix = np.hstack([part for part, _ in parts])
        # Which bytes of the matrix are the records': each part's first `lengths` columns (all
        # of a part every row fills, as a float column's with none missing).
        used = np.ones(matrix.shape, bool)
        end = 0
        for part, lengths in parts:
            start, end = end, end + part.shape[1]
            if not (lengths == part.shape[1]).all():
                used[:, start:end] = np.arange(part.shape[1]) < lengths[:, None]
        return matrix[used].tobytes(), body + parts[0][1]


def _rows(columns: List[TypedColumn]):
    """The batch's rows as RowEncoder takes them (None: missing)."""
    values = [column.numbers.tolist() if column.numbers is not None else column.texts.to_pylist()
              for column in columns]
    for index, row in enumerate(zip(*values)):
        yield [value if column.present[index] else None for value, column in zip(row, columns)]
