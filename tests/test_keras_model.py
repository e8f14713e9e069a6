"""Keras models (ModelSpec keras_model=BUILD, issue 70): trained, evaluated, exported and served
by every mode through the service's head, with the layers' regularization losses and batch-norm
updates (from a --usr_dir: tests/test_warm_start_from.py's killed job); their mistakes are one
line naming the model."""
import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
import keras_models
from keras_models import CNN, CNN_SPEC, LINEAR_FEATURES, LINEAR_PENALTY, LINEAR_SPEC, TABLE_SPEC
from models import keras_model, registry
from trainer import api
from trainer.config.settings import Settings
from trainer.input_kinds.table import Table
from trainer.model_dir.metric_goal import MetricGoal
from trainer.run.mode_runners import RUNNERS


@pytest.fixture(autouse=True, scope='module')
def keras_test_models():
    with keras_models.registered():
        yield


def graph_spec(spec, mode, features, labels):
    tf.compat.v1.train.get_or_create_global_step()
    return spec.model_fn(features, labels, mode, spec.default_params)


def test_regularization_losses_join_the_training_loss_only():
    """A kernel of ones under l2(0.5) over 4 zeros: logit 0, so the data's loss is log 2 and the
    penalty 0.5 * 4; training minimizes both, evaluation reports the data's alone."""
    with tf.Graph().as_default():
        features = {'inputs': tf.zeros([3, LINEAR_FEATURES])}
        trained = graph_spec(LINEAR_SPEC, tf.estimator.ModeKeys.TRAIN, features, tf.ones([3]))
        evaluated = graph_spec(LINEAR_SPEC, tf.estimator.ModeKeys.EVAL, features, tf.ones([3]))
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            train_loss, eval_losses = session.run([trained.loss, evaluated.loss])
    assert train_loss == pytest.approx(math.log(2) + LINEAR_PENALTY * LINEAR_FEATURES, rel=1e-5)
    assert eval_losses == pytest.approx([math.log(2)] * 3, rel=1e-5)


def test_a_keras_model_over_a_table_takes_the_canned_head_and_its_penalty():
    """Over the table head (a dict of features into DenseFeatures): the canned head adds the
    penalty to its loss and reports it in evaluation as regularization_loss."""
    schema = Table().example_schemas()[1]  # three classes: a, b, c
    params = {**TABLE_SPEC.default_params, 'schema': schema}
    with tf.Graph().as_default():
        tf.compat.v1.train.get_or_create_global_step()
        features = {'number': tf.constant([0.5, -0.5]), 'text': tf.constant(['a', 'b'])}
        spec = TABLE_SPEC.model_fn(features, tf.constant(['a', 'c']),
                                   tf.estimator.ModeKeys.EVAL, params)
        [kernel] = [variable for variable in tf.compat.v1.global_variables()
                    if variable.name.endswith('logits/kernel:0')]
        value, update = spec.eval_metric_ops['regularization_loss']
        with tf.compat.v1.Session() as session:
            session.run([tf.compat.v1.global_variables_initializer(),
                         tf.compat.v1.local_variables_initializer(),
                         tf.compat.v1.tables_initializer()])
            session.run(update)
            penalty, weights = session.run([value, kernel])
    assert weights.shape[-1] == 3
    assert penalty == pytest.approx(LINEAR_PENALTY * (weights ** 2).sum(), rel=1e-5)


def digits_settings(digit_shards, tmp_path, mode, **overrides):
    return Settings(**{**dict(
        model=CNN, mode=mode, model_dir=str(tmp_path / 'model'), batch_size=16,
        train_files=digit_shards.train_pattern, train_steps=4,
        eval_files=digit_shards.validation_pattern, save_checkpoints_steps=2,
        keep_checkpoint_max=0, export_dir=str(tmp_path / 'exports'),
        export_goal=MetricGoal.of('accuracy', None, '--export_metric')), **overrides})


def moving_mean(checkpoint):
    return tf.train.load_variable(checkpoint, 'batch_normalization/moving_mean')


