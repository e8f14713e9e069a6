"""Reading a CSV file as it was written: local or in a bucket, gzipped or not, with a byte-order
mark or not, and in the file's own format (CsvFormat).

Spreadsheets write CSV their locale's way: Excel set to a language with a decimal comma writes
`1,5` and separates fields with `;`, and its "CSV UTF-8" starts the file with a byte-order mark
(which would otherwise become part of the first column's name). The delimiter is read from the
file's first lines unless given; the decimal mark follows it (a comma after `;`, else a point)
unless given. `prepare csv` records the format in the schema; `--mode=predict` reads new rows
with the same detection. Numbers formatted as money, percents or with their thousands grouped
are read by input_fns/number_formats.py.
"""
import csv
import dataclasses
import gzip
import io
import itertools
import re
from typing import Iterator, List, Optional, Tuple

from common import files
from common.errors import UserError

# The delimiters a file may be read with, by what --delimiter may call them; ',' wins a tie.
DELIMITERS = {',': ',', 'comma': ',', ';': ';', 'semicolon': ';', 'tab': '\t', '\\t': '\t',
              '\t': '\t', '|': '|', 'pipe': '|'}
DELIMITER_NAMES = {',': 'comma', ';': 'semicolon', '\t': 'tab', '|': 'pipe'}
DETECTION_BYTES = 1 << 16  # the start of a file its delimiter is read from
MARK_NAMES = {'.': 'point', ',': 'comma'}
_NUMBER_WITH_MARK = {',': re.compile(r'[+-]?\d*,\d+'), '.': re.compile(r'[+-]?\d*\.\d+')}


@dataclasses.dataclass(frozen=True)
class CsvFormat:
    delimiter: str = ','
    decimal: str = '.'
    thousands: Optional[str] = None  # --thousands: the mark grouping digits (number_formats)

    def to_json(self):
        return {'delimiter': self.delimiter, 'decimal': self.decimal,
                **({'thousands': self.thousands} if self.thousands else {})}

    def description(self) -> str:
        return (f'{DELIMITER_NAMES[self.delimiter]}-separated, with a decimal '
                f'{MARK_NAMES[self.decimal]}')

    @property
    def other_mark(self) -> str:
        return ',' if self.decimal == '.' else '.'

    def other_mark_numbers(self, values: List[str]) -> bool:
        """Whether a text column's values are all numbers with the other decimal mark ('1,5'
        where the mark is a point): a number column read with the wrong --decimal."""
        number = _NUMBER_WITH_MARK[self.other_mark]
        return bool(values) and all(number.fullmatch(value) for value in values)


class _GFileStream(io.RawIOBase):
    """A tf.io.gfile file (local or bucket) as the raw stream io's buffered readers take."""

    def __init__(self, path: str):
        self._file = files.open_file(path, 'rb')

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._file.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self._file.close()
        super().close()


def open_text(path: str) -> io.TextIOBase:
    """The file's text; 'utf-8-sig' drops a leading byte-order mark and reads the rest as UTF-8."""
    raw = io.BufferedReader(_GFileStream(path), buffer_size=1 << 20)
    stream = gzip.GzipFile(fileobj=raw, mode='rb') if path.endswith('.gz') else raw
    return io.TextIOWrapper(stream, encoding='utf-8-sig', newline='')


def _unreadable(path: str, line: int, error: Exception) -> UserError:
    if isinstance(error, UnicodeDecodeError):
        return UserError(f'{path}: not UTF-8 text (near line {line}); save the file as UTF-8 CSV')
    return UserError(f'{path}: unreadable as CSV near line {line} ({error}); fix the file')


def read_rows(path: str, delimiter: str = ',') -> Iterator[Tuple[int, List[str]]]:
    """(line number, fields) of each row of a CSV file, the header first; blank lines skipped."""
    with open_text(path) as text:
        reader = csv.reader(text, delimiter=delimiter)
        try:
            for fields in reader:
                if fields:
                    yield reader.line_num, fields
        except (UnicodeDecodeError, csv.Error, EOFError, OSError, gzip.BadGzipFile) as e:
            raise _unreadable(path, reader.line_num + 1, e) from None


def detect_delimiter(path: str) -> str:
    """The delimiter that splits the file's first lines into the most columns, the same number
    on every line (a file whose header alone has a ';' in a name stays comma-separated)."""
    try:
        with open_text(path) as text:
            sample = text.read(DETECTION_BYTES)
    except (UnicodeDecodeError, EOFError, OSError, gzip.BadGzipFile) as e:
        raise _unreadable(path, 1, e) from None
    lines = sample.splitlines(keepends=True)
    sample = ''.join(lines[:-1] if len(sample) == DETECTION_BYTES and len(lines) > 1 else lines)

    def fit(delimiter):
        try:
            counts = [len(row) for row in itertools.islice(
                csv.reader(io.StringIO(sample), delimiter=delimiter), 100) if row]
        except csv.Error:
            return False, 0
        return bool(counts) and len(set(counts)) == 1, counts[0] if counts else 0

    def rank(delimiter):  # columns the same on every line, then two or more, then more
        consistent, columns = fit(delimiter)
        return consistent and columns > 1, columns > 1, columns, -candidates.index(delimiter)

    candidates = list(DELIMITER_NAMES)
    return max(candidates, key=rank)


def parse_delimiter(text: str) -> str:
    if text not in DELIMITERS:
        raise UserError(f'--delimiter={text}: give one of , ; tab | (or comma, semicolon, pipe)')
    return DELIMITERS[text]


def file_format(path: str, delimiter: Optional[str] = None, decimal: Optional[str] = None,
                thousands: Optional[str] = None) -> CsvFormat:
    """The format of a CSV file: --delimiter, --decimal and --thousands where given, else as
    detected (no thousands mark: number_formats reads one where no other reading fits)."""
    delimiter = parse_delimiter(delimiter) if delimiter else detect_delimiter(path)
    mark = decimal or (',' if delimiter == ';' else '.')
    if thousands == mark:
        raise UserError(f'--thousands={thousands}: {path} is read with a decimal {MARK_NAMES[mark]}'
                        f'{"" if decimal else " (as its delimiter suggests)"}; pass --decimal='
                        f'{"." if mark == "," else ","} if its fractions follow the other mark')
    return CsvFormat(delimiter, mark, thousands)
