"""Date columns: ISO dates read as their parts (days, month, day, day of week, hour), derived in
the graph, so a model learns what a date means and an export takes the date string."""
import datetime
import json
import random

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from features import iso_dates
from helpers import REPO, run_prepare
from features import date_parts
from input_fns.tables import csv_tables, example_tables, prepare_csv
from serving_loader_checks import check_against_python
from test_canned import files_flags, trainer, validation_records
from test_tables import example, table_args, write, write_records


def random_times(count, first_year, years, seed):
    start, rng = datetime.datetime(first_year, 1, 1), random.Random(seed)
    return [start + datetime.timedelta(minutes=rng.randrange(years * 365 * 24 * 60))
            for _ in range(count)]


def busy(when):
    """The label: weekends and Decembers are busy; nothing else about a day says so."""
    return 'busy' if when.weekday() >= 5 or when.month == 12 else 'quiet'


def test_the_graphs_parts_of_a_date_are_pythons():
    times = random_times(300, 1850, 300, seed=0)
    texts = [t.strftime('%Y-%m-%d %H:%M') if i % 2 else t.date().isoformat()
             for i, t in enumerate(times)]
    texts += ['2024-02-29T23:59:30Z', '1969-12-31 01:30+02:00', '2024-01-15 10:00:00 +0000', '',
              '15.01.2024', '2024-1-5', '2024-13-01', '2024-01-15 24:00']
    entry = {'name': 'when', 'dtype': 'date', 'count': 1, 'has_time': True, 'days': {'mean': 7.0}}
    parts = {name: value.numpy() for name, value in
             date_parts.parts(tf.constant(texts), entry).items()}
    assert sorted(parts) == sorted(part['name'] for part in iso_dates.part_entries(entry))
    for index, text in enumerate(texts):
        if not iso_dates.is_dates([text]):  # missing, or not ISO: the mean and no category
            assert parts['when_days'][index] == 7.0 and parts['when_month'][index] == b''
            continue
        date = datetime.date.fromisoformat(text[:10])
        assert parts['when_days'][index] == pytest.approx(iso_dates.days(text), abs=0.01)
        assert [parts[f'when_{name}'][index].decode() for name in
                ('month', 'day_of_month', 'day_of_week', 'hour')] == [
            str(date.month), str(date.day), iso_dates.WEEKDAYS[date.weekday()],
            str(int(text[11:13]) if len(text) > 10 else 0)]
    assert iso_dates.days('1970-01-02 12:00') == 1.5


def twelve_hour(t, seconds=''):
    """t's time on a 12-hour clock, as US reports write it: '2:05 PM', '12:30 AM'."""
    return f'{(t.hour - 1) % 12 + 1}:{t.minute:02d}{seconds} {"AP"[t.hour >= 12]}M'


SPREADSHEET_DATES = {  # as spreadsheets and reports write them, unpadded
    'day.month.year': lambda t: f'{t.day}.{t.month}.{t.year} {t.hour}:{t.minute:02d}',
    'day/month/year': lambda t: f'{t.day:02d}/{t.month:02d}/{t.year}',
    'month/day/year': lambda t: f'{t.month}/{t.day}/{t.year} {t.hour}:{t.minute:02d}:00',
    'month/day/year, 12-hour': lambda t: f'{t.month}/{t.day}/{t.year} {twelve_hour(t, ":00")}',
    'day month-name year': lambda t: t.strftime(f'{t.day}-%b-%Y'),
    'day month-name year, 12-hour': lambda t: t.strftime(f'{t.day} %B %Y ') + twelve_hour(
        t).lower().replace('m', '.m.'),
    'month-name day, year': lambda t: t.strftime(f'%B {t.day}, %Y'),
    'month-name day, year, 12-hour': lambda t: t.strftime(f'%b {t.day} %Y ') + twelve_hour(t),
    'month-name day, year, weekday': lambda t: t.strftime(f'%A, %B {t.day}, %Y'),
    'day month-name year, email': lambda t: t.strftime(f'%a, {t.day} %b %Y %H:%M:%S +0000'),
    # Two-digit years (1990-2029 here: both centuries of the 1930-2029 rule).
    'day.month.yy': lambda t: f'{t.day}.{t.month}.{t.year % 100:02d}',
    'day/month/yy': lambda t: f'{t.day:02d}/{t.month:02d}/{t.year % 100:02d} {t.hour}:{t.minute:02d}',
    'month/day/yy': lambda t: f'{t.month}/{t.day}/{t.year % 100:02d}',
    'month/day/yy, 12-hour': lambda t: f'{t.month}/{t.day}/{t.year % 100:02d} {twelve_hour(t)}',
    'day month-name yy': lambda t: t.strftime(f'{t.day}-%b-%y')}  # Excel's d-mmm-yy


