"""--augment: random shifts, rotations, scaling (shear and elastic distortion) of training images,
never of evaluation or serving."""
import os

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from helpers import make_digit_arrays
from input_fns.faces import face_images, face_pairs, synthetic_faces
from input_fns.faces.face_records import PERSON_SPEC
from input_fns.images import image_augment
from models import registry
from trainer.input_kinds import registry as input_kinds
from trainer.input_kinds.base import InputOptions

AUGMENT = InputOptions(augment=True)


def ink_centre(image):
    image = np.asarray(image)[..., 0]
    rows, cols = np.indices(image.shape)
    return np.array([(rows * image).sum(), (cols * image).sum()]) / image.sum()


def test_a_shift_moves_the_ink_and_a_rotation_turns_it():
    bar = np.zeros([1, 28, 28, 1], np.float32)
    bar[0, 10:18, 12:16] = 1.0  # 8 rows tall, 4 columns wide
    shifted = image_augment.warp(bar, image_augment.affine_transforms(
        tf.constant([0.0]), tf.constant([1.0]), tf.constant([3.0]), tf.constant([-2.0]), 28, 28))
    np.testing.assert_allclose(ink_centre(shifted[0]) - ink_centre(bar[0]), [3.0, -2.0], atol=1e-4)
    turned = image_augment.warp(bar, image_augment.affine_transforms(
        tf.constant([90.0]), tf.constant([1.0]), tf.constant([0.0]), tf.constant([0.0]), 28, 28))
    rows, cols = np.nonzero(np.asarray(turned)[0, ..., 0] > 0.5)
    assert (rows.ptp() + 1, cols.ptp() + 1) == (4, 8)  # now 4 tall, 8 wide


def test_a_shear_slants_a_vertical_bar():
    bar = np.zeros([1, 28, 28, 1], np.float32)
    bar[0, 4:24, 13:15] = 1.0  # 20 rows tall, 2 columns wide
    slanted = image_augment.warp(bar, image_augment.affine_transforms(
        tf.constant([0.0]), tf.constant([1.0]), tf.constant([0.0]), tf.constant([0.0]), 28, 28,
        tf.constant([20.0])))[0]
    top, bottom = ink_centre(slanted[4:9]), ink_centre(slanted[19:24])
    # 15 rows apart, so tan(20°) * 15 = 5.5 columns apart; the middle row stays where it was
    assert bottom[1] - top[1] == pytest.approx(np.tan(np.radians(20.0)) * 15, abs=0.2)
    assert ink_centre(slanted)[1] == pytest.approx(ink_centre(bar[0])[1], abs=0.1)


def test_augment_strength_scales_the_draw_and_zero_leaves_images_as_they_are():
    images, _ = make_digit_arrays(32, seed=6)
    images = tf.constant(images[..., None].astype(np.float32) / 255.0)
    still = image_augment.random_affine(images, image_augment.DIGITS.stronger(0.0, 0.0))
    np.testing.assert_allclose(still, images, atol=1e-5)
    wider = image_augment.DIGITS.stronger(1.5, 15.0)
    assert (wider.max_degrees, wider.max_scale_change, wider.max_shift_fraction,
            wider.max_shear_degrees) == pytest.approx((15.0, 0.15, 0.15, 15.0))
    sheared = image_augment.random_affine(images, image_augment.DIGITS.stronger(0.0, 15.0))
    assert np.mean(np.abs(sheared - images.numpy()).sum(axis=(1, 2, 3)) > 1.0) > 0.8


