"""--model_params text -> typed overrides of a model's params."""
import pytest

from common.errors import UserError
from trainer.config import params_flag

DEFAULTS = {'similarity_scale': 30.0, 'embedding_size': 128, 'flip_average': True,
            'zoom_views': (1.2,), 'tower_filters': (32, 64), 'optimizer': 'adam'}


def parse(text):
    return params_flag.parse(text, DEFAULTS, 'face_embedding')


def test_values_take_the_type_of_the_default():
    assert parse('similarity_scale=40, embedding_size=64,flip_average=False,optimizer=sgd') == {
        'similarity_scale': 40.0, 'embedding_size': 64, 'flip_average': False, 'optimizer': 'sgd'}
    assert parse('zoom_views=[1.1, 1.3],tower_filters=[32,64,128]') == {
        'zoom_views': (1.1, 1.3), 'tower_filters': (32, 64, 128)}
    assert parse('zoom_views=[]') == {'zoom_views': ()}
    assert parse('') == {} and parse(None) == {}


@pytest.mark.parametrize('text, message', [
    ('similarity=40', r"face_embedding has no param 'similarity'; its params: embedding_size, "),
    ('embedding_size=1.5', r'--model_params: embedding_size=1.5 is not an integer'),
    ('similarity_scale=high', r'similarity_scale=high is not a number'),
    ('flip_average=yes', r'flip_average=yes: write true or false'),
    ('zoom_views=1.1', r'zoom_views=1.1: a list is written in brackets'),
    ('tower_filters=[32,wide]', r'tower_filters=\[32,wide\] is not an integer'),
    ('embedding_size=64,embedding_size=32', r'embedding_size is given twice'),
    ('embedding_size 64', r"cannot read 'embedding_size 64'; write name=value"),
    ('embedding_size=64,,optimizer=sgd', r"cannot read ',optimizer=sgd'"),
])
def test_bad_text_names_the_flag_and_what_to_write(text, message):
    with pytest.raises(UserError, match=message):
        parse(text)
