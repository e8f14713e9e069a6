"""Reading a CSV file as it was written: local or in a bucket, gzipped or not, with a byte-order
mark or not, in its own text encoding and in its own format (CsvFormat).

Spreadsheets write CSV their locale's way: Excel set to a language with a decimal comma writes
`1,5` and separates fields with `;`, and its "CSV UTF-8" starts the file with a byte-order mark
(which would otherwise become part of the first column's name). Its "CSV (Comma delimited)" on
Windows is not UTF-8 but the Windows code page (cp1252 in Western Europe and the Americas), which
--encoding names; its "Unicode Text" is UTF-16 with a byte-order mark, read as such without a
flag. The delimiter is read from the file's first lines unless given; the decimal mark follows
it (a comma after `;`, else a point) unless given. `prepare csv` records the format in the
schema; `--mode=predict` reads new rows with the same detection. Numbers formatted as money,
percents or with their thousands grouped are read by input_fns/tables/number_formats.py; an Excel
workbook's cells by input_fns/tables/workbooks.py.
"""
import codecs
import csv
import dataclasses
import gzip
import io
import itertools
import re
from typing import Iterator, List, Optional, Tuple

from common import files
from common.errors import UserError
from input_fns.tables import workbooks

# The delimiters a file may be read with, by what --delimiter may call them; ',' wins a tie.
DELIMITERS = {',': ',', 'comma': ',', ';': ';', 'semicolon': ';', 'tab': '\t', '\\t': '\t',
              '\t': '\t', '|': '|', 'pipe': '|'}
DELIMITER_NAMES = {',': 'comma', ';': 'semicolon', '\t': 'tab', '|': 'pipe'}
DETECTION_BYTES = 1 << 16  # the start of a file its delimiter is read from
MARK_NAMES = {'.': 'point', ',': 'comma'}
DEFAULT_ENCODING = 'utf-8'  # a byte-order mark dropped; a UTF-16 one makes the file UTF-16
_UTF16_MARKS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_NUMBER_WITH_MARK = {',': re.compile(r'[+-]?\d*,\d+'), '.': re.compile(r'[+-]?\d*\.\d+')}


@dataclasses.dataclass(frozen=True)
class CsvFormat:
    delimiter: str = ','
    decimal: str = '.'
    thousands: Optional[str] = None  # --thousands: the mark grouping digits (number_formats)
    encoding: str = DEFAULT_ENCODING  # --encoding: the text's, where it is not UTF-8 or UTF-16
    workbook: bool = False  # an Excel workbook (input_fns/tables/workbooks.py): typed cells, no text
    sheet: Optional[str] = None  # --sheet: a workbook's sheet to read, where not its first

    def to_json(self):
        return {'delimiter': self.delimiter, 'decimal': self.decimal,
                **({'thousands': self.thousands} if self.thousands else {}),
                **({'encoding': self.encoding} if self.encoding != DEFAULT_ENCODING else {}),
                **({'workbook': True} if self.workbook else {}),
                **({'sheet': self.sheet} if self.sheet is not None else {})}

    def rows(self, path: str) -> Iterator[Tuple[int, List[str]]]:
        """read_rows of a file in this format."""
        if self.workbook:
            return workbooks.read_rows(path, self.sheet)
        return read_rows(path, self.delimiter, self.encoding)

    def description(self) -> str:
        if self.workbook:
            return (f'an Excel workbook\'s sheet {self.sheet!r}' if self.sheet is not None else
                    'an Excel workbook\'s first sheet')
        return (f'{DELIMITER_NAMES[self.delimiter]}-separated, with a decimal '
                f'{MARK_NAMES[self.decimal]}' +
                (f', in {self.encoding}' if self.encoding != DEFAULT_ENCODING else ''))

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


def parse_encoding(name: Optional[str]) -> str:
    """--encoding's codec, by Python's name for it ('windows-1252' is 'cp1252'); UTF-8 if none."""
    if not name:
        return DEFAULT_ENCODING
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise UserError(f'--encoding={name}: not a text encoding Python reads; give the one the '
                        'file was saved in, e.g. cp1252 (Excel on Windows), latin-1 or shift_jis')


def open_text(path: str, encoding: str = DEFAULT_ENCODING) -> io.TextIOBase:
    """The file's text: in encoding, or as UTF-8 ('utf-8-sig' drops a leading byte-order mark),
    or as UTF-16 where it starts with UTF-16's byte-order mark."""
    stream = _open_bytes(path)
    return io.TextIOWrapper(stream, encoding=_codec(stream.peek(2)[:2], encoding), newline='')