def test_an_elastic_field_is_smooth_has_the_asked_length_and_bends_strokes():
    fields = image_augment.elastic_fields(16, 28, 28, 1.5, seed=tf.constant([3, 4])).numpy()
    lengths = np.sqrt((fields ** 2).sum(axis=3).mean(axis=(1, 2)))
    np.testing.assert_allclose(lengths, 1.5, rtol=1e-4)
    np.testing.assert_array_equal(
        fields, image_augment.elastic_fields(16, 28, 28, 1.5, seed=tf.constant([3, 4])))
    # smooth: next-door pixels move nearly alike (white noise would differ by ~1.4x the length)
    assert np.sqrt(np.mean(np.diff(fields, axis=1) ** 2)) < 0.2 * 1.5

    images, _ = make_digit_arrays(32, seed=7)
    images = tf.constant(images[..., None].astype(np.float32) / 255.0)
    no_move = image_augment.affine_transforms(tf.zeros([32]), tf.ones([32]), tf.zeros([32]),
                                              tf.zeros([32]), 28, 28)
    # with no displacement it reads exactly as the projective-transform op
    turned = image_augment.affine_transforms(tf.fill([32], 30.0), tf.fill([32], 1.1),
                                             tf.fill([32], 2.0), tf.fill([32], -1.0), 28, 28)
    still = tf.zeros([32, 28, 28, 2])
    np.testing.assert_allclose(image_augment.warp_elastic(images, turned, still),
                               image_augment.warp(images, turned), atol=1e-5)
    # a uniform field (dy, dx) = (2, 1) reads each pixel from 2 rows down, 1 column right
    moved = image_augment.warp_elastic(images, no_move, tf.tile([[[[2.0, 1.0]]]], [32, 28, 28, 1]))
    np.testing.assert_allclose(moved[:, :-2, :-1], images[:, 2:, 1:], atol=1e-5)
    bent = image_augment.random_affine(images, image_augment.DIGITS.stronger(0.0, 0.0, 1.5)).numpy()
    assert bent.min() >= 0.0 and bent.max() <= 1.0
    assert np.all(np.abs(bent - images.numpy()).sum(axis=(1, 2, 3)) > 1.0)
    ink_ratio = bent.sum(axis=(1, 2, 3)) / images.numpy().sum(axis=(1, 2, 3))
    assert np.all((ink_ratio > 0.8) & (ink_ratio < 1.2))


def test_random_affine_keeps_shape_range_and_ink():
    images, _ = make_digit_arrays(64, seed=5)
    images = images[..., None].astype(np.float32) / 255.0
    augmented = image_augment.random_affine(tf.constant(images)).numpy()
    assert augmented.shape == images.shape and augmented.dtype == np.float32
    assert augmented.min() >= 0.0 and augmented.max() <= 1.0
    ink_ratio = augmented.sum(axis=(1, 2, 3)) / images.sum(axis=(1, 2, 3))
    assert np.all((ink_ratio > 0.7) & (ink_ratio < 1.3))  # moved and turned, not lost
    moved = np.abs(augmented - images).sum(axis=(1, 2, 3)) > 1.0
    assert moved.mean() > 0.9
    seed = tf.constant([4, 2])
    np.testing.assert_array_equal(image_augment.random_affine(tf.constant(images), seed=seed),
                                  image_augment.random_affine(tf.constant(images), seed=seed))


def all_images(dataset, take=None):
    batches = dataset if take is None else dataset.take(take)
    images, labels = zip(*[(features['image'].numpy(), label.numpy()) for features, label in batches])
    return np.concatenate(images), np.concatenate(labels)


def test_digits_augmented_in_training_only(digit_shards):
    spec = registry.get('mnist_cnn')
    kind = input_kinds.for_model(spec)
    plain_eval = kind.eval_input_fn(spec, digit_shards.validation_pattern, 'f', 16, InputOptions())
    augmented_eval = kind.eval_input_fn(spec, digit_shards.validation_pattern, 'f', 16, AUGMENT)
    for got, expected in zip(all_images(augmented_eval()), all_images(plain_eval())):
        np.testing.assert_array_equal(got, expected)

    originals = {image.tobytes() for image in all_images(plain_eval())[0]}
    originals |= {image.tobytes() for image in all_images(
        kind.eval_input_fn(spec, digit_shards.train_pattern, 'f', 64, InputOptions())())[0]}
    plain = kind.train_input_fn(spec, digit_shards.train_pattern, 'f', 32, 1, InputOptions())
    augmented = kind.train_input_fn(spec, digit_shards.train_pattern, 'f', 32, 1, AUGMENT)
    plain_images, _ = all_images(plain(), take=4)
    augmented_images, labels = all_images(augmented(), take=4)
    assert all(image.tobytes() in originals for image in plain_images)
    assert sum(image.tobytes() in originals for image in augmented_images) < 0.1 * len(labels)
    assert augmented_images.shape == plain_images.shape
    assert 0.0 <= augmented_images.min() and augmented_images.max() <= 1.0


