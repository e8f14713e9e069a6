"""How a face photo becomes model input: a centred square crop, decoded, resized, augmented.

Used by the training and evaluation pipelines and by the serving receiver alike.
"""
import dataclasses

import tensorflow as tf

from input_fns import image_augment, image_records


@dataclasses.dataclass(frozen=True)
class FaceGeometry:
    """How a photo becomes model input: a centred square crop, resized."""
    image_size: int = 64
    channels: int = 1  # 1 grayscale, 3 RGB
    crop_fraction: float = 0.5  # of the shorter side; LFW faces fill about the central half


def _crop_box(shape, crop_fraction, jitter=None):
    """(top, left, side) of the centred square; jitter in [0,1)^3 moves and scales it (training)."""
    height, width = tf.cast(shape[0], tf.float32), tf.cast(shape[1], tf.float32)
    side = tf.minimum(height, width) * crop_fraction
    center_y, center_x = height / 2, width / 2
    if jitter is not None:
        side = side * (0.9 + 0.2 * jitter[0])
        center_y += (jitter[1] - 0.5) * 0.12 * side
        center_x += (jitter[2] - 0.5) * 0.12 * side
    side = tf.minimum(tf.maximum(side, 1.0), tf.minimum(height, width))  # a 1x1 photo crops 1x1
    top = tf.clip_by_value(center_y - side / 2, 0.0, height - side)
    left = tf.clip_by_value(center_x - side / 2, 0.0, width - side)
    return tf.cast(top, tf.int32), tf.cast(left, tf.int32), tf.cast(side, tf.int32)


def decode_face(jpeg, geometry: FaceGeometry, jitter=None):
    """JPEG bytes -> float32 [size, size, channels] in [0, 1]; decodes only the central crop."""
    top, left, side = _crop_box(tf.io.extract_jpeg_shape(jpeg), geometry.crop_fraction, jitter)
    image = tf.io.decode_and_crop_jpeg(jpeg, tf.stack([top, left, side, side]),
                                       channels=geometry.channels)
    return _resize(image, geometry)


def decode_any_face(encoded, geometry: FaceGeometry):
    """As decode_face, for any PNG/JPEG/GIF/BMP bytes (serving)."""
    image = image_records.decode_any_image(encoded, geometry.channels)
    top, left, side = _crop_box(tf.shape(image), geometry.crop_fraction)
    return _resize(tf.image.crop_to_bounding_box(image, top, left, side, side), geometry)


def _resize(image, geometry):
    image = tf.image.resize(image, [geometry.image_size, geometry.image_size])
    image.set_shape([geometry.image_size, geometry.image_size, geometry.channels])
    return image * (1.0 / 255.0)


def augment(image, seed):
    """Training only: flip, brightness, contrast, rotation; stateless, so a seed reproduces it."""
    image = image_augment.random_affine(image[None], image_augment.FACES, seed + 3)[0]
    image = tf.image.stateless_random_flip_left_right(image, seed)
    image = tf.image.stateless_random_brightness(image, 0.1, seed + 1)
    image = tf.image.stateless_random_contrast(image, 0.8, 1.2, seed + 2)
    return tf.clip_by_value(image, 0.0, 1.0)


def decode_training_pair(geometry, augment_images):
    """(jpeg_a, jpeg_b, label, step) -> ({image_a, image_b}, label); augmentation seeded by step."""
    def decode(jpeg_a, jpeg_b, label, step):
        if not augment_images:
            return {'image_a': decode_face(jpeg_a, geometry),
                    'image_b': decode_face(jpeg_b, geometry)}, label
        seed = tf.stack([step, tf.constant(7, tf.int64)])
        jitter = tf.random.stateless_uniform([2, 3], seed=seed)  # crop position and scale
        image_a = augment(decode_face(jpeg_a, geometry, jitter[0]), seed + 1)
        image_b = augment(decode_face(jpeg_b, geometry, jitter[1]), seed + 11)
        return {'image_a': image_a, 'image_b': image_b}, label
    return decode
