"""A face photo as `prepare faces` and `prepare face_pairs` read it: stored as a JPEG upright, and
checked to decode as training decodes it. Training decodes only the central crop of a JPEG
(tf.io.decode_and_crop_jpeg: the fastest decode there is) and reads no EXIF (reading the tag in
its pipeline more than halved LFW's pairs/s), so a photo in any other format (PNG, WebP, HEIC,
AVIF...), a CMYK JPEG, which libjpeg makes no grey from, and a JPEG that its EXIF orientation
turns (a phone's portrait photo, stored sideways) are stored re-encoded upright as an RGB JPEG
by input_fns/images/converted_images.py (quality 95, no chroma subsampling, its EXIF dropped)."""
from typing import Dict

import tensorflow as tf
from absl import logging

from common import files, paths
from common.errors import op_error_summary, UserError
from input_fns.faces import face_images
from input_fns.images import converted_images


@tf.function(input_signature=[tf.TensorSpec([], tf.string)])
def decode_as_training_does(jpeg):
    """The decode training and evaluation use, on the whole photo, for both channel counts a
    model may ask for: what prepare accepts, training can read (tf.io.decode_jpeg alone
    accepts a PNG named .jpg, which training's decode_and_crop_jpeg refuses)."""
    return [face_images.decode_face(jpeg, face_images.FaceGeometry(
        image_size=8, channels=channels, crop_fraction=1.0)) for channels in (1, 3)]


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
    if not _training_reads_as_is(data) or converted_images.is_turned(data):
        data = converted_images.upright_jpeg(data)
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
