"""An Excel workbook (.xlsx, .xlsm) read as the rows of one sheet (the first, or the one --sheet
names), each cell as the text a CSV of it would hold, so a table kept in Excel needs no "Save as
CSV" first.

A cell holds a typed value, not the text it shows: a number is read as its digits (a cell shown
as `$1,234.50` or `12.5%` holds 1234.5 or 0.125), a date or time as ISO (`2024-01-15`,
`2024-01-15 08:30:00`), a boolean as TRUE or FALSE, an empty cell as missing, and a formula as
the value Excel last calculated and saved with it. Read by openpyxl, streaming (its read-only
mode); a workbook in a bucket is read into memory first, as a zip file must be seekable.
"""
import datetime
import io
import zipfile
from typing import Iterator, List, Optional, Tuple

from absl import logging

from common import files
from common.errors import UserError

SUFFIXES = ('.xlsx', '.xlsm')
_TOLD = set()  # the workbooks whose other sheets the log has named


def is_workbook(path: str) -> bool:
    """A workbook by its name; UserError for Excel 97-2003's, which openpyxl does not read."""
    if path.lower().endswith('.xls'):
        raise UserError(f'{path}: an Excel 97-2003 workbook (.xls), which is not read; save it as '
                        'an Excel Workbook (.xlsx) or as CSV')
    return path.lower().endswith(SUFFIXES)


def cell_text(value) -> str:
    """A cell's value as a CSV of it would write it."""
    if value is None:
        return ''
    if isinstance(value, bool):
        return 'TRUE' if value else 'FALSE'
    if isinstance(value, datetime.datetime):
        if value.time() == datetime.time():
            return value.date().isoformat()
        return value.isoformat(sep=' ')  # seconds, and their fraction only where there is one
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return str(value)  # a float's shortest digits that read back as it (its repr)


def read_rows(path: str, sheet: Optional[str] = None) -> Iterator[Tuple[int, List[str]]]:
    """(row number, cells as text) of each row of the sheet named (else the first), the header
    first; empty rows skipped, and columns past the header's last name left out when empty."""
    import openpyxl  # a second's import: only once a workbook is read
    try:
        book = openpyxl.load_workbook(io.BytesIO(files.read_bytes(path)), read_only=True,
                                      data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as e:
        raise UserError(f'{path}: not an Excel workbook (.xlsx) ({e}); save it again from Excel, '
                        'or as CSV') from None
    titles = ', '.join(repr(other.title) for other in book.worksheets)
    if sheet is not None and sheet not in book.sheetnames:
        book.close()
        raise UserError(f'--sheet={sheet}: {path} has no such sheet; its sheets are {titles}')
    chosen = book[sheet] if sheet is not None else book.worksheets[0]
    if sheet is None and len(book.worksheets) > 1 and path not in _TOLD:
        _TOLD.add(path)
        logging.info('%s: read its first sheet, %r (of %s; --sheet names another)', path,
                     chosen.title, titles)
    width = None
    try:
        for number, cells in enumerate(chosen.iter_rows(values_only=True), 1):
            texts = [cell_text(value) for value in cells]
            if not any(texts):
                continue
            if width is None:  # the header: its trailing empty cells are formatting, not columns
                width = max(index for index, text in enumerate(texts) if text) + 1
            past = [text for text in texts[width:] if text]
            if past:
                raise UserError(f'{path} row {number}: {past[0]!r} is past the header\'s last '
                                'column; name its column in the header row, or clear it')
            yield number, texts[:width] + [''] * (width - len(texts))
    finally:
        book.close()
