"""A face photo as `prepare faces` and `prepare face_pairs` read it: checked to decode as training
decodes it, and stored upright."""
from typing import Dict

import tensorflow as tf
from absl import logging

from common import files, paths
from common.errors import UserError, op_error_summary
from input_fns import face_images, image_orientation


@tf.function(input_signature=[tf.TensorSpec([], tf.string)])
def decode_as_training_does(jpeg):
    """The decode training and evaluation use, on the whole photo, for both channel counts a
    model may ask for: what prepare accepts, training can read (tf.io.decode_jpeg alone
    accepts a PNG named .jpg, which training's decode_and_crop_jpeg refuses)."""
    return [face_images.decode_face(jpeg, face_images.FaceGeometry(
        image_size=8, channels=channels, crop_fraction=1.0)) for channels in (1, 3)]


@tf.function(input_signature=[tf.TensorSpec([], tf.string)])
def turned_upright(jpeg):
    """A JPEG with an EXIF orientation (a phone's portrait photo is stored sideways) as a viewer
    shows it: decoded, turned and encoded again, the tag dropped with the rest of EXIF; any
    other as it is. Training reads no EXIF (reading the tag in its pipeline more than halved
    LFW's pairs/s), so prepare stores every photo upright."""
    orientation = image_orientation.exif_orientation(jpeg)

    def turned():
        image = image_orientation.upright(tf.io.decode_jpeg(jpeg, channels=3), orientation)
        return tf.io.encode_jpeg(image, quality=95, chroma_downsampling=False)

    return tf.cond(tf.equal(orientation, 1), lambda: jpeg, turned)


def stored_photo(data: bytes) -> bytes:
    """What prepare stores of a photo's bytes, once it has checked that training decodes them."""
    if image_orientation.may_have_orientation(data):  # ~1 ms a photo: most have no EXIF
        data = turned_upright(tf.constant(data)).numpy()
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
            reason = ('not a decodable JPEG' if isinstance(e, tf.errors.InvalidArgumentError)
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
