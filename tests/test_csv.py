"""CSV input: generated shards, batched decoding, clear errors, and the csv_mlp model through the CLI."""
import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from helpers import run_module, run_prepare
from serving_loader_checks import check_against_python
from input_fns.prepare import command as prepare
from input_fns.tables import csv_records


@pytest.fixture(scope='module')
def mlp_csv(tmp_path_factory):
    """The csv_mlp model's data in small: 2 training shards and 1 validation shard of 1,024 floats."""
    out = str(tmp_path_factory.mktemp('csv'))
    run_prepare(prepare.prepare_csv_example, output_dir=out, num_shards=2, num_eval_shards=1,
                rows_per_shard=24, num_features=1024, seed=5)
    return out


def collect(input_fn):
    rows, labels = [], []
    for features, label in input_fn():
        rows.append(features['inputs'].numpy())
        labels.append(label.numpy())
    return np.concatenate(rows), np.concatenate(labels)


def test_shards_parse_to_the_values_written(tmp_path):
    out = str(tmp_path)
    entries = run_prepare(prepare.prepare_csv_example, output_dir=out, num_shards=3, num_eval_shards=1,
                rows_per_shard=7, num_features=5, seed=2)
    assert entries['train']['num_records'] == 21 and entries['validation']['num_records'] == 7
    assert sorted(map(os.path.basename, glob.glob(os.path.join(out, 'train-*')))) == [
        f'train-0000{i}-of-00003.csv' for i in range(3)]
    input_fn = csv_records.make_input_fn(os.path.join(out, 'train-*'), 5, batch_size=4,
                                         training=False)
    rows, labels = collect(input_fn)
    assert rows.dtype == np.float32 and rows.shape == (21, 5) and labels.dtype == np.int32
    values, want_labels = csv_records.example_rows(21, 5, seed=2)  # the rows, before shuffling
    order = np.lexsort(rows.T[::-1])
    want_order = np.lexsort(values.T[::-1])
    np.testing.assert_allclose(rows[order], values[want_order], rtol=1e-6)
    np.testing.assert_array_equal(labels[order], want_labels[want_order])
    np.testing.assert_array_equal(labels, (rows.sum(axis=1) > 0).astype(np.int32))


def test_training_batches_are_full_and_repeat(mlp_csv):
    input_fn = csv_records.make_input_fn(os.path.join(mlp_csv, 'train-*'), 1024, batch_size=10,
                                         training=True, seed=1, shuffle_buffer=16)
    batches = list(input_fn().take(6))  # 60 rows > 48: repeats
    assert all(features['inputs'].shape == (10, 1024) for features, _ in batches)
    assert {int(label) for _, labels in batches for label in labels} == {0, 1}


@pytest.mark.parametrize('line, message', [
    ('1.0,2.0,1\n', 'line 1 has 3 columns; the model expects 5 features and a label'),
    ('1.0,2.0,x,4.0,5.0,1\n', 'line 1 is not 5 numbers and an integer label'),
])
def test_bad_first_line_names_the_file(tmp_path, line, message):
    path = tmp_path / 'bad.csv'
    path.write_text(line)
    with pytest.raises(UserError, match=f'{path}: {message}'):
        csv_records.make_input_fn(str(path), 5, 4, True)


def test_empty_field_later_in_a_file_fails_when_read(tmp_path):
    path = tmp_path / 'gap.csv'
    path.write_text('1,2,3,1\n1,,3,0\n')
    input_fn = csv_records.make_input_fn(str(path), 3, 2, False)
    with pytest.raises(tf.errors.InvalidArgumentError):
        collect(input_fn)


def test_csv_mlp_trains_evaluates_and_exports(mlp_csv, serving_loader, tmp_path):
    model_dir = str(tmp_path / 'model')
    run_module('trainer.main', '--model=csv_mlp', '--mode=train', f'--model_dir={model_dir}',
               f'--train_files={mlp_csv}/train-*', '--batch_size=8', '--train_steps=4')
    assert tf.train.load_variable(model_dir, 'global_step') == 4
    weights = sorted(tf.train.load_variable(model_dir, name).shape
                     for name, _ in tf.train.list_variables(model_dir)
                     if name.endswith('kernel'))
    assert weights == [(1024, 1), (1024, 1024)]
    # Evaluated, and exported as the best so far (--mode=export is test_cli's and test_serving's).
    evaluated = run_module(
        'trainer.main', '--model=csv_mlp', '--mode=evaluate', f'--model_dir={model_dir}',
        f'--eval_files={mlp_csv}/validation-*', '--batch_size=8', f'--export_dir={tmp_path}/export')
    metrics = json.loads(evaluated.stdout.splitlines()[-1])
    assert metrics['global_step'] == 4 and 'accuracy' in metrics
    exported = f'{tmp_path}/export/4'
    assert (tmp_path / 'export' / 'best').read_text() == '4\n'
    serve = tf.saved_model.load(exported).signatures['serving_default']
    probability = serve(inputs=tf.zeros([2, 1024]))['probability'].numpy()
    assert probability.shape == (2,) and ((0 <= probability) & (probability <= 1)).all()
    lines = check_against_python(serving_loader, exported)  # as TF Serving loads it, in C++
    assert [line['signature'] for line in lines[1:]] == ['serving_default']