def test_serving_receiver_ignores_augment():
    spec = registry.get('mnist_cnn')
    images, _ = make_digit_arrays(3, seed=7)
    encoded = [tf.io.encode_png(image[..., None]).numpy() for image in images]
    served = []
    for options in (InputOptions(), AUGMENT):
        with tf.Graph().as_default() as graph:
            receiver = input_kinds.for_model(spec).serving_receiver_fn(spec, options)()
            with tf.compat.v1.Session(graph=graph) as session:
                served.append(session.run(receiver.features['image'], feed_dict={
                    receiver.receiver_tensors['image_bytes']: encoded}))
    np.testing.assert_array_equal(*served)
    np.testing.assert_allclose(served[0][..., 0], images / 255.0, atol=1e-6)


def test_csv_models_refuse_augment(tmp_path):
    spec = registry.get('csv_mlp')
    with pytest.raises(UserError, match='--augment'):
        input_kinds.for_model(spec).train_input_fn(spec, str(tmp_path / '*.csv'), 'f', 8, 0, AUGMENT)


@pytest.mark.parametrize('options', [InputOptions(augment=True, augment_shear=10.0),
                                     InputOptions(augment=True, augment_strength=2.0),
                                     InputOptions(augment=True, augment_elastic=1.0)])
def test_faces_refuse_the_digits_augmentation_flags(options):
    with pytest.raises(UserError, match="--augment_(shear|strength|elastic) is for image records "
                                        r"\(image_classifier, mnist_cnn\); face_embedding reads"):
        input_kinds.check_options(registry.get('face_embedding'), options)


def test_face_photos_augmented_in_training_only(tmp_path):
    root = str(tmp_path / 'lfw')
    synthetic_faces.write_faces(root, num_people=12, size=64, seed=3)
    from helpers import run_prepare
    from input_fns.faces import prepare_faces
    out = str(tmp_path / 'shards')
    run_prepare(prepare_faces.prepare_faces, source_dir=str(tmp_path), output_dir=out,
                validation_fraction=0.3, num_pairs=6)
    geometry = face_images.FaceGeometry()

    photos = tf.data.TFRecordDataset(tf.io.gfile.glob(os.path.join(out, 'train-*'))).map(
        lambda record: tf.io.parse_single_example(record, PERSON_SPEC)['images']).unbatch().map(
        lambda jpeg: face_images.decode_face(jpeg, geometry))
    originals = np.stack(list(photos.as_numpy_iterator()))

    def distance_to_nearest_original(augment):
        # The training map runs out of order for speed, so photos are matched, not positions.
        input_fn = face_pairs.make_train_input_fn(os.path.join(out, 'train-*'), geometry, 8,
                                                  seed=1, augment=augment)
        images = next(iter(input_fn()))[0]['image_a'].numpy()
        assert images.shape[1:] == originals.shape[1:]
        assert 0.0 <= images.min() <= images.max() <= 1.0
        differences = np.abs(images[:, None] - originals[None]).mean(axis=(2, 3, 4))
        return differences.min(axis=1)

    assert distance_to_nearest_original(False).max() < 1e-6  # each is a photo as decoded
    assert distance_to_nearest_original(True).min() > 0.005  # every photo changed

    spec = registry.get('face_embedding')
    kind = input_kinds.for_model(spec)
    pattern = os.path.join(out, 'validation_pairs-*')
    evaluated = [next(iter(kind.eval_input_fn(spec, pattern, 'f', 4, options)()))[0]['image_a']
                 for options in (InputOptions(), AUGMENT)]
    np.testing.assert_array_equal(*evaluated)
