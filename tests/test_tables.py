"""prepare csv and prepare examples: the schema in the manifest, the split, the records as read
back, and one-line errors that leave the prepared data as it was."""
import csv
import glob
import gzip
import io
import json
import os
import re
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from helpers import REPO, assert_one_line_error, csv_as_workbook, run_module, run_prepare
from input_fns.records import pipeline
from input_fns.tables import csv_files, csv_tables, example_tables, prepare_csv, table_records
from trainer.serving import predict_table

PEOPLE = '''age,workclass,"hours, per week",score,income
39,State-gov,40,1.5,<=50K
50,"Self-emp, inc",13,NA,<=50K
38,Private,,2.25,>50K
53,?,40,3,>50K
28,Private,40,N/A,<=50K
37,Private,45,0.5,>50K
'''


def table_args(**overrides):
    values = dict(label='income', column_types=None, task=None, max_vocabulary=1000,
                  na_values=['', 'NA', 'N/A', '?'], validation_fraction=0.0, num_shards=2,
                  num_eval_shards=1, weight_column=None)
    values.update(overrides)
    return values


def write(path, text, compress=False):
    with (gzip.open(path, 'wt') if compress else open(path, 'w')) as f:
        f.write(text)
    return str(path)


def read_back(output_dir, schema, split='train'):
    input_fn = table_records.make_input_fn(os.path.join(output_dir, f'{split}-*'), schema, 100,
                                           training=False)
    return [(features, labels) for features, labels in input_fn()]


def predicted_example(tmp_path, text, features, **reading):
    """The tf.Example predict makes of a CSV's one row, for a model of those features."""
    path = write(tmp_path / 'rows.csv', text)
    [(_, serialized)] = predict_table.examples(path, features, {'csv_format': {}}, **reading)
    return tf.train.Example.FromString(serialized)


def test_csv_schema_holds_types_statistics_vocabularies_and_classes(tmp_path):
    source = write(tmp_path / 'people.csv.gz', PEOPLE, compress=True)
    out = str(tmp_path / 'out')
    entries = run_prepare(prepare_csv.prepare_csv, source=source, output_dir=out,
                          **table_args(max_vocabulary=2))
    assert entries['train']['num_records'] == 6
    schema = json.load(open(os.path.join(out, 'manifest.json')))['schema']
    by_name = {entry['name']: entry for entry in schema['features']}
    assert [(e['name'], e['dtype']) for e in schema['features']] == [
        ('age', 'int'), ('workclass', 'string'), ('hours__per_week', 'int'), ('score', 'float')]
    assert by_name['hours__per_week']['column'] == 'hours, per week'
    ages = np.array([39, 50, 38, 53, 28, 37])
    assert by_name['age']['mean'] == pytest.approx(ages.mean())
    assert by_name['age']['std'] == pytest.approx(ages.std())
    assert (by_name['age']['min'], by_name['age']['max']) == (28, 53)
    assert by_name['age']['quantiles'][10] == pytest.approx(np.median(ages))
    assert (by_name['score']['count'], by_name['score']['missing']) == (4, 2)
    assert by_name['workclass'] == {
        'name': 'workclass', 'dtype': 'string', 'count': 5, 'missing': 1,
        'vocabulary': ['Private', 'Self-emp, inc'], 'vocabulary_counts': [3, 1], 'oov_count': 1}
    assert schema['label'] == {'name': 'income', 'column': 'income', 'dtype': 'string',
                               'task': 'classification', 'missing': 0,
                               'classes': ['<=50K', '>50K'], 'class_counts': [3, 3]}
    # Read back: missing numbers are the training mean, missing text is '' (out of vocabulary).
    [(features, labels)] = read_back(out, schema)
    rows = {int(age): i for i, age in enumerate(features['age'].numpy())}
    assert features['score'].numpy()[rows[50]] == pytest.approx(by_name['score']['mean'])
    assert features['workclass'].numpy()[rows[53]] == b''
    assert features['hours__per_week'].numpy()[rows[38]] == round(by_name['hours__per_week']['mean'])
    assert labels.numpy()[rows[37]] == b'>50K'


def test_split_is_by_a_hash_of_the_row_and_the_same_every_time(tmp_path):
    rows = ''.join(f'{i},{i % 3},{"yes" if i % 2 else "no"}\n' for i in range(400))
    source = write(tmp_path / 'rows.csv', 'id,group,label\n' + rows)
    splits = []
    for name in ('a', 'b'):
        out = str(tmp_path / name)
        run_prepare(prepare_csv.prepare_csv, source=source, output_dir=out,
                    **table_args(label='label', validation_fraction=0.25))
        schema = json.load(open(os.path.join(out, 'manifest.json')))['schema']
        splits.append(sorted(int(i) for features, _ in read_back(out, schema, 'validation')
                             for i in features['id'].numpy()))
    assert splits[0] == splits[1] and 70 < len(splits[0]) < 130
    assert schema['features'][1]['dtype'] == 'int' and schema['label']['task'] == 'classification'


