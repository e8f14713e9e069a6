"""Numbers as spreadsheets save them: a cell formatted as money, a percent or with its thousands
grouped is written to CSV as shown (`"$1,234.50"`, `12.5%`, `1.234,50 €`, `1 234,50`, `USD 5.00`,
an accountant's negative in parentheses: `($3.25)`), not as the number it holds. A column whose
first rows are all numbers written one such way is read as those numbers (NumberStyle): the marks
and the currency dropped, a percent divided by 100 (the value the cell holds, `12.5%` -> 0.125),
parentheses a minus.

One reading only: `1,234` in a file of decimal points is 1234 with a thousands comma or 1.234
with a decimal comma, so such a column is refused unless --thousands or --decimal says which
(or another of its values settles it: `12,345,678`, `1,234.50`, a currency sign). A column of
two currencies, or of percents and plain numbers, stays text.
"""
import dataclasses
import decimal as decimals
import re
from typing import List, Optional

from absl import logging

from common.errors import UserError
from input_fns.tables import csv_files

CURRENCY_SIGNS = '$€£¥₹₩₽₺₪₫฿₱'
# Currencies written in letters: ISO 4217 codes of the most traded ones, and local abbreviations.
CURRENCY_NAMES = ('USD EUR GBP JPY CNY CHF CAD AUD NZD HKD SGD SEK NOK DKK PLN CZK HUF INR BRL MXN '
                  'ZAR KRW RUB TRY ILS THB PHP IDR MYR AED SAR US$ CA$ AU$ NZ$ HK$ R$ A$ C$ S$ kr '
                  'zł Kč Fr.').split()
SPACES = ' \u00a0\u202f'  # French, Nordic, Swiss thousands: a space, or a (narrow) no-break one
_CURRENCY = '|'.join([re.escape(name) for name in sorted(CURRENCY_NAMES, key=len, reverse=True)]
                     + [f'[{re.escape(CURRENCY_SIGNS)}]'])
_PATTERNS = {}
_ACCOUNTING_ZERO = re.compile(rf'\s*(?P<before>{_CURRENCY})?\s*-\s*(?P<after>{_CURRENCY})?\s*')
# What only a formatted number holds (besides digits, sign and decimal mark).
_FORMATTING = {decimal: re.compile(f'[{re.escape(CURRENCY_SIGNS + SPACES + other)}%\'()]|'
                                   f'{_CURRENCY}') for decimal, other in (('.', ','), (',', '.'))}


def _pattern(decimal: str):
    """A formatted number where `decimal` marks the fraction; its thousands mark, if any, is the
    other mark, a space or an apostrophe, the same mark between every group."""
    if decimal not in _PATTERNS:
        other = ',' if decimal == '.' else '.'
        marks = re.escape(other + SPACES + "'")
        _PATTERNS[decimal] = re.compile(  # `(` and `)` around the number or the currency too
            rf'\s*(?P<open>\()?\s*(?P<minus>-)?\s*(?P<before>{_CURRENCY})?\s*(?P<inner_open>\()?\s*'
            rf'(?P<sign>[+-])?'
            rf'(?P<whole>\d{{1,3}}(?P<mark>[{marks}])\d{{3}}(?:(?P=mark)\d{{3}})*|\d*)'
            rf'(?:{re.escape(decimal)}(?P<fraction>\d+))?\s*(?P<percent>%)?\s*'
            rf'(?P<inner_close>\))?\s*(?P<after>{_CURRENCY})?\s*(?P<close>\))?\s*')
    return _PATTERNS[decimal]


@dataclasses.dataclass(frozen=True)
class Written:
    """One number as it was written."""
    plain: str  # the number in the file's decimal mark, without marks or sign, percent applied
    currency: Optional[str]
    percent: bool
    mark: Optional[str]  # the thousands mark between its digits
    settled: bool  # no other reading of its mark fits: 2+ marks, a fraction, a space, a sign
    parenthesized: bool  # an accountant's negative: (3.25)

    @property
    def formatted(self) -> bool:
        return bool(self.currency or self.percent or self.mark or self.parenthesized)

    @property
    def beyond_doubt(self) -> bool:
        """A formatted number no other reading fits: a currency or percent sign, a thousands
        mark that cannot be a decimal one, or parentheses around a number without marks."""
        return bool(self.settled or self.currency or self.percent or
                    (self.parenthesized and not self.mark))


