"""Image classification records: raw uint8 pixels and an int64 label.

Pixels are stored as raw bytes (one byte a pixel), never as a FloatList, and are
parsed a whole batch at a time with tf.io.parse_example. The image shape is the
split's, in manifest.json (`image_shape`), not repeated in every record: a shard is
then 1.07x its raw pixel bytes (with height and width per record it was 1.11x).
Records written with height and width still read: parsing ignores features it
does not ask for.
"""
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from common.errors import UserError
from input_fns.images import image_augment, image_orientation
from input_fns.records import pipeline

FEATURE_SPEC = {
    'image': tf.io.FixedLenFeature([], tf.string),
    'label': tf.io.FixedLenFeature([], tf.int64),
}
# How the features are described in manifest.json.
MANIFEST_FEATURES = {
    'image': 'bytes: raw uint8 pixels, row-major, height*width*channels of image_shape',
    'label': 'int64',
}


def encode_example(pixels: np.ndarray, label: int) -> bytes:
    """A serialized tf.train.Example for one uint8 image of shape [H, W] or [H, W, C]; the
    shape goes in the manifest."""
    pixels = np.asarray(pixels)
    if pixels.dtype != np.uint8:
        raise ValueError(f'pixels must be uint8, got {pixels.dtype}')
    return tf.train.Example(features=tf.train.Features(feature={
        'image': tf.train.Feature(bytes_list=tf.train.BytesList(value=[pixels.tobytes()])),
        'label': tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
    })).SerializeToString()


def parse_batch_fn(image_shape: Sequence[int]):
    """Returns a function: [batch] serialized Examples -> ({'image': float32 [B,H,W,C] in [0,1]}, int32 labels)."""
    image_shape = list(image_shape)

    def parse_batch(serialized):
        parsed = tf.io.parse_example(serialized, FEATURE_SPEC)
        pixels = tf.io.decode_raw(parsed['image'], tf.uint8)
        images = tf.reshape(pixels, [-1] + image_shape)
        images = tf.cast(images, tf.float32) * (1.0 / 255.0)
        return {'image': images}, tf.cast(parsed['label'], tf.int32)

    return parse_batch


def _check_image_shape(image_shape: Sequence[int]):
    expected_bytes = int(np.prod(image_shape))

    def check(example, path):
        found = len(example['image'].numpy())
        if found != expected_bytes:
            raise UserError(f'{path}: images are {found} bytes, but the model expects '
                            f'{"x".join(map(str, image_shape))} ({expected_bytes} bytes); '
                            'use shards prepared for this model')

    return check


def make_input_fn(file_pattern: str, image_shape: Sequence[int], batch_size: int, training: bool,
                  seed: Optional[int] = None, flag_name: str = 'file pattern',
                  shuffle_buffer: int = pipeline.DEFAULT_SHUFFLE_BUFFER,
                  affine: Optional[image_augment.AffineRange] = None, flip: bool = False):
    """An Estimator input_fn over image shards; checks the files now, not mid-training.

    affine: training batches are randomly shifted, rotated, scaled (and sheared) within it; flip:
    mirrored left-right at random (never evaluation).
    """
    files = pipeline.list_record_files(file_pattern, flag_name)
    pipeline.check_record_files(files, FEATURE_SPEC, _check_image_shape(image_shape))
    parse = parse_batch_fn(image_shape)
    if training and (affine or flip):
        parse = image_augment.augment_batch_fn(parse, affine, flip)
    return pipeline.record_input_fn(files, parse, batch_size, training, seed, shuffle_buffer)


RESIZE_MODES = ('pad', 'crop', 'stretch')


def fit_image(image, image_shape: Sequence[int], resize: str):
    """An image uint8 [h, w, C] of any size -> uint8 image_shape [H, W, C], as `prepare images`
    stores it and the export's serving_default receives it (the same function, so a served
    photo is fitted as the training photos were).

    resize: 'stretch' to H x W; 'pad' scaled to fit inside, centred, the rest black; 'crop'
    scaled to cover H x W, the centre kept. Area-averaged (antialias) when shrinking.
    """
    height, width, channels = image_shape
    if resize == 'stretch':
        fitted = tf.image.resize(image, [height, width], antialias=True)
    elif resize in ('pad', 'crop'):
        size = tf.cast(tf.shape(image)[:2], tf.float32)
        ratios = tf.constant([height, width], tf.float32) / size
        scale = tf.reduce_min(ratios) if resize == 'pad' else tf.reduce_max(ratios)
        scaled_size = tf.maximum(tf.cast(tf.round(size * scale), tf.int32), 1)
        fitted = tf.image.resize_with_crop_or_pad(
            tf.image.resize(image, scaled_size, antialias=True), height, width)
    else:
        raise ValueError(f'resize {resize!r}: use one of {", ".join(RESIZE_MODES)}')
    fitted = tf.cast(tf.round(tf.clip_by_value(fitted, 0.0, 255.0)), tf.uint8)
    return tf.ensure_shape(fitted, [height, width, channels])


def decode_any_image(encoded, channels: int):
    """PNG, JPEG, GIF or BMP bytes -> uint8 [H, W, channels], whatever channels the file has,
    upright as a JPEG's EXIF orientation says (a phone's portrait photo is stored sideways).

    tf.io.decode_image refuses some combinations itself (a GIF as 1 channel, a BMP with
    alpha as 3), so decode as stored, then drop alpha and convert grey <-> RGB.
    """
    image = tf.io.decode_image(encoded, channels=0, expand_animations=False)
    image = image_orientation.upright(image, image_orientation.exif_orientation(encoded))
    stored = tf.shape(image)[-1]
    rgb = tf.cond(stored >= 3, lambda: image[..., :3],
                  lambda: tf.image.grayscale_to_rgb(image[..., :1]))
    return tf.image.rgb_to_grayscale(rgb) if channels == 1 else rgb
