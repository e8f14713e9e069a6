"""The data schema that models built from their data read: the split, the manifest, model_dir."""
import dataclasses
import json
import os

import pytest
import tensorflow as tf

from common.errors import UserError
from helpers import run_prepare
from input_fns.records import file_patterns, shards, split
from input_fns.tables import csv_records, prepare_csv
from models import registry
from trainer.config.settings import Settings
from trainer.model_dir import run_files
from trainer.run import data_schema, experiment

TABLE = {'kind': 'table', 'features': [{'name': 'age', 'dtype': 'float'}]}


def test_split_is_stable_and_near_the_fraction():
    keys = [f'row {i}'.encode() for i in range(4000)]
    held_out = [split.is_validation(key, 0.25) for key in keys]
    assert held_out == [split.is_validation(key, 0.25) for key in keys]
    assert 0.22 < sum(held_out) / len(keys) < 0.28
    # A larger fraction holds out a superset: raising it moves no example back into training.
    assert all(split.is_validation(k, 0.5) for k, v in zip(keys, held_out) if v)
    assert not any(split.is_validation(key, 0.0) for key in keys)


@pytest.mark.parametrize('value', [-0.1, 1.0, 1.5])
def test_split_fraction_out_of_range(value):
    with pytest.raises(UserError, match=r'--validation_fraction=.*below 1'):
        split.check_fraction(value)


def test_schema_in_the_manifest(tmp_path):
    pattern = str(tmp_path / 'train-*')
    with pytest.raises(UserError, match=r'--train_files=.*: no .*manifest.json; prepare the data'):
        file_patterns.read_schema(pattern, '--train_files')
    shards.update_split(str(tmp_path), 'train', {'num_records': 3})
    with pytest.raises(UserError, match=r'manifest.json: no data schema in it'):
        file_patterns.read_schema(pattern, '--train_files')
    shards.set_schema(str(tmp_path), TABLE)
    assert file_patterns.read_schema(pattern, '--train_files') == TABLE
    assert shards.read_manifest(str(tmp_path))['splits']['train'] == {'num_records': 3}


def test_the_schema_of_comma_separated_globs_is_one_or_refused(tmp_path):
    """Splits of one folder share its manifest; folders prepared apart each have a schema of
    their own, which for photos may still build the same model."""
    first, second = tmp_path / 'first', tmp_path / 'second'
    shards.set_schema(str(first), TABLE)
    assert file_patterns.read_schema(f'{first}/train-*, {first}/validation-*', '-f') == TABLE
    shards.set_schema(str(second), {**TABLE, 'features': [{'name': 'age', 'dtype': 'int'}]})
    with pytest.raises(UserError, match=rf'^--train_files: {first}/train-\* and {second}/train-\* '
                                        'were prepared apart, each with a schema of its own '
                                        rf'\({first}/manifest.json, {second}/manifest.json\), and '
                                        'one model is built from one: prepare their sources in '
                                        'one run'):
        file_patterns.read_schema(f'{first}/train-*,{second}/train-*', '--train_files')
    photos = {'kind': 'images', 'classes': ['cat', 'dog'], 'image_shape': [8, 8, 3],
              'resize': 'crop', 'class_counts': [3, 4], 'source_dir': 'a'}
    shards.set_schema(str(first), photos)
    shards.set_schema(str(second), {**photos, 'class_counts': [5, 1], 'source_dir': 'b'})
    assert file_patterns.read_schema(f'{first}/*,{second}/*', '-f') == photos
    shards.set_schema(str(second), {**photos, 'classes': ['cat', 'owl']})
    with pytest.raises(UserError, match='prepared apart'):
        file_patterns.read_schema(f'{first}/*,{second}/*', '-f')


def _spec(schema_kind='table'):
    return registry.ModelSpec('table_model', lambda *args: None, {'width': 4}, 'csv_features',
                              num_features=1, schema_kind=schema_kind)


def test_training_reads_the_manifest_and_later_modes_the_model_dir(tmp_path):
    data, model_dir = tmp_path / 'data', str(tmp_path / 'model')
    shards.set_schema(str(data), TABLE)
    train = Settings(mode='train', model_dir=model_dir, train_files=str(data / 'train-*'))
    assert data_schema.with_schema(train, _spec()).schema == TABLE
    export = Settings(mode='export', model_dir=model_dir, export_dir=str(tmp_path / 'exports'))
    with pytest.raises(UserError, match=r'has no schema.json .*train it first'):
        data_schema.with_schema(export, _spec())
    recorded = {**TABLE, 'features': [{'name': 'height', 'dtype': 'float'}]}
    run_files.record_schema(model_dir, recorded)
    assert data_schema.with_schema(export, _spec()).schema == recorded
    # An eval job before the first training run has recorded it: the eval files' manifest.
    evaluate = Settings(mode='evaluate', model_dir=str(tmp_path / 'new'),
                        eval_files=str(data / 'validation-*'))
    assert data_schema.with_schema(evaluate, _spec()).schema == TABLE


