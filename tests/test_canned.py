"""The canned models over a prepared table, through the CLI: training, the eval job's ledger and
best export, TensorBoard's metrics, status, the export's signatures and warm-up, the export as
TF Serving's C++ loader runs it (warm-up, Classify, Regress, a REST body), predict on rows, and
the errors for a model that does not fit its data or params."""
import glob
import json
import os
import random

import pytest
import tensorflow as tf

from helpers import (assert_fragments, assert_one_line_error, csv_as_workbook, run_module,
                     run_prepare, trainer_user_error)
from input_fns.prepare import command as prepare
from input_fns.tables import prepare_csv
from serving_loader_checks import assert_same_answers, check_against_python

STEPS = ['--train_steps=40', '--save_checkpoints_steps=20', '--batch_size=16',
         '--log_every_n_steps=20']


def write_table(path, label_of, rows=240, seed=0):
    """age (int), color (text, some missing), x (float), weight (float), then the label."""
    rng = random.Random(seed)
    with open(path, 'w') as f:
        f.write('age,color,x,weight,label\n')
        for _ in range(rows):
            age, color, x = rng.randint(18, 80), rng.choice(['red', 'blue', 'green', '']), rng.random()
            f.write(f'{age},{color},{x:.3f},{rng.choice([1.0, 2.0])},{label_of(age, color, x)}\n')
    return str(path)


def prepared(tmp_path_factory, name, label_of, **overrides):
    folder = tmp_path_factory.mktemp(name)
    source = write_table(folder / 'table.csv', label_of)
    args = dict(source=source, label='label', column_types=None, task=None, max_vocabulary=100,
                na_values=['', 'NA'], validation_fraction=0.25, num_shards=2,
                num_eval_shards=1, weight_column=None)
    args.update(overrides)
    run_prepare(prepare_csv.prepare_csv, output_dir=str(folder / 'data'), **args)
    return str(folder)


@pytest.fixture(scope='module')
def binary(tmp_path_factory):
    return prepared(tmp_path_factory, 'binary', lambda age, color, x: 'rich' if age > 45 else 'poor',
                    weight_column='weight')


def files_flags(folder):
    return [f'--train_files={folder}/data/train-*', f'--eval_files={folder}/data/validation-*']


def trainer(*args, check=True):
    return run_module('trainer.main', *args, check=check)


def last_json(result):
    return json.loads(result.stdout.strip().splitlines()[-1])


def validation_records(folder):
    """The validation shard's serialized tf.Examples: its file, and the records."""
    [path] = glob.glob(f'{folder}/data/validation-*')
    return path, [record.numpy() for record in tf.data.TFRecordDataset(path)]


def loader_lines(lines, key):
    return {line[key]: line['outputs'] for line in lines if key in line}


