"""A date feature's parts (features/iso_dates.py) derived in the graph from its text, by
input_fns/tables/table_records.py's `with_derived`: so an export takes the date string a client has."""
from typing import Dict

import tensorflow as tf

from features import iso_dates


def _number(texts: tf.Tensor, start: int, length: int) -> tf.Tensor:
    return tf.strings.to_number(tf.strings.substr(texts, start, length), tf.int64)


def _days_from_civil(year, month, day):
    """Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm)."""
    year = year - tf.cast(month <= 2, tf.int64)
    era = tf.math.floordiv(year, 400)
    year_of_era = year - era * 400
    day_of_year = (153 * tf.where(month > 2, month - 3, month + 9) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def as_iso(texts: tf.Tensor, date_format: str, twelve_hour: bool = False) -> tf.Tensor:
    """iso_dates.to_iso in the graph: dates in date_format rewritten as ISO, others unchanged;
    twelve_hour: the training dates' times were AM or PM (24-hour ones pass unchanged)."""
    for pattern, rewrite, every in iso_dates.rewrites(date_format, twelve_hour):
        texts = tf.strings.regex_replace(texts, pattern, rewrite, replace_global=every)
    return texts


def parts(texts: tf.Tensor, entry: Dict) -> Dict[str, tf.Tensor]:
    """[batch] date strings -> {part name: [batch] tensor}, as part_entries names them. A value
    that is no date (missing: ''; a month 13) takes the training mean for days, and no category
    (prepare refuses such values; serving may meet them)."""
    texts = as_iso(tf.reshape(texts, [-1]), entry.get('format', 'iso'),
                   entry.get('twelve_hour', False))
    valid = tf.strings.regex_full_match(texts, iso_dates.PATTERN)
    timed = valid & (tf.strings.length(texts) > 10)
    texts = tf.where(timed, texts, tf.where(valid, texts + ' 00:00', '1970-01-01 00:00'))
    year, month, day = _number(texts, 0, 4), _number(texts, 5, 2), _number(texts, 8, 2)
    whole_days = _days_from_civil(year, month, day)
    minutes = _number(texts, 11, 2) * 60 + _number(texts, 14, 2)
    valid &= (month >= 1) & (month <= 12) & (day >= 1) & (day <= 31) & (minutes < 24 * 60)
    fraction = tf.cast(minutes, tf.float64) / (24 * 60)
    mean = entry['days'].get('mean', 0.0)
    name = entry['name']
    found = {f'{name}_days': tf.cast(tf.where(valid, tf.cast(whole_days, tf.float64) + fraction,
                                              mean), tf.float32)}
    weekday = tf.math.floormod(whole_days + 3, 7)  # 1970-01-01 was a Thursday
    numbers = {'month': month, 'day_of_month': day,
               'day_of_week': tf.gather(tf.constant(iso_dates.WEEKDAYS), weekday),
               'hour': minutes // 60}
    for part in iso_dates.part_entries(entry)[1:]:
        suffix = part['name'][len(name) + 1:]
        value = numbers[suffix]
        text = value if value.dtype == tf.string else tf.strings.as_string(value)
        found[part['name']] = tf.where(valid, text, '')
    return found

