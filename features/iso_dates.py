"""Date columns: ISO 8601 dates ('2024-01-15', '2024-01-15 08:30', '2024-01-15T08:30:00Z') read
as the parts a model can learn from, not as a vocabulary of days it has seen.

A date column (dtype 'date') is kept in the records and taken by serving as its text; its parts
are derived in the graph (features/date_parts.py), so an exported model takes the date string a
client has. The parts: days since 1970-01-01 (with the time of day
as a fraction; a number, normalized with the training split's statistics: the trend), and the
month, day of the month, day of the week and, when the column holds times, the hour (each a
category). The time of day is read as written: a time zone suffix is accepted and not applied.

Besides ISO, a CSV column may hold dates as spreadsheets and reports write them (FORMATS:
'15.01.2024', '15/01/2024', '1/15/2024 8:30', '15-Jan-2024', 'January 15, 2024'; English month
names, after a weekday or not: 'Mon, Jan 15, 2024'; most with a two-digit year too: '1/15/24'),
and times on a 12-hour clock ('2:30 PM', '2:30:00 p.m.'): such a date is rewritten as ISO
before its parts are read (`to_iso`: `rewrites`, the same regular expressions in Python and in
the graph), and an ISO date is taken in such a column too.
"""
import datetime
import re
from typing import Dict, List, Tuple

from absl import logging

# RE2 (tf.strings.regex_full_match) and Python's re read it alike.
PATTERN = (r'\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?'
           r'(?: ?(?:Z|UTC|GMT|[+-]\d{2}:?\d{2}))?)?')  # '+0000' after a space: logs, email
_MATCH = re.compile(PATTERN).fullmatch
_EPOCH = datetime.date(1970, 1, 1).toordinal()
WEEKDAYS = ('Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday')
# Each categorical part: (its name's suffix, its values as the model sees them).
CATEGORIES = (('month', [str(month) for month in range(1, 13)]),
              ('day_of_month', [str(day) for day in range(1, 32)]),
              ('day_of_week', list(WEEKDAYS)))
HOURS = ('hour', [str(hour) for hour in range(24)])


def short_year(date_format: str) -> str:
    """'day/month/year' -> 'day/month/yy': the format of its dates with two-digit years."""
    return date_format.replace('year', 'yy')


# A date format: the rewrites of its dates' start (day, month, year, as digits; a month name as
# M and its number) as ISO, each a (pattern, rewrite), the first that matches applied.
_FOUR_DIGIT_YEARS = {
    'day.month.year': (r'^(\d{2})\.(\d{2})\.(\d{4})', r'\3-\2-\1'),
    'day/month/year': (r'^(\d{2})/(\d{2})/(\d{4})', r'\3-\2-\1'),
    'month/day/year': (r'^(\d{2})/(\d{2})/(\d{4})', r'\3-\1-\2'),
    'day month-name year': (r'^(\d{2})[ -]M(\d{2})[ -](\d{4})', r'\3-\2-\1'),
    'month-name day, year': (r'^M(\d{2}) (\d{2}),? (\d{4})', r'\3-\1-\2')}
# Their two-digit years ('1/15/24', '15.01.24', Excel's '15-Jan-24') as spreadsheets read them:
# 00-29 are 2000-2029, 30-99 1930-1999 (Excel's and Google Sheets' rule). The year ends there.
_SHORT_YEARS = ('day.month.year', 'day/month/year', 'month/day/year', 'day month-name year')
_CENTURIES = ((r'([0-2]\d)\b', '20'), (r'([3-9]\d)\b', '19'))
FORMATS = {'iso': (),
           **{name: (rule,) for name, rule in _FOUR_DIGIT_YEARS.items()},
           **{short_year(name): tuple((_FOUR_DIGIT_YEARS[name][0].replace(r'(\d{4})', year),
                                      century + _FOUR_DIGIT_YEARS[name][1])
                                     for year, century in _CENTURIES)
              for name in _SHORT_YEARS}}
SINGLE_DIGIT = (r'\b(\d)\b', r'0\1')  # 1.5.2024 8:30 -> 01.05.2024 08:30, before the rewrite
_MONTHS = ['jan(?:uary)?', 'feb(?:ruary)?', 'mar(?:ch)?', 'apr(?:il)?', 'may', 'june?', 'july?',
           'aug(?:ust)?', 'sep(?:t(?:ember)?)?', 'oct(?:ober)?', 'nov(?:ember)?', 'dec(?:ember)?']
MONTH_NAMES = [(rf'(?i)\b{name}\b\.?', f'M{number:02d}') for number, name in enumerate(_MONTHS, 1)]
# A weekday before a date with a month name ('Mon, Jan 15, 2024', 'Mon, 15 Jan 2024 10:00:00
# +0000' as email writes it): dropped, since the date says which day it is.
WEEKDAY = (r'(?i)^(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,? +', '')
_TIME, _AM, _PM = r'(:\d{2}(?::\d{2}(?:\.\d+)?)?)', r' ?[Aa]\.?[Mm]\.?$', r' ?[Pp]\.?[Mm]\.?$'
# An ISO date's 12-hour time on the 24-hour clock: 12 AM is 00, 1-11 PM 13-23, the rest as read.
TWELVE_HOUR = ([(rf'^(\S+)[ T]12{_TIME}{_AM}', r'\1 00\2')] +
               [(rf'^(\S+)[ T]0?{hour}{_TIME}{_PM}', rf'\1 {hour + 12}\2') for hour in range(1, 12)] +
               [(rf'^(\S+)[ T](\d){_TIME} ?[AaPp]\.?[Mm]\.?$', r'\1 0\2\3'),
                (rf'^(\S+)[ T](\d{{2}}){_TIME} ?[AaPp]\.?[Mm]\.?$', r'\1 \2\3')])
