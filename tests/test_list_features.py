"""tf.Example records as they are: a fixed-length list (an image as 784 floats, as the classic
Estimator+TFRecord MNIST article writes it) and variable-length lists (tags, token ids) through
`prepare examples`, the canned models, a --usr_dir model, the export and predict."""
import json
import os
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from helpers import run_module, run_prepare
from input_fns.tables import example_tables, table_records
from models.tables import boosted_trees, table_columns
from test_tables import write_records
from trainer.serving import predict

BANDS = 3  # the "digits": which of three bands of rows is bright


def digit(label, rng):
    """A 28x28 image, flattened: noise, with the rows of its label's band bright."""
    image = rng.rand(28, 28) * 0.3
    image[label * 9:label * 9 + 9] += 0.6
    return image.ravel().round(4).tolist()


def article_record(image, label):
    """The article's tf.Example: img_string 784 floats, height and width, label, all as is."""
    example = tf.train.Example()
    feature = example.features.feature
    feature['img_string'].float_list.value.extend(image)
    feature['height'].int64_list.value.append(28)
    feature['width'].int64_list.value.append(28)
    feature['label'].int64_list.value.append(label)
    return example


def tagged_record(rng, index):
    """tags: 1-4 of a few words, a 'refund' among them for a complaint; tokens: 1-6 ids."""
    label = index % 2
    tags = list(rng.choice(['red', 'blue', 'sale', 'gift', 'new'], rng.randint(1, 4), False))
    if label:
        tags.insert(rng.randint(len(tags) + 1), 'refund')
    example = tf.train.Example()
    feature = example.features.feature
    feature['tags'].bytes_list.value.extend(tag.encode() for tag in tags)
    feature['tokens'].int64_list.value.extend(rng.randint(0, 50, rng.randint(1, 7)).tolist())
    feature['label'].bytes_list.value.append(b'complaint' if label else b'praise')
    return example.SerializeToString()


def prepare(tmp_path, records, **overrides):
    (tmp_path / 'records').mkdir(exist_ok=True)
    write_records(tmp_path / 'records' / 'part-0.tfrecord', records)
    args = dict(source=str(tmp_path / 'records' / 'part-*'), label='label', task=None,
                max_vocabulary=100, weight_column=None, output_dir=str(tmp_path / 'data'),
                validation_fraction=0.25)
    run_prepare(example_tables.prepare_examples, **{**args, **overrides})
    return json.load(open(tmp_path / 'data' / 'manifest.json'))['schema']


def trained(tmp_path, model, *flags):
    """train_and_evaluate with an export; the validation accuracy and the best export."""
    result = run_module('trainer.main', f'--model={model}', f'--model_dir={tmp_path}/run',
                        f'--train_files={tmp_path}/data/train-*',
                        f'--eval_files={tmp_path}/data/validation-*', '--mode=train_and_evaluate',
                        '--batch_size=20', f'--export_dir={tmp_path}/exports', *flags)
    accuracy = float(result.stdout.split('accuracy=')[1].split()[0])
    return accuracy, f'{tmp_path}/exports/best'