def _open_bytes(path: str):
    raw = io.BufferedReader(_GFileStream(path), buffer_size=1 << 20)
    return gzip.GzipFile(fileobj=raw, mode='rb') if path.endswith('.gz') else raw


def _codec(head: bytes, encoding: str) -> str:
    """The codec that reads a file starting with head: encoding's, unless it is the default."""
    if encoding != DEFAULT_ENCODING:
        return encoding
    return 'utf-16' if head[:2] in _UTF16_MARKS else 'utf-8-sig'


def _first_undecoded_line(path: str, encoding: str) -> Optional[int]:
    """The line of the first byte of the file's start that its encoding does not decode; None
    when it all decodes (a character cut by the end of the start is not counted)."""
    with _open_bytes(path) as stream:
        start = stream.read(DETECTION_BYTES)
    try:
        codecs.getincrementaldecoder(_codec(start, encoding))().decode(start)
    except UnicodeDecodeError as e:
        return start[:e.start].count(b'\n') + 1
    return None


def _unreadable(path: str, line: int, error: Exception, encoding: str) -> UserError:
    if isinstance(error, UnicodeDecodeError) and encoding == DEFAULT_ENCODING:
        return UserError(f'{path}: not UTF-8 text (near line {line}); pass --encoding=cp1252 if '
                         'Excel on Windows saved it (else the encoding it was saved in), or save '
                         'it as CSV UTF-8')
    if isinstance(error, UnicodeDecodeError):
        return UserError(f'{path}: not {encoding} text (near line {line}); pass the --encoding '
                         'it was saved in')
    return UserError(f'{path}: unreadable as CSV near line {line} ({error}); fix the file')


_UNREADABLE = (UnicodeDecodeError, csv.Error, EOFError, OSError, gzip.BadGzipFile)


def read_rows(path: str, delimiter: str = ',', encoding: str = DEFAULT_ENCODING
              ) -> Iterator[Tuple[int, List[str]]]:
    """(line number, fields) of each row of a CSV file, the header first; blank lines skipped."""
    line = 0
    try:
        with open_text(path, encoding) as text:
            reader = csv.reader(text, delimiter=delimiter)
            for fields in reader:
                line = reader.line_num
                if fields:
                    yield line, fields
    except _UNREADABLE as e:
        raise _unreadable(path, line + 1, e, encoding) from None


def detect_delimiter(path: str, encoding: str = DEFAULT_ENCODING) -> str:
    """The delimiter that splits the file's first lines into the most columns, the same number
    on every line (a file whose header alone has a ';' in a name stays comma-separated)."""
    try:
        with open_text(path, encoding) as text:
            sample = text.read(DETECTION_BYTES)
    except _UNREADABLE as e:
        undecoded = isinstance(e, UnicodeDecodeError) and _first_undecoded_line(path, encoding)
        line = undecoded or 1
        raise _unreadable(path, line, e, encoding) from None
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


def starts_as_utf8(path: str) -> bool:
    """Whether the file's start is UTF-8 (or UTF-16 with its byte-order mark)."""
    return _first_undecoded_line(path, DEFAULT_ENCODING) is None


def file_format(path: str, delimiter: Optional[str] = None, decimal: Optional[str] = None,
                thousands: Optional[str] = None, encoding: Optional[str] = None,
                sheet: Optional[str] = None) -> CsvFormat:
    """The format of a CSV file: --delimiter, --decimal, --thousands and --encoding where given,
    else as detected (no thousands mark: number_formats reads one where no other reading fits);
    of a workbook, the --sheet to read."""
    if workbooks.is_workbook(path):  # numbers in cells, not text: no marks to read
        return CsvFormat(workbook=True, sheet=sheet)
    if sheet is not None:
        raise UserError(f'--sheet={sheet}: {path} is not an Excel workbook (.xlsx), which has '
                        'sheets; leave --sheet out for a CSV file')
    encoding = parse_encoding(encoding)
    delimiter = parse_delimiter(delimiter) if delimiter else detect_delimiter(path, encoding)
    mark = decimal or (',' if delimiter == ';' else '.')
    if thousands == mark:
        raise UserError(f'--thousands={thousands}: {path} is read with a decimal {MARK_NAMES[mark]}'
                        f'{"" if decimal else " (as its delimiter suggests)"}; pass --decimal='
                        f'{"." if mark == "," else ","} if its fractions follow the other mark')
    return CsvFormat(delimiter, mark, thousands, encoding)
