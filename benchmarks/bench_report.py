"""Reporting the bench: its rows (every repeat, the median and its spread), progress lines, and
the table of rows and targets it prints."""
import statistics
import sys
import time

from benchmarks import repeats


def progress(message):
    print(f'[{time.strftime("%H:%M:%S")}] {message}', file=sys.stderr, flush=True)


class Results:
    def __init__(self):
        self.rows = []

    def add(self, key, section, name, values, unit, note=''):
        """values: every repeat (one value for what is counted, not timed)."""
        value = statistics.median(values)
        self.rows.append({'key': key, 'section': section, 'name': name, 'value': value,
                          'spread': repeats.half_interval(values) / value if value else 0.0,
                          'unit': unit, 'repetitions': list(values), 'note': note})
        progress(f'{section} | {name}: {value:,.1f} {unit}')

    def row(self, key):
        return next(row for row in self.rows if row['key'] == key)


def format_value(value, unit):
    return f'{value:,.2f}' if unit in ('s', '%') else f'{value:,.0f}'


def report(results, header, checked, not_judged=()) -> str:
    lines = header + ['']
    width = max(len(row['name']) for row in results.rows)
    for section in sorted({row['section'] for row in results.rows}):
        lines.append(section)
        for row in (r for r in results.rows if r['section'] == section):
            note = f'  ({row["note"]})' if row['note'] else ''
            spread = (f' +-{100 * row["spread"]:4.1f}%' if len(row['repetitions']) > 1
                      else ' ' * 8)
            lines.append(f'  {row["name"]:<{width}}  {format_value(row["value"], row["unit"]):>14}'
                         f'{spread} {row["unit"]}{note}')
    lines += ['', 'targets (ratio: median of the paired rounds [its 95% interval])']
    width = max(len(t['target']) for t in checked)
    for t in checked:
        best = f'  (best: {results.row(t["numerator"])["name"]})' if t['best_of'] else ''
        low, high = t['interval']
        lines.append(f'  {t["target"]:<{width}}  {t["ratio"]:7.2f}x [{low:5.2f}, {high:5.2f}]  '
                     f'wanted {t["wanted"]:<8} {t["verdict"]}{best}')
    if not_judged:
        lines.append('not judged (rows left out): ' + '; '.join(t['target'] for t in not_judged))
    return '\n'.join(lines)