@pytest.mark.parametrize('written', sorted(SPREADSHEET_DATES))
def test_a_spreadsheets_dates_read_in_their_format_in_python_and_in_the_graph(written):
    times = random_times(200, 1990, 40, seed=3)
    texts = [SPREADSHEET_DATES[written](t) for t in times] + ['2024-03-01', '']
    date_format = next(name for name in iso_dates.FORMATS if written.startswith(name))
    clock = '12-hour' in written
    assert iso_dates.formats_of(texts[:-1]) == [date_format]
    entry = {'name': 'd', 'dtype': 'date', 'count': 1, 'has_time': True, 'days': {'mean': 0.0},
             'format': date_format, 'twelve_hour': bool(clock)}
    parts = {name: value.numpy() for name, value in
             date_parts.parts(tf.constant(texts), entry).items()}
    assert parts['d_days'][:-1].tolist() == pytest.approx(
        [iso_dates.days(text, date_format) for text in texts[:-1]], abs=0.01)
    assert parts['d_days'][-1] == 0.0 and parts['d_month'][-1] == b''
    assert parts['d_month'][:len(times)].tolist() == [str(t.month).encode() for t in times]
    timed = ':' in texts[0]
    if timed:
        assert parts['d_hour'][:len(times)].tolist() == [str(t.hour).encode() for t in times]
    since = [(t - datetime.datetime(1970, 1, 1)).total_seconds() / 86400 for t in times]
    assert parts['d_days'][:len(times)].tolist() == pytest.approx(
        [days if timed else int(days) for days in since], abs=0.01)  # float32: 0.002 at 20,000


def test_a_german_spreadsheets_dates_are_dates_and_ambiguous_ones_ask_which(tmp_path, caplog):
    lines = [f'{t.day}.{t.month}.{t.year} {t.hour}:{t.minute:02d};{i},5;{busy(t)}\n'
             for i, t in enumerate(random_times(60, 2020, 3, seed=4))]
    source = write(tmp_path / 'verkauf.csv', 'Datum;Preis;Klasse\n' + ''.join(lines))
    run_prepare(prepare_csv.prepare_csv, source=source, output_dir=str(tmp_path / 'data'),
                **table_args(label='Klasse'))
    schema = json.load(open(tmp_path / 'data' / 'manifest.json'))['schema']
    assert [(e['name'], e['dtype'], e.get('format')) for e in schema['features']] == [
        ('Datum', 'date', 'day.month.year'), ('Preis', 'float', None)]
    lines[7] = '30.2.2021 10:00;1,5;busy\n'  # no such day: the column is text, and prepare says why
    source = write(tmp_path / 'falsch.csv', 'Datum;Preis;Klasse\n' + ''.join(lines))
    run_prepare(prepare_csv.prepare_csv, source=source, output_dir=str(tmp_path / 'falsch'),
                **table_args(label='Klasse'))
    assert ("column 'Datum': text, though all but 1 of its first 60 values are dates "
            "(day.month.year), not '30.2.2021 10:00'; fix those, or pass "
            "--column_types=Datum:date") in caplog.text
    with pytest.raises(UserError, match=r"falsch.csv line 9, column 'Datum': '30.2.2021 10:00' "
                                        r"is not a date of the calendar \(day.month.year\)"):
        run_prepare(prepare_csv.prepare_csv, source=source, output_dir=str(tmp_path / 'falsch'),
                    **table_args(label='Klasse', column_types='Datum:date'))
    us = write(tmp_path / 'us.csv', 'when,label\n1/2/2024,a\n3/4/2024,b\n12/11/2023,a\n')
    with pytest.raises(UserError, match=r"column 'when': dates such as '1/2/2024' read as "
                                        r"day/month/year and as month/day/year .* pass "
                                        r"--date_format=day/month/year"):
        run_prepare(prepare_csv.prepare_csv, source=us, output_dir=str(tmp_path / 'us'),
                    **table_args(label='label'))
    run_prepare(prepare_csv.prepare_csv, source=us, output_dir=str(tmp_path / 'us'),
                date_format='month/day/year', **table_args(label='label'))
    [when] = json.load(open(tmp_path / 'us' / 'manifest.json'))['schema']['features']
    assert (when['format'], when['first'], when['last']) == ('month/day/year', '12/11/2023',
                                                             '3/4/2024')
    report = write(tmp_path / 'report.csv', 'when,label\n"Jan 5, 2024 2:30 PM",a\n'
                   '"Dec 31, 2023 12:15 AM",b\n"Feb 29, 2024 12:45 PM",a\n')
    run_prepare(prepare_csv.prepare_csv, source=report, output_dir=str(tmp_path / 'report'),
                **table_args(label='label', validation_fraction=0.0))
    [when] = json.load(open(tmp_path / 'report' / 'manifest.json'))['schema']['features']
    assert ({key: when[key] for key in ('format', 'first', 'last', 'has_time', 'twelve_hour')} ==
            {'format': 'month-name day, year', 'first': 'Dec 31, 2023 12:15 AM',
             'last': 'Feb 29, 2024 12:45 PM', 'has_time': True, 'twelve_hour': True})
    assert when['days']['min'] == pytest.approx(iso_dates.days('2023-12-31 00:15'))


