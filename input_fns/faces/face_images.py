"""How a face photo becomes model input: a centred square crop, decoded, resized, augmented.

Used by the training and evaluation pipelines and by the serving receiver alike.
"""
import dataclasses

import tensorflow as tf

from input_fns.images import image_augment, image_orientation, image_records


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
    """JPEG bytes -> float32 [size, size, channels] in [0, 1]; decodes only the central crop.
    Reads no EXIF orientation: prepare stores photos upright (face_photos.as_upright_jpeg)."""
    top, left, side = _crop_box(tf.io.extract_jpeg_shape(jpeg), geometry.crop_fraction, jitter)
    image = tf.io.decode_and_crop_jpeg(jpeg, tf.stack([top, left, side, side]),
                                       channels=geometry.channels)
    return _resize(image, geometry)


def decode_any_face(encoded, geometry: FaceGeometry):
    """As decode_face, for any PNG/JPEG/GIF/BMP bytes (serving), turned upright as a JPEG's EXIF
    orientation says, as prepare stores a training photo. A JPEG goes through decode_face itself,
    as in training and evaluation: decoded to RGB and then made grey, its pixels differed by up
    to 7/255, and a served score from the one its threshold was chosen on. The centred square
    is the same region of the photo turned or not, so it is turned after its crop."""
    def any_format():
        image = image_records.decode_any_image(encoded, geometry.channels)
        top, left, side = _crop_box(tf.shape(image), geometry.crop_fraction)
        return _resize(tf.image.crop_to_bounding_box(image, top, left, side, side), geometry)

    def jpeg():
        if geometry.channels != 1:
            return turned(decode_face(encoded, geometry))
        # libjpeg makes no grey from CMYK (so prepare refused those photos for training): RGB first.
        cmyk = tf.equal(tf.io.extract_jpeg_shape(encoded)[2], 4)
        return tf.cond(cmyk, any_format, lambda: turned(decode_face(encoded, geometry)))

    def turned(face):
        return image_orientation.upright(face, image_orientation.exif_orientation(encoded))

    return tf.cond(tf.io.is_jpeg(encoded), jpeg, any_format)


def _resize(image, geometry):
    image = tf.image.resize(image, [geometry.image_size, geometry.image_size])
    image.set_shape([geometry.image_size, geometry.image_size, geometry.channels])
    return image * (1.0 / 255.0)


def augment_batch(images):
    """Training only: each photo of a batch [N, H, W, C] in [0, 1] rotated (±8°), maybe
    mirrored, its brightness (±0.1) and contrast (0.8-1.2) changed, each by its own draw.
    A handful of ops per batch rather than per photo."""
    count = tf.shape(images)[0]

    def per_photo(low, high):
        return tf.random.uniform([count, 1, 1, 1], low, high)

    images = image_augment.random_affine(images, image_augment.FACES)
    images = image_augment.random_flip(images)
    images += per_photo(-0.1, 0.1)
    mean = tf.reduce_mean(images, axis=[1, 2, 3], keepdims=True)
    images = (images - mean) * per_photo(0.8, 1.2) + mean
    return tf.clip_by_value(images, 0.0, 1.0)


def augment_pair_batch(features, labels):
    """augment_batch on both photos of a batch of pairs (after decode_training_pair)."""
    return {name: augment_batch(images) for name, images in features.items()}, labels


def decode_training_pair(geometry, jitter_crops):
    """(jpeg_a, jpeg_b, label, step) -> ({image_a, image_b}, label). jitter_crops: each crop
    moved and scaled at random (seeded by step) before decoding; the rest of the
    augmentation is per batch (augment_pair_batch)."""
    def decode(jpeg_a, jpeg_b, label, step):
        if not jitter_crops:
            return {'image_a': decode_face(jpeg_a, geometry),
                    'image_b': decode_face(jpeg_b, geometry)}, label
        seed = tf.stack([step, tf.constant(7, tf.int64)])
        jitter = tf.random.stateless_uniform([2, 3], seed=seed)  # crop position and scale
        return {'image_a': decode_face(jpeg_a, geometry, jitter[0]),
                'image_b': decode_face(jpeg_b, geometry, jitter[1])}, label
    return decode