def test_dnn_classifier_trains_then_the_eval_job_exports_the_best_and_it_serves(binary,
                                                                                serving_loader):
    model_dir, export_dir = f'{binary}/run', f'{binary}/exports'
    common = ['--model=dnn_classifier', f'--model_dir={model_dir}', *files_flags(binary)]
    trainer(*common, '--mode=train', *STEPS, '--hidden_units=16,8')
    trainer(*common, '--mode=continuous_eval', '--eval_name=validation',
            f'--export_dir={export_dir}', '--export_metric=accuracy')
    ledger = json.load(open(f'{model_dir}/eval_validation/results/step-000000040.json'))
    assert {'accuracy', 'auc', 'precision', 'recall'} <= set(ledger['metrics'])
    assert os.path.exists(f'{export_dir}/best')
    status = run_module('trainer.observe.status', f'--model_dir={model_dir}').stdout
    assert 'eval_validation' in status and 'best ->' in status

    version = f'{export_dir}/{open(f"{export_dir}/best").read().strip()}'
    signatures = tf.saved_model.load(version).signatures
    assert sorted(signatures) == ['classify', 'predict_examples', 'regress', 'serving_default']
    assert sorted(signatures['serving_default'].structured_input_signature[1]) == [
        'age', 'color', 'x']  # the weight column is not an input
    rest = signatures['serving_default'](age=tf.constant([70, 20], tf.int64),
                                         color=tf.constant(['red', 'purple']),
                                         x=tf.constant([0.5, 0.5]))
    assert rest['classes'].numpy()[:, 0].tolist() == [b'rich', b'poor']
    # As TF Serving runs it, in C++: every warm-up request (check_against_python), Classify and
    # Regress of the validation rows, and the REST body of the rows above.
    body = f'{binary}/rest_body.json'
    with open(body, 'w') as f:
        json.dump({'instances': [{'age': 70, 'color': 'red', 'x': 0.5},
                                 {'age': 20, 'color': 'purple', 'x': 0.5}]}, f)
    examples, records = validation_records(binary)
    lines = check_against_python(serving_loader, version, examples, body)
    assert_same_answers(loader_lines(lines, 'rest_body')[body], {k: v.numpy() for k, v in rest.items()})
    classified = signatures['classify'](inputs=tf.constant(records))
    assert_same_answers(loader_lines(lines, 'classify')['classify'],
                        {k: v.numpy() for k, v in classified.items()})
    assert loader_lines(lines, 'regress')['regress']['outputs']['shape'] == [len(records), 1]

    rows = f'{binary}/rows.jsonl'
    with open(rows, 'w') as f:
        f.write('{"age": 75, "color": "red"}\n{"age": 19, "x": 0.1}\n')
    spreadsheet = f'{binary}/spreadsheet.csv'  # the table as Excel writes it where 0,5 is a half
    with open(f'{binary}/table.csv') as f, open(spreadsheet, 'w', encoding='utf-8-sig') as out:
        out.write(f.read().replace(',', ';').replace('.', ','))
    lines = [json.loads(line) for line in trainer(
        '--mode=predict', f'--saved_model={export_dir}/best', rows, f'{binary}/table.csv',
        spreadsheet).stdout.strip().splitlines()]
    assert [line['classes'] for line in lines[:2]] == ['rich', 'poor']
    assert len(lines) == 2 + 240 + 240
    assert [line['probabilities'] for line in lines[2 + 240:]] == [
        line['probabilities'] for line in lines[2:2 + 240]]
    tabbed = f'{binary}/tabbed.tsv'  # tabs and decimal commas: --decimal says so
    with open(spreadsheet, encoding='utf-8-sig') as f, open(tabbed, 'w') as out:
        out.write(f.read().replace(';', '\t'))
    assert_one_line_error(trainer('--mode=predict', f'--saved_model={export_dir}/best', tabbed,
                                  check=False), 2, f'{tabbed} line 2, column \'x\':',
                          'pass --decimal=, if the file writes numbers so')
    tab_lines = [json.loads(line) for line in trainer(
        '--mode=predict', f'--saved_model={export_dir}/best', '--decimal=,',
        tabbed).stdout.strip().splitlines()]
    assert [line['probabilities'] for line in tab_lines] == [
        line['probabilities'] for line in lines[2:2 + 240]]
    windows = f'{binary}/windows.csv'  # Excel on Windows: its code page, not UTF-8
    with open(f'{binary}/table.csv') as f, open(windows, 'w', encoding='cp1252') as out:
        out.write(f.read() + '70,ros\u00e9,0.5,1.0,rich\n')
    assert_one_line_error(trainer('--mode=predict', f'--saved_model={export_dir}/best', windows,
                                  check=False), 2, f'{windows}: not UTF-8 text (near line 242); '
                          'pass --encoding=cp1252 if Excel on Windows saved it')
    windows_lines = [json.loads(line) for line in trainer(
        '--mode=predict', f'--saved_model={export_dir}/best', '--encoding=cp1252',
        windows).stdout.strip().splitlines()]
    assert [line['probabilities'] for line in windows_lines[:240]] == [
        line['probabilities'] for line in lines[2:2 + 240]] and len(windows_lines) == 241
    with open(f'{binary}/table.csv') as f:  # the rows kept in Excel: typed cells
        book = csv_as_workbook(f.read(), f'{binary}/table.xlsx')
    book_lines = [json.loads(line) for line in trainer(
        '--mode=predict', f'--saved_model={export_dir}/best', book).stdout.strip().splitlines()]
    assert [line['probabilities'] for line in book_lines] == [
        line['probabilities'] for line in lines[2:2 + 240]]
    assert book_lines[0]['file'] == book and book_lines[0]['line'] == 2
    with open(f'{binary}/table.csv') as f:  # the rows in a second sheet: --sheet names it
        second = csv_as_workbook(f.read(), f'{binary}/second.xlsx', 'Rows', notes_first=True)
    assert [json.loads(line)['probabilities'] for line in trainer(
        '--mode=predict', f'--saved_model={export_dir}/best', '--sheet=Rows',
        second).stdout.strip().splitlines()] == [line['probabilities'] for line in book_lines]
    old = f'{binary}/old.xls'  # Excel 97-2003: one line, not "not an image"
    with open(old, 'wb') as f:
        f.write(b'\xd0\xcf\x11\xe0')
    assert_one_line_error(trainer('--mode=predict', f'--saved_model={export_dir}/best', old,
                                  check=False), 2, f'{old}: an Excel 97-2003 workbook (.xls), '
                          'which is not read; save it as an Excel Workbook (.xlsx) or as CSV')
    latin1 = f'{binary}/latin1.jsonl'
    with open(latin1, 'wb') as f:
        f.write('{"age": 75, "color": "r\u00e9d"}\n'.encode('latin-1'))
    assert_one_line_error(trainer('--mode=predict', f'--saved_model={export_dir}/best', latin1,
                                  check=False), 2,
                          f'{latin1}: not UTF-8 text; save the file as UTF-8')