def test_two_digit_years_read_as_spreadsheets_read_them_and_ambiguous_ones_ask_which(tmp_path):
    short = write(tmp_path / 'short.csv', 'when,label\n1/2/24,a\n3/4/85,b\n12/11/29,a\n6/7/30,b\n')
    with pytest.raises(UserError, match=r"column 'when': dates such as '1/2/24' read as "
                                        r"day/month/year and as month/day/year"):
        run_prepare(prepare_csv.prepare_csv, source=short, output_dir=str(tmp_path / 'short'),
                    **table_args(label='label'))
    run_prepare(prepare_csv.prepare_csv, source=short, output_dir=str(tmp_path / 'short'),
                date_format='day/month/year', **table_args(label='label', validation_fraction=0.0))
    [when] = json.load(open(tmp_path / 'short' / 'manifest.json'))['schema']['features']
    assert when['format'] == 'day/month/yy'
    # 00-29 in this century, 30-99 in the last: 6 July 1930 to 12 November 2029.
    assert (when['days']['min'], when['days']['max']) == (iso_dates.days('1930-07-06'),
                                                          iso_dates.days('2029-11-12'))
    assert iso_dates.to_iso('15-Jan-24', 'day month-name yy') == '2024-01-15'
    assert iso_dates.to_iso('15/01/2024', 'day/month/yy') == '15/01/2024'  # not a two-digit year
    assert iso_dates.formats_of(['15/01/2024', '15/01/24']) == []


@pytest.mark.slow  # three models trained to an accuracy; the date parsing tests above stay fast: ./run.sh test-slow
def test_a_date_column_is_learned_from_its_parts_and_the_export_takes_its_text(
        tmp_path, serving_loader):
    times = random_times(700, 2015, 10, seed=1)
    rows = ''.join(f'{i},{t:%Y-%m-%d %H:%M},{i % 7 / 7:.3f},{busy(t)}\n'
                   for i, t in enumerate(times))
    source = write(tmp_path / 'sales.csv', 'id,when,price,label\n' + rows + '700,,0.5,quiet\n')
    args = table_args(label='label', validation_fraction=0.25, ignore_columns=['id'])
    run_prepare(prepare_csv.prepare_csv, source=source, output_dir=str(tmp_path / 'data'), **args)
    schema = json.load(open(tmp_path / 'data' / 'manifest.json'))['schema']
    [when] = [entry for entry in schema['features'] if entry['name'] == 'when']
    assert (when['dtype'], when['missing'], when['has_time']) == ('date', 1, True)
    assert when['first'] == min(f'{t:%Y-%m-%d %H:%M}' for t in times)
    # The same dates as text: a vocabulary of days, none of which the validation rows hold.
    run_prepare(prepare_csv.prepare_csv, source=source, output_dir=str(tmp_path / 'text' / 'data'),
                **{**args, 'column_types': 'when:string'})
    accuracy = {}
    your_model = [f'--usr_dir={REPO}/docs/your-model/table_net', '--model=table_net']
    for name, folder, model in (('dates', tmp_path, ['--model=linear_classifier']),
                                ('text', tmp_path / 'text', ['--model=linear_classifier']),
                                ('your model', tmp_path, your_model)):
        result = trainer(*model, f'--model_dir={folder}/run_{model[-1][8:]}',
                         *files_flags(folder), '--mode=train_and_evaluate', '--train_steps=300',
                         '--batch_size=32', f'--export_dir={folder}/exports_{model[-1][8:]}')
        accuracy[name] = float(result.stdout.split('accuracy=')[1].split()[0])
    assert accuracy['dates'] >= 0.95 and accuracy['your model'] >= 0.95, accuracy
    assert accuracy['text'] < 0.8, accuracy

    exports = f'{tmp_path}/exports_linear_classifier'
    version = f'{exports}/{open(f"{exports}/best").read().strip()}'
    check_against_python(serving_loader, version, validation_records(tmp_path)[0])
    later = random_times(100, 2026, 2, seed=2)  # after every training date
    new = write(tmp_path / 'new.csv', 'when,price\n' + ''.join(f'{t:%Y-%m-%dT%H:%M},0.5\n'
                                                               for t in later))
    lines = [json.loads(line) for line in trainer(
        '--mode=predict', f'--saved_model={version}', new).stdout.strip().splitlines()]
    assert np.mean([line['classes'] == busy(t) for line, t in zip(lines, later)]) >= 0.95