@pytest.mark.parametrize('text, overrides, fragments', [
    (PEOPLE, dict(label='salary'), ['--label=salary', 'its columns: age, workclass']),
    (PEOPLE + '40,Private,40,1,>50K,extra\n', {}, ['line 8', '6 fields', '5 columns']),
    (PEOPLE + '4O,Private,40,1,>50K\n', {}, ['line 8', "column 'age'", "'4O' is not an int",
                                             '--column_types=age:float']),
    ('a,b,a\n1,2,3\n', dict(label='b'), ["names 'a' twice"]),
    ('a,,c\n1,2,3\n', dict(label='a'), ['column 2 of the header has no name']),
    (PEOPLE, dict(column_types='age:decimal'), ['--column_types', 'age:decimal']),
    (PEOPLE, dict(delimiter='x'), ['--delimiter=x', 'give one of , ; tab |']),
    (PEOPLE, dict(ignore_columns=['income']), ["--ignore_columns: 'income' is the --label"]),
    (PEOPLE, dict(ignore_columns=['id']), ["--ignore_columns: no column 'id'; the columns: age,"]),
    ('age\tscore\tincome\n3\t1,5\tyes\n4\t2,0\tno\n', {},
     ["column 'score': numbers with a decimal comma ('1,5')", 'read as tab-separated, with a '
      'decimal point', 'pass --decimal=,', '--column_types=score:string']),
])
def test_bad_csv_is_one_error_naming_the_place_and_changes_nothing(tmp_path, monkeypatch, text,
                                                                  overrides, fragments):
    monkeypatch.setattr(csv_tables, 'SAMPLE_ROWS', 6)  # types from PEOPLE's rows alone
    out = str(tmp_path / 'out')
    good = write(tmp_path / 'good.csv', PEOPLE)
    run_prepare(prepare_csv.prepare_csv, source=good, output_dir=out, **table_args())
    before = {path: os.path.getsize(path) for path in glob.glob(os.path.join(out, '*'))}
    with pytest.raises(UserError) as error:
        run_prepare(prepare_csv.prepare_csv, source=write(tmp_path / 'bad.csv', text),
                    output_dir=out, **table_args(**overrides))
    for fragment in fragments:
        assert fragment in str(error.value)
    assert {path: os.path.getsize(path) for path in glob.glob(os.path.join(out, '*'))} == before


def in_format(text, delimiter, decimal_comma=False):
    """The CSV text written again with another delimiter (and '1,5' for each number's 1.5)."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator='\r\n')
    for fields in csv.reader(io.StringIO(text)):
        writer.writerow([field.replace('.', ',') if decimal_comma and re.fullmatch(r'[\d.]+', field)
                         else field for field in fields])
    return out.getvalue()


def test_a_spreadsheets_csv_is_read_in_its_own_format_and_makes_the_same_table(tmp_path):
    """Excel's "CSV UTF-8" in a locale that writes 1.5 as '1,5': a byte-order mark, ';' between
    fields, CRLF; and a tab-separated file: each prepared as the plain CSV is, its format found."""
    tables = {}
    for name, text, found in [
            ('plain.csv', PEOPLE, {'delimiter': ',', 'decimal': '.'}),
            ('excel.csv', '\ufeff' + in_format(PEOPLE, ';', decimal_comma=True),
             {'delimiter': ';', 'decimal': ','}),
            ('tabs.tsv', in_format(PEOPLE, '\t'), {'delimiter': '\t', 'decimal': '.'})]:
        out = str(tmp_path / name.replace('.', '_'))
        run_prepare(prepare_csv.prepare_csv, source=write(tmp_path / name, text), output_dir=out,
                    **table_args())
        schema = json.load(open(os.path.join(out, 'manifest.json')))['schema']
        assert (schema.pop('csv_format'), schema.pop('source')) == (found, str(tmp_path / name))
        [(features, labels)] = read_back(out, schema)
        tables[name] = schema, {k: v.numpy().tolist() for k, v in features.items()}, labels.numpy().tolist()
    assert [feature['name'] for feature in tables['excel.csv'][0]['features']][0] == 'age'
    assert tables['excel.csv'] == tables['plain.csv'] == tables['tabs.tsv']
    # A ';' in a comma-separated file's header name does not make it ;-separated.
    named = write(tmp_path / 'named.csv', 'a;b,label\n1,x\n2,y\n')
    assert csv_files.file_format(named) == csv_files.CsvFormat(',', '.')


def spreadsheet(columns, rows, delimiter=','):
    """A CSV of the columns' values as written (quoted where they hold the delimiter) and a label."""
    text = io.StringIO()
    writer = csv.writer(text, delimiter=delimiter, lineterminator='\n')
    writer.writerows([columns + ['label']] + [list(row) + ['ab'[index % 2]]
                                              for index, row in enumerate(rows)])
    return text.getvalue()


def prepared_columns(tmp_path, name, text, **overrides):
    """({feature: dtype}, {feature: its values sorted}, schema) of a CSV prepared, none held out
    (text None: the file tmp_path/name as it is)."""
    out = str(tmp_path / name.replace('.', '_'))
    source = str(tmp_path / name) if text is None else write(tmp_path / name, text)
    run_prepare(prepare_csv.prepare_csv, source=source, output_dir=out,
                **table_args(label='label', validation_fraction=0.0, **overrides))
    schema = json.load(open(os.path.join(out, 'manifest.json')))['schema']
    [(features, _)] = read_back(out, schema)
    return ({entry['name']: entry['dtype'] for entry in schema['features']},
            {name: sorted(values.numpy().tolist()) for name, values in features.items()}, schema)