def read(text: str, decimal: str, thousands: Optional[str] = None) -> Optional[Written]:
    """The number `text` writes (in a file whose fractions follow `decimal`; --thousands names
    the mark grouping its thousands), or None if it writes none."""
    zero = _ACCOUNTING_ZERO.fullmatch(text)
    if zero and bool(zero['before']) != bool(zero['after']):  # `$ -`, as accounting writes 0
        return Written('0', zero['before'] or zero['after'], False, None, False, False)
    match = _pattern(decimal).fullmatch(text)
    if not match or not (match['whole'] or match['fraction']) or (
            match['before'] and match['after']) or (match['minus'] and match['sign']):
        return None
    opened, closed = bool(match['open'] or match['inner_open']), bool(
        match['close'] or match['inner_close'])
    if (opened != closed or (match['open'] and match['inner_open']) or
            (match['close'] and match['inner_close']) or
            (opened and (match['minus'] or match['sign']))):
        return None
    mark = match['mark']
    whole = match['whole'].replace(mark, '') if mark else match['whole']
    negative = '-' if match['minus'] or match['sign'] == '-' or opened else ''
    if match['percent']:
        value = decimals.Decimal(f'{negative}{whole or 0}.{match["fraction"] or 0}').scaleb(-2)
        plain = format(value.normalize(), 'f')
        plain = (plain if '.' in plain else plain + '.0').replace('.', decimal)  # a float
    else:
        plain = negative + whole + (decimal + match['fraction'] if match['fraction'] else '')
    currency = match['before'] or match['after']
    settled = bool(mark) and (mark != (',' if decimal == '.' else '.') or mark == thousands or
                              match['whole'].count(mark) > 1 or bool(match['fraction']) or
                              bool(currency))
    return Written(plain, currency, bool(match['percent']), mark, settled, opened)


@dataclasses.dataclass(frozen=True)
class NumberStyle:
    """How a column writes its numbers (column_style); plain() reads one of them."""
    decimal: str
    thousands: Optional[str]
    currency: Optional[str]
    percent: bool
    example: str  # one of the column's first values, for messages

    def plain(self, text: str) -> str:
        """The number as plain text (`$1,234.50` -> `1234.50`); ValueError where it is not
        written as the column's numbers are: another currency, a percent sign where the column
        has none or none where it has, a thousands mark another reading fits."""
        written = read(text, self.decimal, self.thousands)
        if (written is None or written.percent != self.percent or
                written.currency not in (None, self.currency) or
                (written.mark and written.mark != self.thousands and not written.settled)):
            raise ValueError(f'{text!r} is not written as {self.example!r} is')
        return written.plain


def column_style(values: List[str], csv_format: csv_files.CsvFormat,
                 where: str) -> Optional[NumberStyle]:
    """The style of a column whose sample values are all numbers written one formatted way
    (one currency, percents or none, one thousands mark, settled by a value or --thousands),
    logged; None for plain numbers, text, and a column another reading fits."""
    decimal = csv_format.decimal
    if not _FORMATTING[decimal].search('\n'.join(values)):  # plain numbers or text, at once
        return None
    written = []
    for value in values:
        written.append(read(value, decimal, csv_format.thousands))
        if written[-1] is None:
            return None
    if not any(number.formatted for number in written):
        return None
    currencies = {number.currency for number in written} - {None}
    marks = {number.mark for number in written} - {None}
    if (len(currencies) > 1 or len({number.percent for number in written}) > 1 or len(marks) > 1
            or (marks and not any(number.settled for number in written))):
        return None
    logging.info('%s: numbers written like %r, read as numbers', where, values[0])
    return NumberStyle(decimal, next(iter(marks), csv_format.thousands),
                       next(iter(currencies), None), written[0].percent, values[0])


def check_marks(where: str, column: str, values: List[str], csv_format: csv_files.CsvFormat):
    """Refuses a text column of numbers another --decimal or --thousands would read: some
    with one other mark before three digits and none settling it (`1,234` in a file of decimal
    points), or all with the other decimal mark (`1,5`)."""
    other, names = csv_format.other_mark, csv_files.MARK_NAMES
    if not csv_format.thousands and _ambiguous_marks(values, csv_format.decimal, other):
        example = next(value for value in values if other in value)
        raise UserError(f'{where}: numbers such as {example!r}, which read as thousands grouped '
                        f'by a {names[other]} and as a decimal {names[other]}; pass --thousands='
                        f'{other} ({example.replace(other, "")}) or --decimal={other} '
                        f'({example.replace(other, csv_format.decimal)}), or '
                        f'--column_types={column}:string for text')
    if csv_format.other_mark_numbers(values):
        raise UserError(f'{where}: numbers with a decimal {names[other]} ({values[0]!r}), where '
                        f'the file is read as {csv_format.description()}; pass --decimal={other} '
                        f'to read them as numbers, or --column_types={column}:string as text')


def _ambiguous_marks(values: List[str], decimal: str, other: str) -> bool:
    """Whether the values are all numbers, some with the other mark and none settling it."""
    if not any(other in value for value in values):
        return False
    written = []
    for value in values:
        written.append(read(value, decimal))
        if written[-1] is None:
            return False
    return not any(number.beyond_doubt for number in written)