@pytest.fixture(scope='module')
def digits(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp('digits')
    rng = np.random.RandomState(0)
    records = [article_record(digit(index % BANDS, rng), index % BANDS).SerializeToString()
               for index in range(200)]
    return tmp_path, prepare(tmp_path, records)


def test_the_articles_records_train_a_dnn_classifier_and_predict_json_lines(digits):
    tmp_path, schema = digits
    entries = {entry['name']: entry for entry in schema['features']}
    assert sorted(entries) == ['height', 'img_string', 'width']
    image = entries['img_string']
    assert image['dtype'] == 'float' and image['shape'] == [784] and 'ragged' not in image
    assert len(image['position_mean']) == len(image['position_std']) == 784
    assert 0.2 < image['mean'] < 0.5 and 'shape' not in entries['height']
    [column] = [c for c in table_columns.deep_columns(schema, 8) if c.key == 'img_string']
    assert column.shape == (784,)

    accuracy, export = trained(tmp_path, 'dnn_classifier', '--train_steps=60',
                               '--hidden_units=16')
    assert accuracy >= 0.9, accuracy
    rng = np.random.RandomState(7)
    images = [digit(label, rng) for label in range(BANDS)]
    rows = tmp_path / 'rows.jsonl'
    rows.write_text(''.join(json.dumps({'img_string': image, 'height': 28, 'width': 28}) + '\n'
                            for image in images))
    lines = predict.predict_files(export, [str(rows)])
    assert [line['classes'] for line in lines] == ['0', '1', '2']
    table = tmp_path / 'rows.csv'  # a CSV cell holding a JSON list
    table.write_text('img_string,height\n' + ''.join(
        '"' + json.dumps(image).replace('"', '""') + '",28\n' for image in images))
    assert [line['classes'] for line in predict.predict_files(export, [str(table)])] == [
        '0', '1', '2']
    body = tmp_path / 'body.json'  # TF Serving's REST row format, through serving_default
    body.write_text(json.dumps({'instances': [{'img_string': image, 'height': 28, 'width': 28}
                                              for image in images]}))
    assert [line['classes'] for line in predict.predict_files(export, [str(body)])] == [
        ['0'], ['1'], ['2']]

    rows.write_text(json.dumps({'img_string': images[0][:-1], 'height': 28}) + '\n')
    with pytest.raises(UserError, match=r"^.*rows.jsonl line 1, column 'img_string': 783 values; "
                                        r'the model takes lists of 784 values \(float\): fix '
                                        r'that row$'):
        predict.predict_files(export, [str(rows)])


def test_a_record_whose_list_has_another_length_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.setattr(example_tables, 'SAMPLE_RECORDS', 10)  # the form read from 10 records
    rng = np.random.RandomState(1)
    records = [article_record(digit(i % BANDS, rng), i % BANDS) for i in range(12)]
    del records[10].features.feature['img_string'].float_list.value[-28:]  # a row short
    with pytest.raises(UserError, match=r"^.*records/part-0.tfrecord record 11, feature "
                                        r"'img_string': 756 values, where the schema holds lists "
                                        r"of 784 \(as the first records do\); write every "
                                        r"record's 'img_string' with 784 values, or leave it out "
                                        r"with --ignore_columns=img_string$"):
        prepare(tmp_path, [record.SerializeToString() for record in records])
    assert os.listdir(tmp_path / 'data') == []  # nothing written


def test_lists_of_any_length_are_multi_hot_for_linear_and_embedding_bags_for_dnn(tmp_path):
    rng = np.random.RandomState(2)
    schema = prepare(tmp_path, [tagged_record(rng, index) for index in range(240)])
    tags, tokens = schema['features']
    assert (tags['name'], tags['dtype'], tags['ragged']) == ('tags', 'string', True)
    assert 'refund' in tags['vocabulary'] and 1 <= tags['values_per_record'] <= tags['max_values']
    assert tokens['dtype'] == 'int' and tokens['ragged'] and tokens['max_values'] <= 6
    assert all(isinstance(value, int) for value in tokens['vocabulary'])
    linear, deep = table_columns.linear_columns(schema, {}), table_columns.deep_columns(schema, 4)
    assert [column.dtype for column in linear] == [tf.string, tf.int64]  # vocabulary columns
    assert [(column.combiner, column.categorical_column.key) for column in deep] == [
        ('mean', 'tags'), ('mean', 'tokens')]
    with pytest.raises(UserError, match=r"^feature 'tags': lists of any length, where boosted "
                                        r'trees split on one value a feature; .* '
                                        r'--ignore_columns=tags$'):
        boosted_trees.boosted_trees_fn({}, None, None, None, schema, boosted_trees.PARAMS)
    scores = {'name': 'scores', 'dtype': 'float', 'ragged': True, 'count': 9, 'mean': 0.0,
              'std': 1.0}
    with pytest.raises(UserError, match=r"^feature 'scores': lists of floats of any length, "
                                        r'which the canned models cannot read as one column; '
                                        r'leave it out .* or read it in a model of your own'):
        table_columns.deep_columns({**schema, 'features': [scores]}, 4)

    accuracy, export = trained(tmp_path, 'linear_classifier', '--train_steps=100')
    assert accuracy >= 0.95, accuracy
    serve = tf.saved_model.load(predict.resolve_saved_model(export)).signatures['serving_default']
    answers = serve(tags=tf.constant([['sale', 'refund', ''], ['gift', 'new', 'red']]),
                    tokens=tf.constant([[3, -1], [4, 5]], tf.int64))  # padded with '' and -1
    assert answers['classes'].numpy()[:, 0].tolist() == [b'complaint', b'praise']
    rows = tmp_path / 'rows.jsonl'
    rows.write_text('{"tags": ["refund"], "tokens": [1, 2, 3, 4, 5, 6, 7, 8]}\n{"tags": ["new"]}\n')
    assert [line['classes'] for line in predict.predict_files(export, [str(rows)])] == [
        'complaint', 'praise']


USR_MODEL = '''
import tensorflow as tf
from trainer import api

def model_fn(features, labels, mode, params):
    image, tags = features['img_string'], features['tags']
    if image.shape.as_list()[1:] != [784] or not isinstance(tags, tf.sparse.SparseTensor):
        raise ValueError(f'got {image!r} and {tags!r}')
    tag_counts = tf.cast(tf.RaggedTensor.from_sparse(tags).row_lengths(), tf.float32)
    columns = api.table_feature_columns(params['schema'], 4)  # as dnn_classifier reads them
    inputs = tf.concat([tf.keras.layers.DenseFeatures(columns)(features), tag_counts[:, None]], 1)
    logits = tf.keras.layers.Dense(api.table_logits_dimension(params['schema']))(inputs)
    return api.table_estimator_spec(features, labels, mode, logits, params)

api.register_model(api.ModelSpec(name='list_net', model_fn=model_fn,
    default_params=dict(api.TRAINING_PARAMS), input_kind='table', schema_kind='table'))
'''


def test_a_usr_dir_model_gets_a_dense_batch_of_each_fixed_list_and_sparse_variable_ones(
        tmp_path):
    rng = np.random.RandomState(3)
    records = []
    for index in range(120):
        example = article_record(digit(index % BANDS, rng), index % BANDS)
        example.features.feature['tags'].bytes_list.value.extend([b'a', b'b'][:1 + index % 2])
        records.append(example.SerializeToString())
    prepare(tmp_path, records)
    (tmp_path / 'usr').mkdir()
    (tmp_path / 'usr' / 'list_net.py').write_text(textwrap.dedent(USR_MODEL))
    accuracy, export = trained(tmp_path, 'list_net', f'--usr_dir={tmp_path}/usr',
                               '--train_steps=40', '--learning_rate=0.1')
    assert accuracy >= 0.9, accuracy
    assert os.path.exists(export)


def test_rows_with_lists_encode_as_the_examples_the_messages_make():
    names, dtypes = ['ids', 'pixels', 'tags'], ['int', 'float', 'string']
    values = [[3, -2, 2 ** 40], [0.5, 0.25, 1.0], ['a', 'bé']]
    parsed = tf.train.Example.FromString(table_records.encode_example(names, dtypes, values))
    feature = parsed.features.feature
    assert list(feature['ids'].int64_list.value) == values[0]
    assert list(feature['pixels'].float_list.value) == values[1]
    assert [tag.decode() for tag in feature['tags'].bytes_list.value] == values[2]