PEOPLE = 'when,score,label\n2024-01-15,1.5,a\n2024-02-01 08:30,2.5,b\n2023-12-31,0.5,a\n'


@pytest.mark.parametrize('text, overrides, fragments', [
    (PEOPLE + '2024-02-30,1.0,b\n', {},
     ['line 5', "column 'when'", "'2024-02-30' is not a date of the calendar",
      '--column_types=when:string']),
    (PEOPLE, dict(column_types='label:date'), ['--column_types=label:date', 'not a date']),
    (PEOPLE.replace('score', 'when_month'), {},
     ["column 'when_month': the name the model gives a feature it derives from column 'when'"]),
])
def test_a_bad_date_is_one_line_naming_it(tmp_path, monkeypatch, text, overrides, fragments):
    monkeypatch.setattr(csv_tables, 'SAMPLE_ROWS', 3)  # types from PEOPLE's rows alone
    with pytest.raises(UserError) as error:
        run_prepare(prepare_csv.prepare_csv, source=write(tmp_path / 'bad.csv', text),
                    output_dir=str(tmp_path / 'out'), **table_args(label='label', **overrides))
    for fragment in fragments:
        assert fragment in str(error.value)


def test_records_of_iso_date_text_are_dates_and_a_held_out_set_keeps_their_type(tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setattr(example_tables, 'SAMPLE_RECORDS', 40)  # types from the first file's
    days = [datetime.date(2020, 1, 1) + datetime.timedelta(days=i * 5) for i in range(40)]
    records = [example(when=day.isoformat(), note=f'n{i % 3}', label=i % 2)
               for i, day in enumerate(days)]
    (tmp_path / 'mine').mkdir()
    write_records(tmp_path / 'mine' / 'part-0.tfrecord', records)
    args = dict(label='label', task=None, max_vocabulary=10, weight_column=None)
    run_prepare(example_tables.prepare_examples, source=str(tmp_path / 'mine' / 'part-*'),
                output_dir=str(tmp_path / 'train'), **args)
    schema = json.load(open(tmp_path / 'train' / 'manifest.json'))['schema']
    assert {entry['name']: entry['dtype'] for entry in schema['features']} == {
        'note': 'string', 'when': 'date'}
    held_out = tmp_path / 'held_out.csv'
    write(held_out, 'when,note,label\n2021-06-01,n1,0\n')
    run_prepare(prepare_csv.prepare_csv, source=str(held_out), output_dir=str(tmp_path / 'test'),
                **table_args(label=None, split='test', schema_from=str(tmp_path / 'train')))
    test_schema = json.load(open(tmp_path / 'test' / 'manifest.json'))['schema']
    assert [entry['dtype'] for entry in test_schema['features']] == ['date', 'string']
    write_records(tmp_path / 'mine' / 'part-1.tfrecord', [example(when='2020-13-01', label=1)])
    with pytest.raises(UserError, match=r"part-1.tfrecord record 1, feature 'when': "
                                        r"'2020-13-01' is not a date"):
        run_prepare(example_tables.prepare_examples, source=str(tmp_path / 'mine' / 'part-*'),
                    output_dir=str(tmp_path / 'again'), **args)