def test_every_mode_runs_a_keras_model(digit_shards, tmp_path, capsys):
    """train (batch-norm statistics move), evaluate, continuous_eval (best export), export and
    predict, in this process as trainer.main runs them."""
    RUNNERS['train'](digits_settings(digit_shards, tmp_path, 'train'), [])
    model_dir = str(tmp_path / 'model')
    start, end = (os.path.join(model_dir, f'model.ckpt-{step}') for step in (0, 4))
    assert not moving_mean(start).any() and np.abs(moving_mean(end)).min() > 0
    assert tf.train.load_variable(end, 'logits/kernel').shape == (8, 10)

    RUNNERS['evaluate'](digits_settings(digit_shards, tmp_path, 'evaluate', export_dir=None), [])
    with open(os.path.join(model_dir, 'eval_default', 'results', 'step-000000004.json')) as f:
        assert 0 <= json.load(f)['metrics']['accuracy'] <= 1
    RUNNERS['continuous_eval'](digits_settings(digit_shards, tmp_path, 'continuous_eval',
                                               eval_name='held_out', final_train_steps=4), [])
    best = (tmp_path / 'exports' / 'best').read_text().strip()
    RUNNERS['export'](digits_settings(digit_shards, tmp_path, 'export',
                                      export_dir=str(tmp_path / 'latest')), [])
    assert (tmp_path / 'latest' / '4' / 'saved_model.pb').exists()

    image = str(tmp_path / 'digit.png')
    tf.io.write_file(image, tf.io.encode_png(digit_shards.validation[0][0][..., None]))
    capsys.readouterr()
    RUNNERS['predict'](Settings(mode='predict', saved_model=str(tmp_path / 'exports' / best)),
                       [image])
    [prediction] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert prediction['classes'] in range(10) and len(prediction['probabilities']) == 10


def build_compiled(params, inputs):
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer='sgd', loss='mse')
    return model


@pytest.mark.parametrize('build, message', [
    (build_compiled, r'model keras_test_wrong \(test_keras_model.build_compiled\) returned a '
                     r'compiled model; return it uncompiled'),
    (lambda params, inputs: tf.keras.layers.Dense(1), r'returned Dense; return a tf.keras.Model'),
])
def test_a_build_function_that_returns_no_uncompiled_model(build, message):
    spec = registry.ModelSpec('keras_test_wrong', None, dict(api.TRAINING_PARAMS), 'csv_features',
                              num_features=LINEAR_FEATURES, keras_model=build)
    spec = keras_model.completed(spec, __name__)  # as register() makes it, unregistered
    with tf.Graph().as_default(), pytest.raises(UserError, match=message):
        graph_spec(spec, tf.estimator.ModeKeys.TRAIN, {'inputs': tf.zeros([2, 4])}, tf.ones([2]))


@pytest.mark.parametrize('fields, message', [
    (dict(model_fn=CNN_SPEC.model_fn), 'with both model_fn and keras_model; give one of them'),
    (dict(input_kind='house_records'), "with head=None over input kind 'house_records'; name "
                                       'its head: classification, binary, table'),
    (dict(head='regression'), "with head='regression'"),
    (dict(keras_model=None, model_fn=CNN_SPEC.model_fn, head='binary'),
     "with head='binary' and a model_fn; head= is for a keras_model"),
    (dict(default_params={'keras_test_classes': 3}),
     'whose default_params lack learning_rate, optimizer; start them from api.TRAINING_PARAMS'),
])
def test_registration_mistakes_name_the_module(fields, message):
    spec = registry.ModelSpec(**{**dict(name='keras_test_unregistered', model_fn=None,
                                        default_params=dict(api.TRAINING_PARAMS),
                                        input_kind='image_classification',
                                        keras_model=CNN_SPEC.keras_model), **fields})
    with pytest.raises(UserError, match=f"keras_models registers model 'keras_test_unregistered' "
                                        f'{message}'):
        registry.register(spec)
    assert 'keras_test_unregistered' not in registry.names()