def test_numbers_with_their_thousands_grouped_are_numbers_where_no_other_reading_fits(tmp_path):
    """Spreadsheets save a formatted number as shown: "1,234.50" (or 1.234,50 after ';')."""
    rows = [('1,234.50', '2,000'), ('12,345,678.00', '1,000,000'), ('999.99', '300'), ('7', '4,000')]
    german = [[value.replace(',', '_').replace('.', ',').replace('_', '.') for value in row]
              for row in rows]
    for name, delimiter, written in [('plain.csv', ',', rows), ('excel.csv', ';', german)]:
        dtypes, values, _ = prepared_columns(
            tmp_path, name, spreadsheet(['amount', 'count'], written, delimiter))
        assert dtypes == {'amount': 'float', 'count': 'int'}
        assert values['amount'] == pytest.approx([7.0, 999.99, 1234.5, 12345678.0])
        assert values['count'] == [300, 2000, 4000, 1_000_000]
    # '1,234' alone may be 1.234 with a decimal comma: refused, naming both readings' flags,
    # also beside plain numbers (it was silently text); --thousands settles it.
    doubt = write(tmp_path / 'doubt.csv', 'n,label\n"1,234",a\n"5,678",b\n999,a\n')
    with pytest.raises(UserError, match=r"column 'n': numbers such as '1,234', which read as "
                       r"thousands grouped by a comma and as a decimal comma; pass "
                       r"--thousands=, \(1234\) or --decimal=, \(1.234\)"):
        run_prepare(prepare_csv.prepare_csv, output_dir=str(tmp_path / 'doubt'), source=doubt,
                    **table_args(label='label'))
    _, values, schema = prepared_columns(tmp_path, 'settled.csv', open(doubt).read(),
                                         thousands=',')
    assert schema['csv_format'] == {'delimiter': ',', 'decimal': '.', 'thousands': ','}
    assert values['n'] == [999, 1234, 5678]
    settled = str(tmp_path / 'settled_csv')  # a held-out CSV takes the training data's marks
    run_prepare(prepare_csv.prepare_csv, source=doubt, output_dir=settled, split='test',
                **table_args(label=None, schema_from=settled))
    [(features, _)] = read_back(settled, schema, 'test')
    assert sorted(features['n'].numpy().tolist()) == [999, 1234, 5678]
    with pytest.raises(UserError, match=r'--thousands=\.: .* is read with a decimal point'):
        csv_files.file_format(doubt, thousands='.')


def test_money_and_percents_are_the_numbers_their_cells_hold(tmp_path, monkeypatch):
    """A spreadsheet saves a cell formatted as money or a percent as shown ("$1,234.50", "12.5%";
    in German "1.234,50 €", "12,5 %"): read as 1234.5 and 0.125."""
    rows = [('$1,234.50', '12.5%'), ('$5.00', '100%'), ('$12', '0%'), ('-$3.25', '-2%')]
    german = [('1.234,50 €', '12,5 %'), ('5,00 €', '100 %'), ('12 €', '0 %'), ('-3,25 €', '-2 %')]
    for name, delimiter, written in [('dollars.csv', ',', rows), ('euros.csv', ';', german)]:
        dtypes, values, _ = prepared_columns(
            tmp_path, name, spreadsheet(['price', 'rate'], written, delimiter))
        assert dtypes == {'price': 'float', 'rate': 'float'}
        assert values['price'] == pytest.approx([-3.25, 5, 12, 1234.5])
        assert values['rate'] == pytest.approx([-0.02, 0, 0.125, 1])
    # Past the first rows, a value written otherwise is named, not read 100x off or in another
    # currency; two currencies in the first rows leave a column text.
    monkeypatch.setattr(csv_tables, 'SAMPLE_ROWS', 2)
    for later, column in [('"$5.00",12,a', 'rate'), ('"€5.00",12%,a', 'price')]:
        source = write(tmp_path / 'later.csv', 'price,rate,label\n"$1.00",1%,a\n"$2.00",2%,b\n'
                       + later + '\n')
        with pytest.raises(UserError, match=rf"later.csv line 4, column '{column}': .* is not a "
                           r"finite number written as '(\$1.00|1%)' is \(the type read from the "
                           r"first rows\)"):
            run_prepare(prepare_csv.prepare_csv, source=source, output_dir=str(tmp_path / 'later'),
                        **table_args(label='label'))
    assert prepared_columns(tmp_path, 'mixed.csv', spreadsheet(
        ['price'], [['$1.00'], ['€2.00'], ['$3.00']]))[0] == {'price': 'string'}
    # Predict reads a column of numbers written one formatted way as prepare does, where the
    # model takes a number.
    numbers = {'price': 'float', 'rate': 'float'}
    example = predicted_example(tmp_path, 'price,rate\n"$1,234.50",12%\n', numbers)
    assert [example.features.feature[name].float_list.value[0] for name in numbers] == \
        pytest.approx([1234.5, 0.12])
    with pytest.raises(UserError, match=r"rows.csv line 2, column 'price': '1,234' is not a "
                       r"finite number, as the model takes it; pass --decimal=, .* or "
                       r"--thousands=, if it groups"):
        predicted_example(tmp_path, 'price\n"1,234"\n', numbers)
    example = predicted_example(tmp_path, 'price\n"1,234"\n', numbers, thousands=',')
    assert example.features.feature['price'].float_list.value == [1234]


def test_accounts_negatives_in_parentheses_dash_zeros_and_currency_codes_are_numbers(tmp_path):
    """Accounting formats write -3.25 as "($3.25)" or "$ (3.25)" and 0 as "$ -"; reports name
    a currency by its code ("USD 5.00", "5,00 EUR")."""
    rows = [(' $ (1,234.50) ', 'USD 1,234.50', '(3.25)', '1 234,50 kr'),
            (' $ 5.00 ', 'USD 5.00', '5', '5 kr'), (' $ -   ', '(USD 3.25)', '12', '(3,25 kr)'),
            ('$ 12.00', 'USD 12', '7', '12 kr')]
    dtypes, values, _ = prepared_columns(tmp_path, 'accounts.csv', spreadsheet(
        ['balance', 'amount', 'change'], [row[:3] for row in rows]))
    assert dtypes == {'balance': 'float', 'amount': 'float', 'change': 'float'}
    assert values['balance'] == pytest.approx([-1234.5, 0, 5, 12])
    assert values['amount'] == pytest.approx([-3.25, 5, 12, 1234.5])
    assert values['change'] == pytest.approx([-3.25, 5, 7, 12])
    _, values, _ = prepared_columns(tmp_path, 'kronor.csv', spreadsheet(
        ['kronor'], [row[3:] for row in rows], ';'))
    assert values['kronor'] == pytest.approx([-3.25, 5, 12, 1234.5])
    # Parentheses or letters around what is not one number leave a column text.
    for name, written in [('words.csv', ['(a)', '(3.25', 'ROW 5']), ('half.csv', ['(3.25', '5'])]:
        assert prepared_columns(tmp_path, name, spreadsheet(
            ['x'], [[value] for value in written]))[0] == {'x': 'string'}
    example = predicted_example(tmp_path, 'price\n($3.25)\n', {'price': 'float'})
    assert example.features.feature['price'].float_list.value == [-3.25]