def test_a_schema_of_another_kind_is_refused(tmp_path):
    shards.set_schema(str(tmp_path), {'kind': 'images', 'image_shape': [8, 8, 3]})
    settings = Settings(mode='train', model_dir=str(tmp_path / 'm'),
                        train_files=str(tmp_path / 'train-*'))
    with pytest.raises(UserError, match=r"--model=table_model takes data prepared by `prepare csv` "
                                        r"or `prepare examples`; .* holds 'images' data"):
        data_schema.with_schema(settings, _spec())
    plain = _spec(schema_kind=None)
    assert data_schema.with_schema(settings, plain) is plain


def test_a_damaged_schema_record(tmp_path):
    (tmp_path / run_files.SCHEMA_FILE).write_text('{"features": ')
    with pytest.raises(UserError, match=r'schema.json: not a data schema; delete it'):
        run_files.recorded_schema(str(tmp_path))


def test_the_model_fn_gets_the_schema_and_the_chief_records_it(tmp_path):
    seen = {}

    def model_fn(features, labels, mode, params):
        seen.update(params)
        step = tf.compat.v1.train.get_or_create_global_step()
        loss = tf.reduce_mean(features[csv_records.FEATURE_KEY])
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=step.assign_add(1))

    spec = dataclasses.replace(_spec(), model_fn=model_fn)
    data, model_dir = tmp_path / 'data', str(tmp_path / 'model')
    csv_records.write_example_split(str(data), 'train', 1, 4, num_features=1, seed=0)
    shards.set_schema(str(data), TABLE)
    settings = Settings(model='table_model', mode='train', model_dir=model_dir,
                        train_files=str(data / 'train-*'), train_steps=1)
    run = experiment.build(settings, spec)
    assert run.spec.schema == TABLE and run.estimator.params['schema'] == TABLE
    with run.training():
        run.estimator.train(run.train_spec.input_fn, max_steps=1)
    assert seen['schema'] == TABLE and seen['width'] == 4
    assert json.loads((tmp_path / 'model' / run_files.SCHEMA_FILE).read_text()) == TABLE


def test_evaluating_a_class_the_model_was_not_trained_on_is_one_line(tmp_path):
    """A held-out table prepared apart (without --schema_from, which would refuse it) with a
    class the training rows lack: the eval job names it, rather than stopping at its first batch."""
    data, model_dir = tmp_path / 'data', str(tmp_path / 'model')
    (tmp_path / 'train.csv').write_text('x,kind\n' + '\n'.join(f'{i},{"ab"[i % 2]}'
                                                                 for i in range(40)))
    (tmp_path / 'test.csv').write_text('x,kind\n1,a\n2,b\n3,c\n4,c\n')
    common = dict(label='kind', column_types=None, task=None, max_vocabulary=10, na_values=[''],
                  weight_column=None, num_shards=1, num_eval_shards=1)
    run_prepare(prepare_csv.prepare_csv, source=str(tmp_path / 'train.csv'), output_dir=str(data),
                **{**common, 'validation_fraction': 0.25})
    run_prepare(prepare_csv.prepare_csv, source=str(tmp_path / 'test.csv'),
                output_dir=str(tmp_path / 'held'), split='test',
                **{**common, 'validation_fraction': 0.0})
    run_files.record_schema(model_dir, file_patterns.read_schema(str(data / 'train-*'), 'x'))
    spec = registry.get('linear_classifier')

    def evaluate(pattern):
        return data_schema.with_schema(Settings(mode='evaluate', model_dir=model_dir,
                                                eval_files=str(tmp_path / pattern)), spec)

    assert evaluate('data/validation-*').schema['label']['classes'] == ['a', 'b']
    for eval_files in ('held/test-*', f'data/validation-*,{tmp_path}/held/test-*'):
        with pytest.raises(UserError, match=r"--eval_files=.*/held/test-\*: label 'kind' holds "
                                            r"classes the model was not trained on: 'c' \(2 "
                                            r"rows\); it predicts \['a', 'b'\] \(.*schema.json\); "
                                            "leave those rows out"):
            evaluate(eval_files)

    with pytest.raises(UserError, match=r"^--source=.*test.csv: label 'kind' holds classes the "
                                        r"training data \(--schema_from=.*data\) does not: 'c' "
                                        r"\(2 rows\); a model trained on it cannot predict them"):
        prepare_csv.prepare_csv(source=str(tmp_path / 'test.csv'), output_dir=str(data),
                               schema_from=str(data), split='test', seed=0,
                               **{**common, 'validation_fraction': 0.0})
    assert sorted(os.listdir(data)) == sorted(['manifest.json', 'train-00000-of-00001.tfrecord',
                                               'validation-00000-of-00001.tfrecord'])
