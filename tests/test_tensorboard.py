"""What TensorBoard shows for a run, read through its HTTP API on 127.0.0.1 (no browser).

Two tiny model_dirs in one logdir: an MNIST CNN evaluated twice, and a face-pair
model evaluated once. TensorBoard is started and stopped by the fixture.
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from models import face_diff, mnist_cnn
from tools.tensorboard_server import TensorBoard
from trainer.observe import hparams

HPARAMS = {'batch_size': 8, 'learning_rate': 0.001, 'model': 'mnist_cnn', 'optimizer': 'adam'}


def estimator(model, model_dir):
    return tf.estimator.Estimator(model.model_fn, model_dir=model_dir, params=model.DEFAULT_PARAMS,
                                  config=tf.estimator.RunConfig(save_summary_steps=1))


def train_and_evaluate_twice(model_dir):
    rng = np.random.RandomState(0)
    images = rng.rand(24, 28, 28, 1).astype(np.float32)
    labels = np.arange(24, dtype=np.int32) % 10
    data = lambda: tf.data.Dataset.from_tensor_slices(({'image': images}, labels)).batch(8)  # noqa: E731
    mnist = estimator(mnist_cnn, model_dir)
    for steps in (2, 4):
        mnist.train(lambda: data().repeat(), max_steps=steps,
                    hooks=[hparams.HParamsHook(model_dir, HPARAMS)])
        mnist.evaluate(data, name='validation')


def evaluate_pairs(model_dir):
    rng = np.random.RandomState(1)
    features = {'image_a': rng.rand(12, 64, 64, 1).astype(np.float32),
                'image_b': rng.rand(12, 64, 64, 1).astype(np.float32)}
    labels = (np.arange(12) % 2).astype(np.float32)
    data = lambda: tf.data.Dataset.from_tensor_slices((features, labels)).batch(6)  # noqa: E731
    pairs = estimator(face_diff, model_dir)
    pairs.train(lambda: data().repeat(), max_steps=1)
    pairs.evaluate(data, name='validation')


@pytest.fixture(scope='module')
def tensorboard(tmp_path_factory):
    logdir = str(tmp_path_factory.mktemp('tensorboard'))
    train_and_evaluate_twice(os.path.join(logdir, 'mnist'))
    evaluate_pairs(os.path.join(logdir, 'pairs'))
    with TensorBoard(logdir) as server:
        server.wait_for(lambda: len(server.get_json('data/plugin/scalars/tags')) == 4,
                        what='the scalars of 4 runs')
        yield server


def test_training_and_evaluation_share_scalar_tags(tensorboard):
    tags = tensorboard.get_json('data/plugin/scalars/tags')
    assert {'loss', 'accuracy', 'learning_rate'} <= set(tags['mnist'])
    assert {'loss', 'accuracy'} <= set(tags['mnist/eval_validation'])
    assert not any(tag.endswith('_1') for run in tags.values() for tag in run)
    evaluated = tensorboard.get_json('data/plugin/scalars/scalars', run='mnist/eval_validation',
                                     tag='accuracy')
    assert [step for _, step, _ in evaluated] == [2, 4]
    trained = tensorboard.get_json('data/plugin/scalars/scalars', run='mnist', tag='accuracy')
    assert [step for _, step, _ in trained] == [1, 2, 3, 4]


def image_of(tensorboard, run, tag):
    [latest] = tensorboard.get_json('data/plugin/images/images', run=run, tag=tag)[-1:]
    png = tensorboard.get('data/plugin/images/individualImage?' + latest['query'])
    return tf.io.decode_png(png).numpy()


def test_evaluation_pictures(tensorboard):
    tags = tensorboard.get_json('data/plugin/images/tags')
    assert set(tags['mnist/eval_validation']) == {'most_confident_mistakes/0', 'confusion_matrix/0'}
    assert 'predicted' in tags['mnist/eval_validation']['most_confident_mistakes/0']['description']
    confusion = image_of(tensorboard, 'mnist/eval_validation', 'confusion_matrix/0')
    assert confusion.shape == (36 + 10 * 28 + 1, 36 + 10 * 28 + 1, 3)
    mistakes = image_of(tensorboard, 'mnist/eval_validation', 'most_confident_mistakes/0')
    assert mistakes.shape[1] > 6 * 56  # random pixels: more mistakes than a row of tiles holds
    assert set(tags['pairs/eval_validation']) == {'hardest_pairs/0'}
    strip = image_of(tensorboard, 'pairs/eval_validation', 'hardest_pairs/0')
    assert strip.shape[0] > 2 * 64 and strip.shape[1] > 10 * 64  # 10 pairs, a over b


def test_precision_recall_curve(tensorboard):
    tags = tensorboard.get_json('data/plugin/pr_curves/tags')
    assert set(tags['pairs/eval_validation']) == {'pr_curve/0'}
    curve = tensorboard.get_json('data/plugin/pr_curves/pr_curves', run='pairs/eval_validation',
                                 tag='pr_curve/0')
    [entry] = curve['pairs/eval_validation']
    assert entry['step'] == 1 and len(entry['precision']) == len(entry['thresholds']) > 50
    assert entry['true_positives'][0] == 6  # threshold 0: every same-person pair is a positive


def test_hparams_dashboard_lists_the_run_with_its_final_metrics(tensorboard):
    experiment = tensorboard.post_json('data/plugin/hparams/experiment', {'experimentName': ''})
    assert {info['name'] for info in experiment['hparamInfos']} == set(HPARAMS)
    metrics = {(m['name']['group'], m['name']['tag']) for m in experiment['metricInfos']}
    assert {('eval_validation', 'accuracy'), ('', 'loss')} <= metrics
    groups = tensorboard.post_json('data/plugin/hparams/session_groups', {
        'experimentName': '', 'allowedStatuses': ['STATUS_SUCCESS', 'STATUS_UNKNOWN'],
        'colParams': [], 'startIndex': 0, 'sliceSize': 10})
    [group] = groups['sessionGroups']
    assert group['hparams'] == HPARAMS
    [session] = group['sessions']
    assert session['status'] == 'STATUS_SUCCESS'
    accuracy = [m for m in session['metricValues']
                if m['name'] == {'group': 'eval_validation', 'tag': 'accuracy'}]
    assert accuracy[0]['trainingStep'] == 4  # the final evaluation
