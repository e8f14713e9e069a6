"""A table's rows read one way (input_fns/tables/table_reading.py) by prepare csv, by a held-out table
prepared --schema_from and by --mode=predict: the schema's missing markers and number styles;
and numbers the records cannot hold (beyond int64, beyond float32) never stored damaged."""
import glob
import json
import logging
import os
import shutil

import pytest
import tensorflow as tf

from common.errors import UserError
from helpers import assert_one_line_error, run_module, run_prepare
from input_fns.tables import csv_tables, example_tables, prepare_csv, table_reading
from test_canned import trainer
from test_tables import read_back, table_args, write
from trainer.serving import predict_table


def training_table() -> str:
    """x: -999 marks a missing x; amount: thousands grouped by a comma, which 12,345,678
    settles; the label goes by x."""
    lines = ['x,amount,label']
    for row, amount in enumerate(['12,345,678', '1,234', '5,678', '987'] * 20):
        x = '-999' if row % 5 == 0 else f'{row % 7 / 7:.3f}'
        lines.append(f'{x},"{amount}",{"high" if row % 7 > 3 else "low"}')
    return '\n'.join(lines) + '\n'


def prepared(tmp_path, text=None, name='train.csv', **overrides):
    out = str(tmp_path / name.replace('.csv', ''))
    run_prepare(prepare_csv.prepare_csv, source=write(tmp_path / name, text or training_table()),
                output_dir=out, **table_args(**{'label': 'label', **overrides}))
    return out, json.load(open(os.path.join(out, 'manifest.json')))['schema']


def test_the_schema_records_the_missing_markers_and_styles_a_held_out_table_reads_with(tmp_path):
    out, schema = prepared(tmp_path, na_values=['-999'])
    entries = {entry['name']: entry for entry in schema['features']}
    assert entries['x']['missing'] == 16 and entries['x']['min'] >= 0  # -999 is no number
    assert entries['amount']['number_style']['thousands'] == ','
    assert '-999' in schema['na_values'] and schema['float_overflow'] == 'error'
    # A held-out table whose rows alone settle nothing reads as the training rows did: its
    # -999 is missing and its 1,234 is 1234 (it was refused), without the flags again.
    held_out = write(tmp_path / 'test.csv', 'x,amount,label\n-999,"1,234",high\n0.5,"5,678",low\n')
    run_prepare(prepare_csv.prepare_csv, source=held_out, output_dir=out, schema_from=out,
                split='test', **table_args(label=None, na_values=None))
    [(features, _)] = read_back(out, schema, 'test')  # in the seed's order: compare as rows
    rows = zip(features['x_missing'].numpy().tolist(), features['amount'].numpy().tolist())
    assert sorted(rows) == [(b'', 5678), (b'missing', 1234)]


def test_a_schema_without_the_reading_reads_as_before():
    """An older manifest (no na_values, float_overflow or number styles): today's defaults."""
    reading = table_reading.TableReading.of_schema({'kind': 'table', 'features': [
        {'name': 'x', 'dtype': 'float'}, {'name': 'when', 'dtype': 'date'}],
        'label': {'name': 'y', 'dtype': 'string'}})
    assert reading == table_reading.TableReading(date_formats={'when': 'iso'})
    assert reading.na_values >= {'', 'NA', '?'} and reading.float_overflow == 'error'


@pytest.fixture(scope='module')
def export(tmp_path_factory):
    """A linear classifier trained on TRAINING, prepared with --na_values=-999, exported."""
    folder = tmp_path_factory.mktemp('reading')
    prepared(folder, name='data.csv', na_values=['-999'], validation_fraction=0.25)
    common = ['--model=linear_classifier', f'--model_dir={folder}/run',
              f'--train_files={folder}/data/train-*', f'--eval_files={folder}/data/validation-*']
    trainer(*common, '--mode=train', '--train_steps=40', '--batch_size=16')
    trainer(*common, '--mode=export', f'--export_dir={folder}/exports')
    return folder