def test_ignored_columns_are_left_out_of_the_table_and_an_identifier_is_warned_of(tmp_path,
                                                                                 caplog):
    rows = ''.join(f'{number},user{number * 7919 % 1000:03d},{number % 9},{"ab"[number % 2]}\n'
                   for number in range(1, 121))
    source = write(tmp_path / 'users.csv', 'id,name,visits,kind\n' + rows)
    kept, ignored = str(tmp_path / 'kept'), str(tmp_path / 'ignored')
    run_prepare(prepare_csv.prepare_csv, source=source, output_dir=kept,
                **table_args(label='kind', validation_fraction=0.25))
    warned = sorted(record.getMessage().split(': column ')[1].split()[0]
                    for record in caplog.records if 'as an identifier does' in record.getMessage())
    assert warned == ["'id'", "'name'"]  # not visits (repeats), nor the label
    run_prepare(prepare_csv.prepare_csv, source=source, output_dir=ignored,
                **table_args(label='kind', validation_fraction=0.25, ignore_columns=['name', 'id']))
    schemas = {out: json.load(open(os.path.join(out, 'manifest.json')))['schema']
               for out in (kept, ignored)}
    assert [entry['name'] for entry in schemas[ignored]['features']] == ['visits']
    assert schemas[ignored]['ignored_columns'] == ['id', 'name']
    # The same rows held out either way: a row's split goes by all its fields.
    held_out = {out: sorted(read_back(out, schemas[kept if out == kept else ignored],
                                      'validation')[0][0]['visits'].numpy().tolist())
                for out in (kept, ignored)}
    assert held_out[kept] == held_out[ignored] and held_out[kept]
    # A column given as int that holds decimals is refused in one line, not looked at as an id.
    decimals = write(tmp_path / 'decimals.csv',
                     'n,label\n' + ''.join(f'{i}.5,{i % 2}\n' for i in range(60)))
    with pytest.raises(UserError, match=r"line 2, column 'n': '0.5' is not an int \(as "
                       r"--column_types says\); fix that row, or pass --na_values"):
        run_prepare(prepare_csv.prepare_csv, source=decimals, output_dir=str(tmp_path / 'd'),
                    **table_args(label='label', column_types='n:int'))
    # A held-out CSV prepared --schema_from the training data leaves out what it left out.
    run_prepare(prepare_csv.prepare_csv, source=source, output_dir=ignored,
                **table_args(label=None, schema_from=ignored, split='test'))
    test = json.load(open(os.path.join(ignored, 'manifest.json')))['splits']['test']
    assert sorted(test['features']) == ['kind', 'visits']


def test_prepare_csv_cli_without_the_label_column_exits_2_with_one_line(tmp_path):
    result = run_module('input_fns.prepare', 'csv', f'--source={write(tmp_path / "p.csv", PEOPLE)}',
                        '--label=salary', f'--output_dir={tmp_path / "out"}', check=False)
    assert_one_line_error(result, 2, '--label=salary', 'its columns: age, workclass, hours, per '
                          'week, score, income')


def test_excel_on_windows_and_unicode_text_files_are_read_in_their_encodings(tmp_path):
    """Excel's "CSV (Comma delimited)" on Windows is its code page (cp1252): --encoding names it,
    the schema keeps it, --schema_from takes it; its "Unicode Text" is UTF-16 with a byte-order
    mark, tab-separated: read as such without a flag."""
    cities = {'M\u00fcnchen': '1.234,50 \u20ac', 'Caf\u00e9': '12,00 \u20ac',
              'Z\u00fcrich': '7,25 \u20ac', 'Gen\u00e8ve': '3,00 \u20ac'}
    text = spreadsheet(['city', 'price'], list(cities.items()) * 3, delimiter=';')
    (tmp_path / 'windows.csv').write_bytes(text.encode('cp1252'))
    (tmp_path / 'unicode.txt').write_bytes(text.replace(';', '\t').encode('utf-16'))
    (tmp_path / 'held_out.csv').write_bytes(text.encode('cp1252'))

    def prepare(name, **overrides):
        out = str(tmp_path / name.replace('.', '_'))
        return run_prepare(prepare_csv.prepare_csv, source=str(tmp_path / name), output_dir=out,
                           **table_args(**{'label': 'label', **overrides}))
    with pytest.raises(UserError, match=re.escape(
            f'{tmp_path}/windows.csv: not UTF-8 text (near line 2); pass --encoding=cp1252 if '
            'Excel on Windows saved it')):
        prepare('windows.csv')
    tables = {}
    for name, flags in (('windows.csv', {'encoding': 'windows-1252'}),
                        ('unicode.txt', {'decimal': ','})):  # tabs leave the mark to --decimal
        prepare(name, **flags)
        out = tmp_path / name.replace('.', '_')
        schema = json.load(open(out / 'manifest.json'))['schema']
        [(features, _)] = read_back(str(out), schema)
        tables[name] = (schema.pop('csv_format'), {key: sorted(set(value.numpy().tolist()))
                                                   for key, value in features.items()})
    assert tables['windows.csv'][0] == {'delimiter': ';', 'decimal': ',', 'encoding': 'cp1252'}
    assert tables['unicode.txt'][0] == {'delimiter': '\t', 'decimal': ','}
    assert tables['windows.csv'][1] == tables['unicode.txt'][1] == {
        'city': sorted(name.encode() for name in cities),
        'price': pytest.approx([3.0, 7.25, 12.0, 1234.5])}
    # A held-out file in the training data's encoding, without the flag.
    entries = run_prepare(prepare_csv.prepare_csv, source=str(tmp_path / 'held_out.csv'),
                          output_dir=str(tmp_path / 'windows_csv'), split='test',
                          schema_from=str(tmp_path / 'windows_csv'), **table_args(label=None))
    assert entries['test']['num_records'] == 12
    # One saved as UTF-8 is read as UTF-8: cp1252 would read its bytes as other letters (MÃ¼nchen).
    (tmp_path / 'held_out_utf8.csv').write_bytes(text.encode('utf-8'))
    run_prepare(prepare_csv.prepare_csv, source=str(tmp_path / 'held_out_utf8.csv'),
                output_dir=str(tmp_path / 'windows_csv'), split='utf8',
                schema_from=str(tmp_path / 'windows_csv'), **table_args(label=None))
    schema = json.load(open(tmp_path / 'windows_csv' / 'manifest.json'))['schema']
    [(features, _)] = read_back(str(tmp_path / 'windows_csv'), schema, 'utf8')
    assert sorted(set(features['city'].numpy().tolist())) == tables['windows.csv'][1]['city']
    with pytest.raises(UserError, match=r'--encoding=klingon: not a text encoding Python reads; '
                                        r'give the one the file was saved in, e.g. cp1252'):
        prepare('windows.csv', encoding='klingon')


