"""--class_weights: the training loss weighs each example by its class ('balanced' from the
training split's counts, or NAME=WEIGHT), evaluation stays unweighted, and a model_fn whose loss
would ignore the flag is refused."""
import json
import random

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from helpers import assert_one_line_error, run_module, run_prepare
from input_fns.tables import prepare_csv
from models import class_weights, heads, training


def test_balanced_weights_come_from_the_training_counts_and_named_ones_default_to_1():
    assert class_weights.values('balanced', ['ok', 'defect'], [90, 10]) == pytest.approx(
        [100 / (2 * 90), 100 / (2 * 10)])
    assert class_weights.values('defect=5, ok=0.5', ['ok', 'defect', 'scratch'], None) == [
        0.5, 5.0, 1.0]
    schema = {'kind': 'images', 'classes': ['cat', 'dog'],
              'class_counts': {'train': {'cat': 30, 'dog': 10}, 'validation': {'cat': 1}}}
    assert class_weights.train_counts(schema, ['cat', 'dog']) == [30, 10]
    table = {'kind': 'table', 'label': {'classes': ['0', '1'], 'class_counts': [7, 3]}}
    assert class_weights.train_counts(table, ['0', '1']) == [7, 3]


@pytest.mark.parametrize('text, message', [
    ('owl=2',
     "'owl=2': give balanced or NAME=WEIGHT (a number >= 0) for classes among: ok, defect"),
    ('defect=-1', "'defect=-1'"), ('defect=x', "'defect=x'"), ('defect', "'defect'"),
    ('balanced', 'no count of each class in the training split; give the weights: '
                 '--class_weights=defect=WEIGHT,...')])
def test_a_weight_that_names_no_class_or_no_number_is_refused(text, message):
    with pytest.raises(UserError) as raised:
        class_weights.values(text, ['ok', 'defect'], None)
    line = str(raised.value)
    assert line.startswith(f'--class_weights={text}: ') and message in line


def head_losses(mode, params):
    """The classification head's loss on three examples (labels 0, 1, 1), and each one's."""
    with tf.Graph().as_default():
        scale = tf.compat.v1.get_variable('scale', initializer=1.0)
        logits = scale * tf.constant([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0]])
        labels = tf.constant([0, 1, 1])
        spec = heads.classification_estimator_spec(
            logits, labels, mode, {**training.TRAINING_PARAMS, **params},
            class_names=['ok', 'defect'])
        each = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return session.run([tf.reduce_mean(spec.loss), each])


def test_the_head_weighs_the_training_loss_by_class_and_evaluation_not():
    loss, each = head_losses(tf.estimator.ModeKeys.TRAIN, {'class_weights': 'defect=3'})
    assert loss == pytest.approx(np.mean(each * [1, 3, 3]))
    loss, each = head_losses(tf.estimator.ModeKeys.EVAL, {'class_weights': 'defect=3'})
    assert loss == pytest.approx(np.mean(each))


def test_a_rare_class_weighed_up_is_predicted_and_a_loss_that_ignores_the_flag_refuses_it(
        tmp_path):
    """Features that say nothing of a label 65% a, 30% b, 5% c: unweighted, the model answers a
    for every row (c's accuracy 0); with c weighing 40, it answers c (c's accuracy 1)."""
    draw = random.Random(1)
    with open(tmp_path / 'table.csv', 'w') as f:
        f.write('x,color,label\n')
        for _ in range(400):
            f.write(f'{draw.random():.3f},{draw.choice("rgb")},'
                    f'{draw.choices("abc", [65, 30, 5])[0]}\n')
    run_prepare(prepare_csv.prepare_csv, source=str(tmp_path / 'table.csv'), label='label',
                output_dir=str(tmp_path / 'data'), column_types=None, task=None,
                max_vocabulary=100, na_values=[''], validation_fraction=0.0, num_shards=1,
                weight_column=None)
    accuracy_of_c = {}
    for weights in ('', 'c=40'):
        model_dir = tmp_path / f'model{weights}'
        common = ['--model=linear_classifier', f'--model_dir={model_dir}']
        run_module('trainer.main', *common, '--mode=train',
                   f'--train_files={tmp_path}/data/train-*', '--train_steps=150',
                   '--batch_size=32', f'--class_weights={weights}')
        result = run_module('trainer.main', *common, '--mode=evaluate',
                            f'--eval_files={tmp_path}/data/train-*')
        metrics = json.loads(result.stdout.strip().splitlines()[-1])
        accuracy_of_c[weights] = metrics['accuracy_of_class/c']
    assert accuracy_of_c == {'': 0.0, 'c=40': 1.0}
    own_loss = tmp_path / 'usr' / 'own_loss.py'  # a model of one's own, its loss its own
    own_loss.parent.mkdir()
    own_loss.write_text(OWN_LOSS_MODEL)
    result = run_module('trainer.main', f'--usr_dir={own_loss.parent}', '--model=own_loss',
                        '--mode=train', f'--model_dir={tmp_path}/own',
                        f'--train_files={tmp_path}/data/train-*', '--train_steps=1',
                        '--class_weights=c=40', check=False)
    assert_one_line_error(result, 2, '--class_weights=c=40: model own_loss (own_loss.model_fn) '
                          'does not weigh its loss by class')


OWN_LOSS_MODEL = """
import tensorflow as tf
from trainer import api


def model_fn(features, labels, mode, params):
    logits = tf.keras.layers.Dense(3)(tf.keras.layers.DenseFeatures(
        api.table_feature_columns(params['schema']))(features))
    loss = tf.reduce_mean(tf.square(logits))
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=api.train_op(loss, params))


api.register_model(api.ModelSpec(
    name='own_loss', model_fn=model_fn, input_kind='table', schema_kind='table',
    default_params={**api.TRAINING_PARAMS, **api.CLASS_WEIGHT_PARAMS}))
"""