def predicted(folder, name, text, saved_model=None):
    result = trainer('--mode=predict', saved_model or f'--saved_model={folder}/exports',
                     write(folder / name, text), check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return [json.loads(line)['probabilities'] for line in result.stdout.strip().splitlines()]


def test_predict_reads_rows_as_prepare_read_the_training_rows(export):
    """-999 is missing at predict as in training; 1,234 is 1234, not refused."""
    rows = predicted(export, 'rows.csv', 'x,amount\n-999,"1,234"\n,1234\n0.5,"1,234"\n0.5,1234\n')
    assert rows[0] == rows[1] and rows[2] == rows[3] and rows[0] != rows[2]
    as_json = predicted(export, 'rows.jsonl', '{"x": -999, "amount": "1,234"}\n'
                                              '{"x": null, "amount": 1234}\n')
    assert as_json == rows[:2]
    # An export made before the reading was kept has the training rows' file format alone, and
    # predict reads as it did then: -999 a number, a column's style from the file's rows.
    [version] = glob.glob(f'{export}/exports/[0-9]*')
    older = shutil.copytree(version, export / 'older' / '1')
    kept = os.path.join(older, 'assets.extra', 'table_reading.json')
    write(os.path.join(older, 'assets.extra', 'csv_format.json'),
          json.dumps(json.load(open(kept))['csv_format']))
    os.remove(kept)
    before = predicted(export, 'plain.csv', 'x,amount\n-999,1234\n,1234\n0.5,1234\n',
                       f'--saved_model={older}')
    assert before[1:] == [rows[1], rows[3]] and before[0] != rows[1]


def wide_table(tmp_path, **overrides):
    return prepared(tmp_path, 'account,count,label\n12345678901234567890,1,a\n'
                    '98765432109876543210,2,b\n5,3,a\n', name='accounts.csv', **overrides)


def test_whole_numbers_beyond_int64_are_text_and_never_wrapped(tmp_path, caplog, monkeypatch):
    caplog.set_level(logging.WARNING)
    out, schema = wide_table(tmp_path)
    assert {entry['name']: entry['dtype'] for entry in schema['features']} == {
        'account': 'string', 'count': 'int'}
    assert "column 'account': whole numbers beyond int64 (such as '12345678901234567890'), " \
           'read as text' in caplog.text
    [(features, _)] = read_back(out, schema)
    assert sorted(features['account'].numpy().tolist()) == [
        b'12345678901234567890', b'5', b'98765432109876543210']
    # int64's least value marks a missing int: a column holding it is text too.
    _, schema = prepared(tmp_path, 'n,label\n-9223372036854775808,a\n,b\n7,a\n', name='least.csv')
    assert schema['features'][0]['dtype'] == 'string'
    # Given as int, or past the first rows: one line naming the row, never a wrapped value.
    with pytest.raises(UserError, match=r"accounts.csv line 2, column 'account': "
                       r"'12345678901234567890' is beyond int64's range .* \(as --column_types "
                       r"says\); pass --column_types=account:string"):
        wide_table(tmp_path, column_types='account:int')
    monkeypatch.setattr(csv_tables, 'SAMPLE_ROWS', 1)
    with pytest.raises(UserError, match=r"line 3, column 'count': '9223372036854775808' is "
                                        r"beyond int64's range"):
        prepared(tmp_path, 'count,label\n1,a\n9223372036854775808,b\n', name='later.csv')


def test_a_record_holding_int64s_least_value_is_refused(tmp_path):
    path = str(tmp_path / 'rows.tfrecord')
    with tf.io.TFRecordWriter(path) as writer:
        for value in (5, -2 ** 63):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                'n': tf.train.Feature(int64_list=tf.train.Int64List(value=[value])),
                'label': tf.train.Feature(bytes_list=tf.train.BytesList(value=[b'a']))}))
                .SerializeToString())
    with pytest.raises(UserError, match=r"rows.tfrecord record 2, feature 'n': "
                                        r"-9223372036854775808, the value that marks a missing"):
        run_prepare(example_tables.prepare_examples, source=path, label='label',
                    output_dir=str(tmp_path / 'out'), task=None, max_vocabulary=10,
                    weight_column=None, validation_fraction=0.0)


BIG = 'x,label\n1.5,a\n1e39,b\n-2e39,a\n3.4028235e38,b\n'


def test_a_float_beyond_float32_is_one_line_or_inf_where_asked(tmp_path):
    with pytest.raises(UserError, match=r"big.csv line 3, column 'x': '1e39' is beyond "
                       r"float32's range \(±3.4e38\), which the records hold; pass "
                       r"--float_overflow=inf to store it as inf"):
        prepared(tmp_path, BIG, name='big.csv')
    out, schema = prepared(tmp_path, BIG, name='big.csv', float_overflow='inf')
    entry = schema['features'][0]
    assert schema['float_overflow'] == 'inf' and entry['infinite'] == 2
    assert entry['max'] == pytest.approx(3.4028235e38) and entry['count'] == 2
    [(features, _)] = read_back(out, schema)
    assert sorted(features['x'].numpy().tolist()) == [float('-inf'), 1.5,
                                                      pytest.approx(3.4028235e38), float('inf')]


def test_prepare_csv_on_a_float_beyond_float32_exits_2_in_one_line(tmp_path):
    result = run_module('input_fns.prepare', 'csv', f'--source={write(tmp_path / "big.csv", BIG)}',
                        '--label=label', f'--output_dir={tmp_path}/out', check=False)
    assert_one_line_error(result, 2, 'big.csv line 3', "column 'x'", "'1e39'",
                          '--float_overflow=inf')


def test_predict_reads_a_float_beyond_float32_as_its_schema_says(tmp_path):
    path = write(tmp_path / 'rows.csv', 'x\n1e39\n')
    with pytest.raises(UserError, match=r"rows.csv line 2, column 'x': '1e39' is beyond "
                                        r"float32's range .*, as the model takes it"):
        list(predict_table.examples(path, {'x': 'float'}, {'csv_format': {}}))
    [(_, serialized)] = predict_table.examples(path, {'x': 'float'}, {'float_overflow': 'inf'})
    assert tf.train.Example.FromString(serialized).features.feature['x'].float_list.value == [
        float('inf')]