def test_an_excel_workbook_is_read_as_its_cells_and_makes_its_csvs_table(tmp_path):
    """The first sheet's typed cells: the same table as the CSV of them; dates and a percent
    cell as the values they hold; an empty formatted cell past the header is no column."""
    import datetime
    import openpyxl
    tables = {}
    for name, source in (('plain', write(tmp_path / 'plain.csv', PEOPLE)),
                         ('book', csv_as_workbook(PEOPLE, tmp_path / 'book.xlsx'))):
        out = str(tmp_path / name)
        run_prepare(prepare_csv.prepare_csv, source=source, output_dir=out, **table_args())
        schema = json.load(open(os.path.join(out, 'manifest.json')))['schema']
        csv_format, _ = schema.pop('csv_format'), schema.pop('source')
        [(features, labels)] = read_back(out, schema)
        tables[name] = schema, {k: v.numpy().tolist() for k, v in features.items()}, labels.numpy().tolist()
    assert csv_format == {'delimiter': ',', 'decimal': '.', 'workbook': True}
    assert tables['book'] == tables['plain']
    # --sheet: the rows in a workbook's second sheet, after a sheet of notes.
    second = csv_as_workbook(PEOPLE, tmp_path / 'second.xlsx', 'People 2024', notes_first=True)
    out = str(tmp_path / 'second')
    run_prepare(prepare_csv.prepare_csv, source=second, output_dir=out, sheet='People 2024',
                **table_args())
    schema = json.load(open(os.path.join(out, 'manifest.json')))['schema']
    assert schema.pop('csv_format')['sheet'] == 'People 2024' and schema.pop('source') == second
    [(features, labels)] = read_back(out, schema)
    assert (schema, {k: v.numpy().tolist() for k, v in features.items()},
            labels.numpy().tolist()) == tables['plain']
    with pytest.raises(UserError, match=r'--label=income: .*second.xlsx has no such column; its '
                                        r"columns: Exported from the shop, see the second sheet "
                                        r"\(its first sheet's: --sheet names another\)"):
        run_prepare(prepare_csv.prepare_csv, source=second, output_dir=out, **table_args())
    for source, message in (
            (second, r"--sheet=People: .*second.xlsx has no such sheet; its sheets are 'Notes', "
                     r"'People 2024'"),
            (str(tmp_path / 'plain.csv'), r'--sheet=People: .*plain.csv is not an Excel '
                                          r'workbook \(.xlsx\), which has sheets; leave --sheet out')):
        with pytest.raises(UserError, match=message):
            run_prepare(prepare_csv.prepare_csv, source=source, output_dir=str(tmp_path / 'no'),
                        sheet='People', **table_args())

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(['when', 'share', 'label'])
    for day in range(1, 13):
        sheet.append([datetime.datetime(2024, 1, day, 9 * (day % 2)), day / 8, 'ab'[day % 2]])
        sheet.cell(sheet.max_row, 2).number_format = '0.0%'  # shown as 12.5%: holds 0.125
    sheet['E1'].number_format = '0.0%'  # formatted, empty: not a column
    book.create_sheet('Notes')
    book.save(tmp_path / 'dates.xlsx')
    dtypes, values, schema = prepared_columns(tmp_path, 'dates.xlsx', None)
    assert dtypes == {'when': 'date', 'share': 'float'}
    assert values['share'] == pytest.approx([day / 8 for day in range(1, 13)])
    assert schema['features'][0]['first'] == '2024-01-01 09:00:00'

    (tmp_path / 'old.xls').write_bytes(b'\xd0\xcf\x11\xe0')  # the OLE2 files of Excel 97-2003
    with pytest.raises(UserError, match=r'old.xls: an Excel 97-2003 workbook \(.xls\), which is '
                                        r'not read; save it as an Excel Workbook \(.xlsx\) or as CSV'):
        prepared_columns(tmp_path, 'old.xls', None)
    (tmp_path / 'csv.xlsx').write_text(PEOPLE)
    with pytest.raises(UserError, match=r'csv.xlsx: not an Excel workbook \(.xlsx\) .*; save it '
                                        r'again from Excel, or as CSV'):
        prepared_columns(tmp_path, 'csv.xlsx', None)
    sheet['D5'] = 'stray'
    book.save(tmp_path / 'stray.xlsx')
    with pytest.raises(UserError, match=r"stray.xlsx row 5: 'stray' is past the header's last "
                                        r'column; name its column in the header row, or clear it'):
        prepared_columns(tmp_path, 'stray.xlsx', None)