def test_linear_and_wide_deep_classifiers_report_each_class_and_the_confusion_matrix(
        tmp_path_factory, serving_loader):
    folder = prepared(tmp_path_factory, 'three', lambda age, color, x: 'abc'[age % 3])
    for model, extra in (('linear_classifier', ['--crosses=age:color']),
                         ('wide_deep_classifier', ['--hidden_units=8'])):
        common = [f'--model={model}', f'--model_dir={folder}/{model}', *files_flags(folder)]
        trainer(*common, '--mode=train', *STEPS, *extra)
        metrics = last_json(trainer(*common, '--mode=evaluate'))
        assert {'accuracy', 'accuracy_of_class/a', 'accuracy_of_class/c'} <= set(metrics)
    # The crossed columns' export as TF Serving's C++ loader runs it (wide_deep's parts are the
    # linear and the dnn classifiers' own).
    saved = last_json(trainer('--model=linear_classifier', '--mode=export',
                              f'--model_dir={folder}/linear_classifier',
                              f'--export_dir={folder}/exports'))['saved_model']
    examples, records = validation_records(folder)
    lines = check_against_python(serving_loader, saved, examples)
    assert loader_lines(lines, 'classify')['classify']['scores']['shape'] == [len(records), 3]
    events = tf.io.gfile.glob(f'{folder}/linear_classifier/eval_default/events.*')
    tags = {value.tag for path in events for event in tf.compat.v1.train.summary_iterator(path)
            for value in event.summary.value}
    assert 'confusion_matrix/0' in tags  # the image


def test_dnn_regressor_on_a_number_label(tmp_path_factory, serving_loader):
    folder = prepared(tmp_path_factory, 'number', lambda age, color, x: round(age * 0.1 + x, 3))
    common = ['--model=dnn_regressor', f'--model_dir={folder}/run', *files_flags(folder)]
    trainer(*common, '--mode=train', *STEPS)
    assert 'average_loss' in last_json(trainer(*common, '--mode=evaluate'))
    saved = last_json(trainer(*common, '--mode=export', f'--export_dir={folder}/exports'))
    assert 'regress' in tf.saved_model.load(saved['saved_model']).signatures
    examples, records = validation_records(folder)  # TF Serving's Regress, in C++
    lines = check_against_python(serving_loader, saved['saved_model'], examples)
    assert loader_lines(lines, 'regress')['regress']['outputs']['shape'] == [len(records), 1]


def test_a_regressor_learns_a_label_in_the_hundreds_of_thousands(tmp_path_factory):
    """The head predicts logits * std + mean: Ftrl's small steps on the raw label left a linear
    model predicting about 10 for a price of 250,000."""
    folder = prepared(tmp_path_factory, 'price',
                      lambda age, color, x: round(100_000 + 50_000 * x + 2_000 * age))
    label = json.load(open(f'{folder}/data/manifest.json'))['schema']['label']
    common = ['--model=linear_regressor', f'--model_dir={folder}/run', *files_flags(folder)]
    trainer(*common, '--mode=train', '--train_steps=300', '--batch_size=32')
    evaluated = last_json(trainer(*common, '--mode=evaluate'))
    assert evaluated['average_loss'] < 0.1 * label['std'] ** 2, (evaluated, label['std'])
    assert abs(evaluated['prediction/mean'] - evaluated['label/mean']) < 0.1 * label['std']


def test_a_model_that_does_not_fit_its_data_or_params_is_one_line(binary, tmp_path):
    common = [f'--model_dir={tmp_path}/run', *files_flags(binary), '--mode=train', *STEPS]
    result = trainer('--model=dnn_regressor', *common, check=False)
    assert_one_line_error(result, 2, "--model=dnn_regressor: the label 'label' is a "
                          'classification label; pass --model=dnn_classifier')
    assert not os.path.exists(f'{tmp_path}/run/flags.txt')  # refused before anything was written
    # The same checks in this process (the subprocess above showed the command prints them).
    assert_fragments(trainer_user_error('--model=dnn_classifier', '--crosses=age:color', *common),
                     '--crosses: a param of', 'not of dnn_classifier')
    assert 'the canned models compute in float32 only' in trainer_user_error(
        '--model=dnn_classifier', '--precision=mixed_bfloat16', *common)
    assert "--crosses: no feature 'size'" in trainer_user_error('--model=linear_classifier',
                                                                '--crosses=age:size', *common)
    digits = str(tmp_path / 'digits')
    run_prepare(prepare.prepare_csv_example, output_dir=digits, num_shards=1, num_eval_shards=1,
                rows_per_shard=4, num_features=3)
    assert_fragments(trainer_user_error('--model=dnn_classifier', f'--model_dir={tmp_path}/run2',
                                        '--mode=train', f'--train_files={digits}/train-*'),
                     'no data schema in it', 'prepare csv')


