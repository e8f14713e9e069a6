"""image_classifier on a pretrained backbone (issue 70): the weights file's values loaded at the
first step and kept while frozen (batch norm's statistics too), fine-tuned after at its own rate,
never loaded again on a resume; a file of another backbone or size is one line. Each weights file
is made here, from a backbone built with weights=None: no network."""
import os
import types

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from helpers import assert_one_line_error, run_module
from image_tree import CLASSES, class_image, encode, prepared_tree
from models import backbone_weights, backbones
from trainer.config.settings import Settings
from trainer.run import warm_starting
from trainer.run.mode_runners import RUNNERS

MOBILENET = {'backbone': 'mobilenet_v2', 'backbone_alpha': 0.35, 'backbone_image_size': 32}
FIRST_CONV, HEAD = 'Conv1/kernel', 'head/dense/kernel'


@pytest.fixture(scope='module')
def shards(tmp_path_factory):
    return prepared_tree(tmp_path_factory.mktemp('backbones'), per_class=6, image_size='24x24',
                         channels='1', validation_fraction=0.0, num_shards=1)


def weights_file(path, seed=1, **params):
    """A backbone's weights as Keras writes them, random but for a batch norm's statistics made
    unlike its initial ones (0 and 1), so the test sees them loaded."""
    tf.keras.utils.set_random_seed(seed)
    options = {**MOBILENET, **params}
    size = options['backbone_image_size']
    backbone = tf.keras.applications.MobileNetV2(
        input_shape=(size, size, 3), include_top=False, weights=None, pooling='avg',
        alpha=options['backbone_alpha'])
    norm = backbone.get_layer('bn_Conv1')
    norm.moving_mean.assign(tf.fill(norm.moving_mean.shape, 0.25))
    backbone.save_weights(str(path))
    return {name: np.asarray(backbone.get_layer(name).weights[0]) for name in ('Conv1',)} | {
        'bn_Conv1/moving_mean': np.asarray(norm.moving_mean)}


def train(model_dir, train_files, steps, **params):
    RUNNERS['train'](Settings(model='image_classifier', mode='train', model_dir=str(model_dir),
                              train_files=train_files, train_steps=steps, batch_size=6,
                              save_checkpoints_steps=2, keep_checkpoint_max=0,
                              model_param_overrides={**MOBILENET, **params}), [])


def value(model_dir, step, name):
    return tf.train.load_variable(os.path.join(str(model_dir), f'model.ckpt-{step}'), name)


@pytest.fixture(scope='module')
def tuned(shards, tmp_path_factory):
    """Trained 3 steps from a weights file, frozen for the first 2 (checkpoints 0, 2, 3)."""
    root = tmp_path_factory.mktemp('tuned')
    written = weights_file(root / 'mobilenet.h5')
    flags = dict(backbone_weights=str(root / 'mobilenet.h5'), freeze_backbone_steps=2,
                 fine_tune_learning_rate=0.01)
    train(root / 'model', shards, 3, **flags)
    return types.SimpleNamespace(model_dir=root / 'model', written=written, flags=flags,
                                 weights=root / 'mobilenet.h5')


def test_the_file_is_loaded_kept_while_frozen_then_fine_tuned(tuned):
    model_dir, written = tuned.model_dir, tuned.written
    for step in (0, 2):  # loaded at the start, and frozen
        np.testing.assert_array_equal(value(model_dir, step, FIRST_CONV), written['Conv1'])
    assert not np.array_equal(value(model_dir, 2, HEAD), value(model_dir, 0, HEAD))  # it learned
    tuned_conv = value(model_dir, 3, FIRST_CONV)  # fine-tuned from the file's values
    assert 0 < np.abs(tuned_conv - written['Conv1']).max() < 0.1
    for step in (0, 3):  # batch norm in inference mode throughout: the file's statistics
        np.testing.assert_array_equal(value(model_dir, step, 'bn_Conv1/moving_mean'),
                                      written['bn_Conv1/moving_mean'])


def test_a_resumed_run_goes_on_from_its_checkpoint_without_the_file(tuned, shards):
    trained = value(tuned.model_dir, 3, FIRST_CONV)
    tuned.weights.unlink()
    train(tuned.model_dir, shards, 4, **{**tuned.flags, 'fine_tune_learning_rate': 0.0})
    np.testing.assert_array_equal(value(tuned.model_dir, 4, FIRST_CONV), trained)