def test_a_held_out_csv_takes_the_training_tables_types_with_schema_from(tmp_path):
    """Whole numbers alone read as an int column; --schema_from keeps training's float, and
    --split=test writes every row there, beside the training splits, keeping their schema."""
    out = str(tmp_path / 'data')
    run_prepare(prepare_csv.prepare_csv, source=write(tmp_path / 'train.csv', PEOPLE),
                output_dir=out, **table_args())
    schema = json.load(open(os.path.join(out, 'manifest.json')))['schema']
    held_out = write(tmp_path / 'test.csv', 'age,workclass,"hours, per week",score,income\n'
                     '41,Private,38,2,>50K\n29,State-gov,40,1,<=50K\n')
    apart = str(tmp_path / 'apart')
    run_prepare(prepare_csv.prepare_csv, source=held_out, output_dir=apart,
                **table_args(validation_fraction=0.0))
    with pytest.raises(UserError, match="train-00000-of-00002.tfrecord: feature 'score' holds "
                                        'int64 values where the model reads float; write '
                                        'these records .* --schema_from='):
        read_back(apart, schema)

    entries = run_prepare(prepare_csv.prepare_csv, source=held_out, output_dir=out,
                          schema_from=out, split='test', **table_args(label=None))
    assert list(entries) == ['test'] and entries['test']['num_records'] == 2
    manifest = json.load(open(os.path.join(out, 'manifest.json')))
    assert sorted(manifest['splits']) == ['test', 'train'] and manifest['schema'] == schema
    [(features, labels)] = read_back(out, schema, 'test')
    assert sorted(zip(features['score'].numpy().tolist(), labels.numpy().tolist())) == [
        (1.0, b'<=50K'), (2.0, b'>50K')]  # in the seed's order
    with pytest.raises(UserError, match=r'--schema_from=.*train.csv: .* holds no table schema'):
        run_prepare(prepare_csv.prepare_csv, source=held_out, output_dir=apart,
                    schema_from=str(tmp_path / 'train.csv'), **table_args())


def test_a_class_whose_few_rows_all_fell_in_validation_is_still_one_of_the_models(tmp_path):
    """Statistics are the training split's, but a class seen only in validation must have an
    output: else evaluating the validation split stops at its first batch."""
    rows = [f'{i % 7},{"ab"[i % 2]}' for i in range(200)] + [f'3,rare{i}' for i in range(12)]
    out = str(tmp_path / 'data')
    entries = run_prepare(prepare_csv.prepare_csv, output_dir=out,
                          source=write(tmp_path / 'rows.csv', 'x,kind\n' + '\n'.join(rows)),
                          **table_args(label='kind', validation_fraction=0.5))
    label = json.load(open(os.path.join(out, 'manifest.json')))['schema']['label']
    assert label['classes'] == sorted(['a', 'b'] + [f'rare{i}' for i in range(12)])
    train, validation = entries['train']['class_counts'], entries['validation']['class_counts']
    only_held_out = sorted(set(validation) - set(train))
    assert only_held_out and all(name.startswith('rare') for name in only_held_out)
    assert [label['class_counts'][label['classes'].index(name)] for name in only_held_out] == [
        0] * len(only_held_out)
    assert sum(train.values()) == entries['train']['num_records']
    assert sum(validation.values()) == entries['validation']['num_records']


