"""Input kinds without training: the registry, serving receivers and the signature names they own."""
import re

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from helpers import trainer_flags
from models import registry
from trainer.input_kinds import registry as input_kinds
from trainer.input_kinds.base import InputOptions
from trainer.input_kinds.image_classification import image_example


def png_bytes(height, width, channels=1, value=255):
    image = np.full([height, width, channels], value, np.uint8)
    return tf.io.encode_png(image).numpy()


def receive(spec, feed, options=InputOptions()):
    """Builds the model's serving receiver in a graph and evaluates its features on feed."""
    kind = input_kinds.for_model(spec)
    with tf.Graph().as_default() as graph:
        receiver = kind.serving_receiver_fn(spec, options)()
        with tf.compat.v1.Session(graph=graph) as session:
            features = session.run(receiver.features, feed_dict={
                receiver.receiver_tensors[name]: value for name, value in feed.items()})
    return receiver, features


def test_every_model_has_a_registered_input_kind():
    for name in registry.names():
        spec = registry.get(name)
        assert input_kinds.for_model(spec).name == spec.input_kind
    with pytest.raises(UserError, match='unknown input kind'):
        input_kinds.get('no_such_kind')


@pytest.mark.parametrize('model, options, message', [
    ('mnist_cnn', InputOptions(face_image_size=112), '--face_image_size is for face photos '
     '(face_diff, face_embedding, face_siamese); mnist_cnn reads image records: '
     'leave --face_image_size off'),
    ('image_classifier', InputOptions(same_fraction=0.3), '--same_fraction is for face photos'),
    ('csv_mlp', InputOptions(pair_sampler='generator'), '--pair_sampler is for face photos'),
    ('linear_classifier', InputOptions(augment_shear=10.0), '--augment_shear is for image records '
     '(image_classifier, mnist_cnn); linear_classifier reads table rows'),
    ('face_embedding', InputOptions(augment_flip=True), '--augment_flip is for image records '
     '(image_classifier, mnist_cnn); face_embedding reads face photos: leave --augment_flip off'),
])
def test_an_input_option_of_another_kind_is_refused_not_ignored(model, options, message):
    with pytest.raises(UserError, match=re.escape(message)):
        input_kinds.check_options(registry.get(model), options)


def test_each_kind_takes_its_own_input_options():
    input_kinds.check_options(registry.get('face_embedding'), InputOptions(
        same_fraction=0.3, face_image_size=112, face_crop_fraction=0.4, pair_sampler='generator',
        self_pair_fraction=0.5, augment=True, shuffle_buffer=10))
    input_kinds.check_options(registry.get('mnist_cnn'), InputOptions(
        augment=True, augment_flip=True, augment_shear=10.0, augment_strength=1.5,
        augment_elastic=1.0, shuffle_buffer=10))


@pytest.mark.parametrize('options, message', [
    (InputOptions(pair_sampler='generator', self_pair_fraction=0.5, augment=True),
     '--self_pair_fraction needs --pair_sampler=graph'),
    (InputOptions(self_pair_fraction=0.5), 'only --augment makes two different views'),
])
def test_self_pairs_need_the_graph_sampler_and_augment(options, message):
    with pytest.raises(UserError, match=message):
        input_kinds.get('face_pairs').train_input_fn(
            registry.get('face_embedding'), 'no/such/train-*', '--train_files', 8, 0, options)


def test_image_receiver_decodes_any_size_to_the_model_shape():
    spec = registry.get('mnist_cnn')
    receiver, features = receive(spec, {'image_bytes': [png_bytes(10, 20), png_bytes(28, 28)]})
    assert features['image'].shape == (2, 28, 28, 1)
    np.testing.assert_allclose(features['image'], 1.0, atol=1e-6)  # white in, 1.0 out
    assert set(receiver.receiver_tensors_alternatives) == {'pixels', 'example'}
    assert input_kinds.for_model(spec).signature_renames == {
        'pixels:serving_default': 'predict_pixels', 'classify': None,
        'example:classify': 'classify', 'example:serving_default': None}


def test_image_receiver_reads_the_classify_apis_examples():
    spec = registry.get('mnist_cnn')
    example = image_example(png_bytes(10, 20, value=51))
    with tf.Graph().as_default() as graph:
        receiver = input_kinds.for_model(spec).serving_receiver_fn(spec, InputOptions())()
        examples = receiver.receiver_tensors_alternatives['example']['examples']
        with tf.compat.v1.Session(graph=graph) as session:
            image = session.run(receiver.features['image'], {examples: [example]})
    assert image.shape == (1, 28, 28, 1)
    np.testing.assert_allclose(image, 0.2, atol=1e-6)


def test_face_pair_receiver_crops_the_centre_of_each_photo():
    spec = registry.get('face_siamese')
    photo = np.zeros([40, 40, 1], np.uint8)
    photo[10:30, 10:30] = 200  # the central half (crop fraction 0.5) is all that is kept
    encoded = tf.io.encode_png(photo).numpy()
    receiver, features = receive(spec, {'image_bytes_a': [encoded], 'image_bytes_b': [encoded]})
    assert features['image_a'].shape == (1,) + tuple(spec.image_shape)
    np.testing.assert_allclose(features['image_a'], 200 / 255, atol=1e-5)
    np.testing.assert_array_equal(features['image_a'], features['image_b'])
    assert set(receiver.receiver_tensors_alternatives['single']) == {'image_bytes'}


def test_face_image_size_resizes_the_crop_for_serving_and_warmup():
    spec = registry.get('face_embedding')
    options = InputOptions(face_image_size=40)
    photo = png_bytes(90, 90, value=200)
    _, features = receive(spec, {'image_bytes_a': [photo], 'image_bytes_b': [photo]}, options)
    assert features['image_a'].shape == features['image_b'].shape == (1, 40, 40, 1)
    warmup = input_kinds.for_model(spec).warmup_inputs(spec, options)['image_bytes'][0]
    assert tf.io.decode_png(warmup).shape == (80, 80, 1)  # its central half is the model's size


def test_csv_receiver_passes_the_float_columns_through():
    spec = registry.get('csv_mlp')
    rows = np.arange(2 * spec.num_features, dtype=np.float32).reshape(2, -1)
    _, features = receive(spec, {'inputs': rows})
    np.testing.assert_array_equal(features['inputs'], rows)


def test_input_options_defaults_are_the_flags_defaults():
    flag_values = trainer_flags('--train_files=x', '--model_dir=y')
    assert InputOptions() == InputOptions(
        shuffle_buffer=flag_values.shuffle_buffer, pair_sampler=flag_values.pair_sampler,
        same_fraction=flag_values.same_fraction,
        self_pair_fraction=flag_values.self_pair_fraction,
        face_crop_fraction=flag_values.face_crop_fraction,
        face_image_size=flag_values.face_image_size)
