"""--param and --objective, as deploy katib, deploy vertex --hptune and ./run.sh sweep read them:
what is right is read, what is wrong is one line naming the flag and what to do."""
import re

import pytest

from common.errors import UserError
from trainer.config import search_space


@pytest.mark.parametrize('text, message', [
    ('margin:double:0.1:0.5',
     "mnist_cnn has no param 'margin'; its params: batch_norm, class_weights, conv_filters, "),
    ('dropout_rate:double:0.6:0.1', 'the min 0.6 is not below the max 0.1'),
    ('learning_rate:double:0:0.1:log', 'a log scale needs a min above 0'),
    ('dropout_rate:int:1:5', 'dropout_rate is not an integer param'),
    ('dropout_rate:double:0.1', 'write dropout_rate:double:MIN:MAX or'),
    ('dropout_rate:uniform:0.1:0.5', 'write NAME:double:MIN:MAX[:log]'),
    ('optimizer:categorical:', 'give the values after categorical:'),
    ('dropout_rate:categorical:0.1,high', 'high is not a number'),
])
def test_bad_params_name_the_flag_and_what_is_wrong(text, message):
    with pytest.raises(UserError, match=re.escape(f'--param={text}: {message}')):
        search_space.parse_param(text, 'mnist_cnn')


def test_params_and_objectives_that_are_right():
    assert search_space.parse_param('tower_filters:categorical:[32,64],[32,64,128]',
                                    'face_embedding').choices == ('[32,64]', '[32,64,128]')
    assert search_space.parse_param('embedding_size:int:16:64:log', 'face_siamese') == \
        search_space.Param('embedding_size', 'int', 16, 64, log=True)
    assert search_space.parse_objective('lfw_protocol_auc_mean:maximize', 'face_embedding').maximize
    # the input flags of the model's kind, which a trial passes as --NAME=VALUE like a param
    assert search_space.parse_param('augment_shear:double:0:20', 'mnist_cnn') == \
        search_space.Param('augment_shear', 'double', 0.0, 20.0)
    assert search_space.parse_param('same_fraction:double:0.5:0.9', 'face_embedding').high == 0.9
    with pytest.raises(UserError, match=re.escape(
            "--param=same_fraction:double:0.5:0.9: mnist_cnn has no param 'same_fraction'; its "
            'params: ') + '.*; its input flags: augment_strength, augment_shear, augment_elastic$'):
        search_space.parse_param('same_fraction:double:0.5:0.9', 'mnist_cnn')
    with pytest.raises(UserError, match=re.escape(
            "--objective=auc:maximize: mnist_cnn's evaluation does not report auc; it reports "
            'accuracy, loss')):
        search_space.parse_objective('auc:maximize', 'mnist_cnn')
    with pytest.raises(UserError, match='--objective=accuracy: write METRIC:maximize or'):
        search_space.parse_objective('accuracy', 'mnist_cnn')
    with pytest.raises(UserError, match='--param: dropout_rate is given twice'):
        search_space.parse_params(['dropout_rate:double:0.1:0.2', 'dropout_rate:double:0.3:0.4'],
                                  'mnist_cnn')


def test_the_tunable_input_flags_are_the_kinds_own():
    """search_space lists them by hand (the kinds import TensorFlow); a flag tuned for a model
    whose kind does not read it would be refused in every trial."""
    from models import registry
    from trainer.input_kinds import registry as input_kinds
    for model in registry.names():
        _, input_flags = search_space.tunable_defaults(model)
        kind = input_kinds.for_model(registry.get(model))
        assert set(input_flags) <= set(kind.own_options), model
