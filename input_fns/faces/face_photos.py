"""A face photo as `prepare faces` and `prepare face_pairs` read it: stored as a JPEG upright, and
checked to decode as training decodes it. Training decodes only the central crop of a JPEG
(tf.io.decode_and_crop_jpeg: the fastest decode there is), so a photo in any other format (PNG,
WebP, HEIC, AVIF...: input_fns/images/converted_images.py) and a CMYK JPEG, which libjpeg makes no grey
from, are stored re-encoded as an RGB JPEG (quality 95, no chroma subsampling)."""
from typing import Dict

import tensorflow as tf
from absl import logging

from common import files, paths
from common.errors import op_error_summary, UserError
from input_fns.faces import face_images
from input_fns.images import converted_images, image_orientation


@tf.function(input_signature=[tf.TensorSpec([], tf.string)])
def decode_as_training_does(jpeg):
    """The decode training and evaluation use, on the whole photo, for both channel counts a
    model may ask for: what prepare accepts, training can read (tf.io.decode_jpeg alone
    accepts a PNG named .jpg, which training's decode_and_crop_jpeg refuses)."""
    return [face_images.decode_face(jpeg, face_images.FaceGeometry(
        image_size=8, channels=channels, crop_fraction=1.0)) for channels in (1, 3)]


@tf.function(input_signature=[tf.TensorSpec([], tf.string)])
def as_upright_jpeg(encoded):
    """PNG, GIF (its first frame), BMP or JPEG bytes as an RGB JPEG, turned as a JPEG's EXIF
    orientation says (a phone's portrait photo is stored sideways; the other formats come
    upright), the tag dropped with the rest of EXIF. Training reads no EXIF (reading the tag in
    its pipeline more than halved LFW's pairs/s), so prepare stores every photo upright."""
    image = tf.io.decode_image(encoded, channels=3, dtype=tf.uint8, expand_animations=False)
    image = image_orientation.upright(image, image_orientation.exif_orientation(encoded))
    return tf.io.encode_jpeg(image, quality=95, chroma_downsampling=False)


def _training_reads_as_is(data: bytes) -> bool:
    """A JPEG, not CMYK (one that does not decode is left to decode_as_training_does)."""
    if not data.startswith(b'\xff\xd8\xff'):
        return False
    try:
        return int(tf.io.extract_jpeg_shape(data)[2]) != 4
    except tf.errors.InvalidArgumentError:
        return True


def stored_photo(data: bytes) -> bytes:
    """What prepare stores of a photo's bytes, once it has checked that training decodes them."""
    if not _training_reads_as_is(data):
        data = as_upright_jpeg(tf.constant(converted_images.decodable(data))).numpy()
    elif (image_orientation.may_have_orientation(data) and  # ~1 ms a photo: most have no EXIF
          int(image_orientation.exif_orientation(tf.constant(data))) != 1):
        data = as_upright_jpeg(tf.constant(data)).numpy()
    decode_as_training_does(tf.constant(data))
    return data


class PhotoReader:
    """Reads photos once each, checking that they decode; bad ones are counted, or fatal if strict."""

    def __init__(self, root: str, strict: bool):
        self.root, self.strict = root, strict
        self.bad: Dict[str, str] = {}
        self._cache: Dict[str, bytes] = {}

    def read(self, relative_path: str):
        if relative_path in self._cache:
            return self._cache[relative_path]
        if relative_path in self.bad:
            return None
        path = paths.join(self.root, relative_path)
        try:
            data = stored_photo(files.read_bytes(path))
        except tf.errors.OpError as e:
            reason = (f'not a decodable {converted_images.FORMATS} photo'
                      if isinstance(e, tf.errors.InvalidArgumentError)
                      else e.message.strip().splitlines()[0])
            detail = (f' ({op_error_summary(e)})'
                      if isinstance(e, tf.errors.InvalidArgumentError) else '')
            if self.strict:
                raise UserError(f'{path}: {reason}{detail} (without --strict it would be skipped)')
            logging.warning('skipping %s: %s%s', path, reason, detail)
            self.bad[relative_path] = reason
            return None
        self._cache[relative_path] = data
        return data
