"""Image classification records: an int64 label and the image, stored one of two ways
(STORED_FORMS, `prepare images --stored_as`):

- 'pixels' (the default): raw uint8 bytes (one byte a pixel), never a FloatList, decoded a whole
  batch at a time with one decode_raw: training decodes nothing. The image shape is the split's,
  in manifest.json (`image_shape`), not repeated in every record: a shard is then 1.07x its raw
  pixel bytes (with height and width per record it was 1.11x; such records still read: parsing
  ignores features it does not ask for).
- 'jpeg': the fitted image encoded again as a JPEG (JPEG_QUALITY, no chroma subsampling), with
  'stored_as': b'jpeg' in each record, decoded in the graph one record at a time: 0.41x the bytes
  and 0.22x the examples/s of pixels on the bench's photos (docs/your-data.md), for a folder
  whose pixels would fill the disk.

A record without 'stored_as' holds pixels, as every record did before the JPEG form: the same
parse reads both, and a file pattern may mix them.
"""
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from common.errors import UserError
from input_fns.images import image_augment, image_orientation
from input_fns.records import pipeline

PIXELS, JPEG = 'pixels', 'jpeg'
STORED_FORMS = (PIXELS, JPEG)
JPEG_QUALITY = 95  # as face photos are stored re-encoded (converted_images.upright_jpeg)
FEATURE_SPEC = {
    'image': tf.io.FixedLenFeature([], tf.string),
    'label': tf.io.FixedLenFeature([], tf.int64),
}
# What the reader parses: the form too, pixels where a record does not say.
PARSE_SPEC = {**FEATURE_SPEC, 'stored_as': tf.io.FixedLenFeature([], tf.string, PIXELS)}
# How the features are described in manifest.json.
MANIFEST_FEATURES = {
    'image': 'bytes: raw uint8 pixels, row-major, height*width*channels of image_shape',
    'label': 'int64',
}
JPEG_MANIFEST_FEATURES = {
    'image': f'bytes: a JPEG of image_shape (quality {JPEG_QUALITY}, no chroma subsampling)',
    'label': 'int64', 'stored_as': "bytes: 'jpeg' (absent: raw pixels)",
}


def manifest_features(stored_as: str):
    return JPEG_MANIFEST_FEATURES if stored_as == JPEG else MANIFEST_FEATURES


def encode_example(pixels: np.ndarray, label: int) -> bytes:
    """A serialized tf.train.Example for one uint8 image of shape [H, W] or [H, W, C]; the
    shape goes in the manifest."""
    pixels = np.asarray(pixels)
    if pixels.dtype != np.uint8:
        raise ValueError(f'pixels must be uint8, got {pixels.dtype}')
    return _example(pixels.tobytes(), label)


def encode_jpeg_example(jpeg: bytes, label: int) -> bytes:
    """A serialized tf.train.Example holding a fitted image as stored_jpeg encoded it."""
    return _example(jpeg, label, stored_as=JPEG)


def _example(image: bytes, label: int, **text) -> bytes:
    feature = {
        'image': tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
        'label': tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
        **{name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
           for name, value in text.items()}}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def stored_jpeg(fitted):
    """A fitted uint8 image [H, W, C] as the JPEG form stores it (a graph op)."""
    return tf.io.encode_jpeg(fitted, quality=JPEG_QUALITY, chroma_downsampling=False)


def parse_batch_fn(image_shape: Sequence[int]):
    """Returns a function: [batch] serialized Examples -> ({'image': float32 [B,H,W,C] in [0,1]}, int32 labels)."""
    image_shape = list(image_shape)

    def decode_one(stored):
        image, stored_as = stored
        return tf.cond(tf.equal(stored_as, PIXELS),
                       lambda: tf.reshape(tf.io.decode_raw(image, tf.uint8), image_shape),
                       lambda: tf.ensure_shape(tf.io.decode_jpeg(image, image_shape[-1]),
                                               image_shape))

    def parse_batch(serialized):
        parsed = tf.io.parse_example(serialized, PARSE_SPEC)
        # A batch of pixels (older shards are): one decode_raw, as fast as it ever was.
        images = tf.cond(
            tf.reduce_all(tf.equal(parsed['stored_as'], PIXELS)),
            lambda: tf.reshape(tf.io.decode_raw(parsed['image'], tf.uint8), [-1] + image_shape),
            lambda: tf.map_fn(decode_one, (parsed['image'], parsed['stored_as']),
                              fn_output_signature=tf.TensorSpec(image_shape, tf.uint8)))
        images = tf.cast(images, tf.float32) * (1.0 / 255.0)
        return {'image': images}, tf.cast(parsed['label'], tf.int32)

    return parse_batch


def _check_image_shape(image_shape: Sequence[int]):
    expected_bytes = int(np.prod(image_shape))
    expected = "x".join(map(str, image_shape))

    def check(example, path):
        stored_as = example['stored_as'].numpy().decode(errors='replace')
        if stored_as == PIXELS:
            found = len(example['image'].numpy())
            if found != expected_bytes:
                raise UserError(f'{path}: images are {found} bytes, but the model expects '
                                f'{expected} ({expected_bytes} bytes); use shards prepared for '
                                'this model')
        elif stored_as == JPEG:
            try:
                found = tf.io.extract_jpeg_shape(example['image']).numpy().tolist()
            except tf.errors.InvalidArgumentError:
                raise UserError(f'{path}: its records say JPEG, but the first does not decode as '
                                'one; run prepare images again') from None
            if found[:2] != list(image_shape[:2]):
                raise UserError(f'{path}: images are {"x".join(map(str, found[:2]))} JPEGs, but '
                                f'the model expects {expected}; use shards prepared for this model')
        else:
            raise UserError(f'{path}: images stored as {stored_as!r}, which this version cannot '
                            f'read (it reads {" and ".join(STORED_FORMS)}); prepare them again')

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
    pipeline.check_record_files(files, PARSE_SPEC, _check_image_shape(image_shape))
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