def test_run_sh_reads_the_callers_relative_paths_and_imports_only_the_services_packages(
        tmp_path):
    """`~/svc/run.sh prepare csv --source=people.csv` from the user's folder: its paths are
    the user's, and a folder of theirs named like one of ours is not imported."""
    write(tmp_path / 'people.csv', PEOPLE)
    (tmp_path / 'input_fns').mkdir()
    (tmp_path / 'input_fns' / '__init__.py').write_text('raise SystemExit("the caller\'s '
                                                        'input_fns was imported")\n')
    result = subprocess.run(
        ['bash', os.path.join(REPO, 'run.sh'), 'prepare', 'csv', '--source=people.csv',
         '--label=income', '--output_dir=prepared', '--validation_fraction=0'],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    manifest = json.load(open(tmp_path / 'prepared' / 'manifest.json'))
    assert manifest['splits']['train']['num_records'] == 6


def example(**features):
    message = tf.train.Example()
    for name, value in features.items():
        feature = message.features.feature[name]
        if isinstance(value, str):
            feature.bytes_list.value.append(value.encode())
        elif isinstance(value, int):
            feature.int64_list.value.append(value)
        else:  # a float, or a list of them
            feature.float_list.value.extend(value if isinstance(value, list) else [value])
    return message.SerializeToString()


def write_records(path, records, compression=None):
    with tf.io.TFRecordWriter(str(path), options=compression) as writer:
        for record in records:
            writer.write(record)


def test_prepare_examples_reads_records_in_place_or_reshards_them(tmp_path):
    records = [example(x=float(i), color=['red', 'blue'][i % 2], label=i % 2) for i in range(50)]
    records[3] = example(color='red', label=1)  # x missing
    (tmp_path / 'mine').mkdir()
    write_records(tmp_path / 'mine' / 'part-0.tfrecord', records[:30])
    write_records(tmp_path / 'mine' / 'part-1.tfrecord', records[30:])
    source = str(tmp_path / 'mine' / 'part-*')
    args = dict(source=source, label='label', task=None, max_vocabulary=10, weight_column=None)
    run_prepare(example_tables.prepare_examples, **args, ignore_columns=['color'])
    schema = json.load(open(tmp_path / 'mine' / 'manifest.json'))['schema']
    assert [e['name'] for e in schema['features']] == ['x'] and schema['ignored_columns'] == ['color']
    entries = run_prepare(example_tables.prepare_examples, **args)
    assert entries['train']['num_records'] == 50
    schema = json.load(open(tmp_path / 'mine' / 'manifest.json'))['schema']
    assert [(e['name'], e['dtype'], e['missing']) for e in schema['features']] == [
        ('color', 'string', 0), ('x', 'float', 1)]
    assert schema['label']['classes'] == ['0', '1']
    assert entries['train']['class_counts'] == {'0': 25, '1': 25}
    batches = read_back(str(tmp_path / 'mine'), schema, 'part')
    assert sum(len(labels) for _, labels in batches) == 50

    (tmp_path / 'packed').mkdir()
    write_records(tmp_path / 'packed' / 'part-0.tfrecord.gz', records[:20], 'GZIP')
    write_records(tmp_path / 'packed' / 'part-1.tfrecord.gz', records[20:], 'GZIP')
    packed = str(tmp_path / 'packed' / 'part-*')
    entries = run_prepare(example_tables.prepare_examples, **{**args, 'source': packed})
    assert [s.get('compression') for s in entries['train']['shards']] == ['GZIP', 'GZIP']
    assert sum(len(labels) for _, labels in read_back(str(tmp_path / 'packed'), schema, 'part')) == 50
    training = table_records.make_input_fn(packed, schema, 50, training=True)
    epoch = next(iter(training()))[0]['x'].numpy().tolist()  # a batch of 50: every record once
    assert sorted(epoch) == sorted(batches[0][0]['x'].numpy().tolist())
    with pytest.raises(UserError, match='part-0.tfrecord.gz is GZIP-compressed and .*mine/part-0'
                                        '.tfrecord is not: one file pattern reads one kind'):
        table_records.make_input_fn(f'{packed},{source}', schema, 50, training=True)
    write_records(tmp_path / 'packed' / 'part-2.tfrecord', records[:5])
    with pytest.raises(UserError, match='some files are GZIP-compressed and some are not; .* '
                                        'pass --output_dir to reshard'):
        run_prepare(example_tables.prepare_examples, **{**args, 'source': packed})
    out = str(tmp_path / 'resharded')
    entries = run_prepare(example_tables.prepare_examples, output_dir=out, num_shards=2,
                          **{**args, 'source': str(tmp_path / 'packed' / '*.gz')})
    assert entries['train']['num_records'] + entries['validation']['num_records'] == 50

    (tmp_path / 'junk.tfrecord').write_bytes(b'not a TFRecord file')
    with pytest.raises(UserError, match=r'junk.tfrecord: not a readable TFRecord file after '
                                         r'record 0 \(corrupted record'):
        run_prepare(example_tables.prepare_examples,
                    **{**args, 'source': str(tmp_path / 'junk.tfrecord')})
    write_records(tmp_path / 'not_examples.tfrecord', [b'\x00\x01 not a proto'])
    with pytest.raises(UserError, match='record 1: not a tf.Example'):
        run_prepare(example_tables.prepare_examples,
                    **{**args, 'source': str(tmp_path / 'not_examples.tfrecord')})


def test_held_out_records_go_to_their_split_as_the_model_reads_them(tmp_path):
    """--split with --output_dir puts every record there (it used to write train and validation
    splits over the training shards); --schema_from takes the training data's label and task,
    and refuses a feature of another type or a class the model cannot predict."""
    write_records(tmp_path / 'train.tfrecord',
                  [example(x=float(i), kind='ab'[i % 2]) for i in range(40)])
    data = str(tmp_path / 'data')
    common = dict(task=None, max_vocabulary=10, weight_column=None, output_dir=data)
    run_prepare(example_tables.prepare_examples, source=str(tmp_path / 'train.tfrecord'),
                label='kind', **common)
    trained = sorted(os.listdir(data))
    held_out = dict(common, label=None, split='test', schema_from=data)
    write_records(tmp_path / 'test.tfrecord', [example(x=0.5, kind='b'), example(x=1.5, kind='a')])
    entries = run_prepare(example_tables.prepare_examples,
                          source=str(tmp_path / 'test.tfrecord'), **held_out)
    assert list(entries) == ['test'] and entries['test']['num_records'] == 2
    assert entries['test']['class_counts'] == {'a': 1, 'b': 1}
    assert sorted(os.listdir(data)) == sorted(trained + ['test-00000-of-00002.tfrecord',
                                                         'test-00001-of-00002.tfrecord'])
    manifest = json.load(open(f'{data}/manifest.json'))
    assert manifest['schema']['statistics_of'] == 'train'  # the training data's, kept

    write_records(tmp_path / 'other.tfrecord', [example(x=1, kind='a')])  # int64, not float
    with pytest.raises(UserError, match=r"^--source=.*other.tfrecord: feature 'x' holds int "
                                        r"values, where the training data \(--schema_from=.*data\)"
                                        r" has float; write it as the training records do$"):
        run_prepare(example_tables.prepare_examples,
                    source=str(tmp_path / 'other.tfrecord'), **held_out)
    write_records(tmp_path / 'new.tfrecord', [example(x=1.0, kind='c')])
    for output_dir in (data, None):  # resharded, or described in place
        with pytest.raises(UserError, match=r"^--source=.*new.tfrecord: label 'kind' holds "
                                            r"classes the training data .* does not: 'c' "
                                            r"\(1 rows\)"):
            run_prepare(example_tables.prepare_examples, source=str(tmp_path / 'new.tfrecord'),
                        **dict(held_out, output_dir=output_dir))
    assert sorted(os.listdir(data)) == sorted(trained + ['test-00000-of-00002.tfrecord',
                                                         'test-00001-of-00002.tfrecord'])
    assert not (tmp_path / 'manifest.json').exists()


def test_a_glob_of_the_whole_folder_means_its_records_not_the_manifest_beside_them(tmp_path,
                                                                                   monkeypatch):
    records = [example(x=float(i), label=i % 2) for i in range(20)]
    (tmp_path / 'mine').mkdir()
    write_records(tmp_path / 'mine' / 'a', records[:12])
    write_records(tmp_path / 'mine' / 'b', records[12:])
    everything = str(tmp_path / 'mine' / '*')
    args = dict(source=everything, label='label', task=None, max_vocabulary=10,
                weight_column=None)
    for _ in range(2):  # the second time, manifest.json is in the folder the glob names
        entries = run_prepare(example_tables.prepare_examples, **args)
        assert [s['file'] for s in entries['train']['shards']] == ['a', 'b']
    schema = json.load(open(tmp_path / 'mine' / 'manifest.json'))['schema']
    training = table_records.make_input_fn(everything, schema, 20, training=True)
    assert sorted(next(iter(training()))[0]['x'].numpy().tolist()) == list(range(20))

    with pytest.raises(UserError, match=r"--source=.*mine: a folder; give a glob of its "
                                        r"files: --source='.*mine/\*'$"):
        run_prepare(example_tables.prepare_examples, **{**args, 'source': str(tmp_path / 'mine')})
    with pytest.raises(UserError, match=r"--source=.*mine/: a folder; give a glob of its "
                                        r"files: --source='.*mine/\*.csv'$"):
        run_prepare(prepare_csv.prepare_csv, **table_args(source=f'{tmp_path / "mine"}/'))

    # A second value, in the second file's fourth record: past the sample the features' forms
    # are read from (within it, x would be a list of any length: tests/test_list_features.py).
    monkeypatch.setattr(example_tables, 'SAMPLE_RECORDS', 12)
    write_records(tmp_path / 'mine' / 'b', records[12:15] + [
        example(x=[1.0, 2.0], label=0)])
    with pytest.raises(UserError, match=r"mine/b record 4, feature 'x': 2 values, where the "
                                        r'first records hold one float'):
        run_prepare(example_tables.prepare_examples, **args)


@pytest.mark.parametrize('in_memory', [True, False], ids=['in_memory', 'streamed_windows'])
def test_training_input_gives_every_row_once_an_epoch_in_a_new_order(tmp_path, monkeypatch,
                                                                     in_memory):
    """The training input_fn parses windows of rows and permutes them (all rows at once when
    they fit in memory): each epoch is every row once, batches whole, each epoch reordered."""
    rows, batch = 230, 20  # the epochs meet inside a batch, as a stream of records would
    text = 'id,color,label\n' + ''.join(f'{i},{"red" if i % 3 else "blue"},{"yes" if i % 2 else "no"}\n'
                                        for i in range(rows))
    out = str(tmp_path / 'out')
    run_prepare(prepare_csv.prepare_csv, source=write(tmp_path / 't.csv', text), output_dir=out,
                **table_args(label='label', num_shards=3))
    schema = json.load(open(os.path.join(out, 'manifest.json')))['schema']
    if not in_memory:
        monkeypatch.setattr(pipeline, 'IN_MEMORY_BYTES', 0)
    input_fn = table_records.make_input_fn(os.path.join(out, 'train-*'), schema, batch, True,
                                           shuffle_buffer=64)
    ids, labels = [], []
    for features, label in input_fn().take(2 * rows // batch + 1):
        assert features['id'].shape == (batch,) and features['color'].shape == (batch,)
        ids.extend(features['id'].numpy().tolist())
        labels.extend(label.numpy().tolist())
    assert [{'yes': 1, 'no': 0}[value.decode()] for value in labels] == [i % 2 for i in ids]
    first, second = ids[:rows], ids[rows:2 * rows]
    assert sorted(first) == sorted(second) == list(range(rows))
    assert first != second and first != sorted(first)


def test_csv_rows_written_with_csv_module_quotes_read_back(tmp_path):
    path = tmp_path / 'quoted.csv'
    with open(path, 'w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(['text', 'label'])
        writer.writerow(['a "quoted", multi\nline value', 'yes'])
        writer.writerow(['plain', 'no'])
    rows = list(csv_files.read_rows(str(path)))
    assert rows[1] == (3, ['a "quoted", multi\nline value', 'yes'])


def test_rows_encoded_as_wire_bytes_parse_to_the_examples_the_messages_make():
    names, dtypes = ['n', 'x', 'text'], ['int', 'float', 'string']
    for values in ([39, 1.5, 'Private'], [-7, None, 'é, "quoted"'], [2 ** 40, 0.1, None],
                   [None, None, 'x' * 300]):
        expected = tf.train.Example()
        for name, dtype, value in zip(names, dtypes, values):
            if value is None:
                continue
            feature = expected.features.feature[name]
            {'int': feature.int64_list, 'float': feature.float_list}.get(
                dtype, feature.bytes_list).value.append(value.encode() if dtype == 'string'
                                                        else value)
        assert tf.train.Example.FromString(
            table_records.encode_example(names, dtypes, values)) == expected


def test_table_shards_that_do_not_match_their_manifest_are_refused_by_name(tmp_path):
    out = str(tmp_path / 'out')
    run_prepare(prepare_csv.prepare_csv, source=write(tmp_path / 'p.csv', PEOPLE), output_dir=out,
                **table_args())
    schema = json.load(open(os.path.join(out, 'manifest.json')))['schema']
    shard = sorted(glob.glob(os.path.join(out, 'train-*')))[0]
    with open(shard, 'r+b') as f:
        f.truncate(os.path.getsize(shard) - 3)
    with pytest.raises(UserError, match=f'{shard}: .* it was cut short or damaged'):
        read_back(out, schema)