MERIDIEM = re.compile(r'\d ?[AaPp]\.?[Mm]\.?$')  # a time that is AM or PM
# Python's faster equivalents of the graph's rewrites (tests/test_dates.py compares them).
_PADDED = re.compile(SINGLE_DIGIT[0])
_STARTS = {name: [(re.compile(pattern), rewrite) for pattern, rewrite in rules]
           for name, rules in FORMATS.items()}
_WEEKDAY = re.compile(WEEKDAY[0])  # '(?i)' at its start: Python's re reads it as RE2 does
_MONTH = re.compile('(?i)\\b(?:' + '|'.join(f'({name})' for name in _MONTHS) + ')\\b\\.?')
_CLOCK = re.compile(rf'^(\S+)[ T](\d{{1,2}}){_TIME} ?([AaPp])\.?[Mm]\.?$')


def rewrites(date_format: str, twelve_hour: bool) -> List[Tuple[str, str, bool]]:
    """(pattern, rewrite, every match or the first) that make a date in date_format ISO, in
    order, in the graph (features/date_parts.py); twelve_hour: its time is AM or PM."""
    steps = []
    if date_format != 'iso':
        steps.append((*SINGLE_DIGIT, True))
        if 'month-name' in date_format:
            steps += [(*WEEKDAY, False)] + [(*month, False) for month in MONTH_NAMES]
        steps += [(*rule, False) for rule in FORMATS[date_format]]
    return steps + [(*step, False) for step in TWELVE_HOUR] * twelve_hour


def _on_24_hours(match: re.Match) -> str:
    hour, afternoon = int(match[2]), match[4] in 'Pp'
    if hour == 12 and not afternoon:
        hour = 0
    elif afternoon and 1 <= hour <= 11:
        hour += 12
    return f'{match[1]} {hour:02d}{match[3]}'


def to_iso(text: str, date_format: str = 'iso') -> str:
    """text as an ISO date, if it is one in date_format (or in ISO); else text unchanged: the
    graph's rewrites, the same way."""
    if date_format == 'iso' and text[-1:] not in 'Mm.':  # the common case, at once
        return text
    if date_format != 'iso':
        text = _PADDED.sub(SINGLE_DIGIT[1], text)
        if 'month-name' in date_format:
            text = _WEEKDAY.sub('', text, count=1)
            text = _MONTH.sub(lambda match: f'M{match.lastindex:02d}', text, count=1)
        for pattern, rewrite in _STARTS[date_format]:
            text, rewritten = pattern.subn(rewrite, text, count=1)
            if rewritten:
                break
    return _CLOCK.sub(_on_24_hours, text, count=1) if MERIDIEM.search(text) else text


def days(text: str, date_format: str = 'iso') -> float:
    """'2024-01-15 12:00' -> 19737.5: days since 1970-01-01, the time of day (to the minute) as a
    fraction; ValueError if text is not a date of the calendar in date_format (or ISO)."""
    text = to_iso(text, date_format)
    if not _MATCH(text):
        raise ValueError(f'{text!r} is not an ISO date (YYYY-MM-DD)')
    date = datetime.date(int(text[:4]), int(text[5:7]), int(text[8:10]))
    minutes = int(text[11:13]) * 60 + int(text[14:16]) if len(text) > 10 else 0
    if minutes >= 24 * 60:
        raise ValueError(f'{text!r} has no such time of day')
    return date.toordinal() - _EPOCH + minutes / (24 * 60)


def check(text: str, date_format: str = 'iso') -> str:
    """text, if it is a date in date_format (or ISO); ValueError otherwise (a CSV converter)."""
    days(text, date_format)
    return text


def is_dates(values: List[str], date_format: str = 'iso') -> bool:
    try:
        for value in values:
            days(value, date_format)
    except ValueError:
        return False
    return bool(values)


def likeliest_format(values: List[str]) -> Tuple[str, List[str]]:
    """(the format the most values are dates in, the values that are not dates in it)."""
    def not_dates(date_format):
        return [value for value in values if not is_dates([value], date_format)]
    found = {date_format: not_dates(date_format) for date_format in FORMATS}
    best = min(FORMATS, key=lambda date_format: len(found[date_format]))
    return best, found[best]


def warn_of_near_dates(where: str, column: str, values: List[str]) -> None:
    """Logs a text column whose values are all dates (in one format) but for a few."""
    if len(values) < 10 or len(likeliest_format(values[:100])[1]) > 10:  # text is common
        return
    date_format, others = likeliest_format(values)
    if len(others) <= len(values) // 10:
        logging.warning('%s: text, though all but %d of its first %d values are dates (%s), not '
                        '%r; fix those, or pass --column_types=%s:date to have prepare name each',
                        where, len(others), len(values), date_format, others[0], column)


def formats_of(values: List[str]) -> List[str]:
    """The formats every value is a date in: ['iso'] for ISO dates, else those of FORMATS that
    fit (day/month/year and month/day/year both, while no day is above 12); [] for no dates."""
    if is_dates(values):
        return ['iso']
    return [name for name in FORMATS if name != 'iso' and is_dates(values, name)]


def part_entries(entry: Dict) -> List[Dict]:
    """A date feature's schema entry -> the entries of its parts, as table_columns and the trees
    take features: days a float with the column's statistics, the rest text with a vocabulary."""
    name, count = entry['name'], entry['count']
    parts = [{**entry['days'], 'name': f'{name}_days', 'dtype': 'float', 'count': count}]
    for suffix, values in CATEGORIES + ((HOURS,) if entry.get('has_time') else ()):
        parts.append({'name': f'{name}_{suffix}', 'dtype': 'string', 'count': count,
                      'vocabulary': values})
    return parts