def test_a_file_of_another_backbone_or_size_is_one_line(shards, tmp_path):
    weights_file(tmp_path / 'wide.h5', backbone_alpha=0.5)
    with pytest.raises(UserError, match=rf'--backbone_weights={tmp_path}/wide.h5: layer block_1_project '
                                        r'holds shapes 1x1x48x16; mobilenet_v2 \(alpha 0.35, '
                                        r'32x32\) expects 1x1x48x8 for its layer block_1_project'):
        train(tmp_path / 'a', shards, 1, backbone_weights=str(tmp_path / 'wide.h5'))
    with pytest.raises(UserError, match=rf'--backbone_weights={tmp_path}/none.h5: no such file'):
        backbone_weights.file_layers(str(tmp_path / 'none.h5'))  # read at the first step only
    (tmp_path / 'text.h5').write_text('not HDF5')
    with pytest.raises(UserError, match=rf'--backbone_weights={tmp_path}/text.h5: not a Keras '
                                        r'.h5 weights file \(.*\); a model.s save_weights'):
        backbone_weights.file_layers(str(tmp_path / 'text.h5'))
    with pytest.raises(UserError, match=r'backbone=vgg16: use one of mobilenet_v2, '
                                        r'efficientnet_b0, resnet50'):
        train(tmp_path / 'c', shards, 1, backbone='vgg16')


def test_another_architecture_is_exit_2_from_the_command_line(shards, tmp_path):
    dense = tf.keras.Sequential([tf.keras.layers.Dense(3, input_shape=(4,))])
    dense.save_weights(str(tmp_path / 'dense.h5'))
    result = run_module('trainer.main', '--model=image_classifier', '--mode=train',
                        f'--model_dir={tmp_path}/model', f'--train_files={shards}',
                        '--train_steps=1', '--model_params=backbone=mobilenet_v2,backbone_alpha=0.35',
                        '--backbone_image_size=32', f'--backbone_weights={tmp_path}/dense.h5',
                        check=False)
    assert_one_line_error(result, 2, f'--backbone_weights={tmp_path}/dense.h5: holds the weights '
                                     'of 1 layers; mobilenet_v2 (alpha 0.35, 32x32) without its '
                                     'top has 104: give that backbone\'s weights')


def test_a_warm_start_and_a_weights_file_together_is_one_line(tmp_path):
    with pytest.raises(UserError, match=r'--warm_start_from=runs/old and --backbone_weights: '
                                        r'give one; the warm start carries the backbone'):
        warm_starting.plan(Settings(model='image_classifier', mode='train',
                                    model_dir=str(tmp_path / 'new'), warm_start_from='runs/old',
                                    model_param_overrides={'backbone_weights': 'b.h5'}))


def test_each_backbone_takes_its_own_input_and_weights_of_its_own_kind(tmp_path):
    grey = tf.fill([1, 24, 24, 1], 1.0)  # white, as the input kind gives it: [0, 1]
    mobilenet = backbones.backbone_input(grey, MOBILENET)
    assert mobilenet.shape == (1, 32, 32, 3) and np.allclose(mobilenet, 1.0)  # [-1, 1]
    resnet = {'backbone': 'resnet50', 'backbone_alpha': 1.0, 'backbone_image_size': 32,
              'backbone_weights': ''}
    # Caffe's: BGR less ImageNet's mean
    np.testing.assert_allclose(backbones.backbone_input(grey, resnet)[0, 0, 0],
                               [255 - 103.939, 255 - 116.779, 255 - 123.68], rtol=1e-5)
    resnet50 = backbones.build(resnet)
    resnet50.save_weights(str(tmp_path / 'resnet50.h5'))
    backbone_weights.check(resnet50, resnet, str(tmp_path / 'resnet50.h5'))
    efficientnet = {**resnet, 'backbone': 'efficientnet_b0'}
    with pytest.raises(UserError, match=r'resnet50.h5: holds the weights of \d+ layers; '
                                        r'efficientnet_b0 \(32x32\) without its top has \d+'):
        backbone_weights.check(backbones.build(efficientnet), efficientnet,
                               str(tmp_path / 'resnet50.h5'))


def test_the_export_serves_a_photo_with_the_trained_backbone(tuned, tmp_path):
    RUNNERS['export'](Settings(model='image_classifier', mode='export',
                               model_dir=str(tuned.model_dir), export_dir=str(tmp_path),
                               model_param_overrides={**MOBILENET, **tuned.flags}), [])
    (export,) = [path for path in tmp_path.iterdir() if path.name.isdigit()]
    served = tf.saved_model.load(str(export)).signatures['serving_default'](
        image_bytes=tf.constant([encode(class_image(1, 30, 40, np.random.RandomState(0)), 'png')]))
    assert served['class_name'].numpy()[0].decode() in CLASSES
    assert served['probabilities'].shape == (1, len(CLASSES))