def test_train_and_evaluate_stops_a_canned_model_early_on_its_ledger(binary, tmp_path):
    """A learning rate so small that accuracy cannot change: no improvement after the first
    evaluation, so training stops long before --train_steps."""
    model_dir = tmp_path / 'run'
    trainer('--model=linear_classifier', f'--model_dir={model_dir}', *files_flags(binary),
            '--mode=train_and_evaluate', '--train_steps=1000', '--save_checkpoints_steps=5',
            '--batch_size=16', '--learning_rate=1e-9', '--eval_throttle_secs=0',
            '--early_stopping_eval_name=default', '--early_stopping_metric=accuracy',
            '--early_stopping_patience=2', '--early_stopping_check_secs=0')
    finished = json.loads((model_dir / 'train_finished.json').read_text())
    assert finished['early_stopped'] and finished['step'] < 1000
    assert os.path.exists(model_dir / 'eval_default' / 'results')


def test_a_tuner_objective_is_checked_against_what_the_canned_model_reports():
    from common.errors import UserError
    from trainer.config import search_space
    assert search_space.parse_objective('auc:maximize', 'dnn_classifier').metric == 'auc'
    assert search_space.parse_objective('average_loss:minimize', 'linear_regressor')
    assert search_space.parse_objective('accuracy:maximize', 'image_classifier')  # 'images' data
    with pytest.raises(UserError, match="linear_regressor's evaluation does not report accuracy"):
        search_space.parse_objective('accuracy:maximize', 'linear_regressor')


def test_predict_reads_new_rows_as_the_training_rows_were_read(tmp_path_factory):
    """A table saved by Excel on Windows in a German locale (cp1252, tab-separated, 1.234,5):
    the export keeps how prepare read it, so predict reads such rows without the flags again,
    a UTF-8 file as UTF-8 (never as cp1252), and a file of another delimiter as detected."""
    rng = random.Random(1)
    rows = [(rng.choice(['München', 'Zürich', 'Köln', 'Genève']), rng.uniform(10, 3000))
            for _ in range(200)]
    folder = tmp_path_factory.mktemp('german')

    def write(name, delimiter, number, encoding):
        with open(folder / name, 'w', encoding=encoding) as f:
            f.write(delimiter.join(['stadt', 'betrag', 'label']) + '\n')
            for city, amount in rows:
                f.write(delimiter.join([city, number(amount),
                                        'hoch' if amount > 1000 else 'niedrig']) + '\n')
        return str(folder / name)
    german = lambda amount: f'{amount:,.2f}'.replace(',', ' ').replace('.', ',').replace(' ', '.')
    windows = write('umsatz.txt', '\t', german, 'cp1252')
    run_prepare(prepare_csv.prepare_csv, source=windows, output_dir=str(folder / 'data'),
                label='label', column_types=None, task=None, max_vocabulary=100,
                na_values=[''], validation_fraction=0.25, num_shards=2, num_eval_shards=1,
                weight_column=None, decimal=',', thousands='.', encoding='cp1252')
    common = ['--model=linear_classifier', f'--model_dir={folder}/run', *files_flags(folder)]
    trainer(*common, '--mode=train', *STEPS)
    saved = last_json(trainer(*common, '--mode=export', f'--export_dir={folder}/exports'))
    kept = json.load(open(f'{saved["saved_model"]}/assets.extra/table_reading.json'))
    assert kept['csv_format'] == {'delimiter': '\t', 'decimal': ',', 'thousands': '.',
                                  'encoding': 'cp1252'}
    assert kept['na_values'] == [''] and kept['features'][1]['number_style']['thousands'] == '.'

    def probabilities(*args):
        result = trainer('--mode=predict', f'--saved_model={folder}/exports', *args)
        return [json.loads(line)['probabilities'] for line in result.stdout.strip().splitlines()]
    told = probabilities('--decimal=,', '--thousands=.', '--encoding=cp1252', windows)
    assert len(told) == 200 and probabilities(windows) == told
    assert probabilities(write('umsatz_utf8.txt', '\t', german, 'utf-8')) == told
    assert probabilities(write('plain.csv', ',', lambda amount: f'{amount:.2f}', 'utf-8')) == told
