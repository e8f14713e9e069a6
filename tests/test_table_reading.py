"""A table's rows read one way (input_fns/table_reading.py) by prepare csv, by a held-out table
prepared --schema_from and by --mode=predict: the schema's missing markers and number styles."""
import glob
import json
import os
import shutil

import pytest

from helpers import run_prepare
from input_fns import prepare_csv, table_reading
from test_canned import trainer
from test_tables import read_back, table_args, write


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
    assert '-999' in schema['na_values']
    # A held-out table whose rows alone settle nothing reads as the training rows did: its
    # -999 is missing and its 1,234 is 1234 (it was refused), without the flags again.
    held_out = write(tmp_path / 'test.csv', 'x,amount,label\n-999,"1,234",high\n0.5,"5,678",low\n')
    run_prepare(prepare_csv.prepare_csv, source=held_out, output_dir=out, schema_from=out,
                split='test', **table_args(label=None, na_values=None))
    [(features, _)] = read_back(out, schema, 'test')
    assert features['x_missing'].numpy().tolist() == [b'missing', b'']
    assert features['amount'].numpy().tolist() == [1234, 5678]


def test_a_schema_without_the_reading_reads_as_before():
    """An older manifest (no na_values, float_overflow or number styles): today's defaults."""
    reading = table_reading.TableReading.of_schema({'kind': 'table', 'features': [
        {'name': 'x', 'dtype': 'float'}, {'name': 'when', 'dtype': 'date'}],
        'label': {'name': 'y', 'dtype': 'string'}})
    assert reading == table_reading.TableReading(date_formats={'when': 'iso'})
    assert reading.na_values >= {'', 'NA', '?'}


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
