"""A JPEG's EXIF orientation: read in the graph and the photo turned upright, for `prepare images`
and the exports alike; anything else (no tag, another format, a broken tag) left as stored."""
import numpy as np
import pytest
import tensorflow as tf

from image_tree import STORED_AS, with_orientation
from input_fns import image_orientation, image_records

# Blocks of flat colour, none the same: any turn or mirror of it is another image. 16-pixel
# blocks and no chroma subsampling keep JPEG's error at a level or two.
UPRIGHT = np.kron(np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255]],
                            [[255, 255, 0], [0, 255, 255], [40, 40, 40]]], np.uint8),
                  np.ones([16, 16, 1], np.uint8))


def stored_jpeg(orientation, **where):
    stored = np.ascontiguousarray(STORED_AS[orientation](UPRIGHT))
    jpeg = tf.io.encode_jpeg(stored, quality=100, chroma_downsampling=False).numpy()
    return with_orientation(jpeg, orientation, **where)


@pytest.mark.parametrize('orientation', range(1, 9))
def test_each_orientation_is_turned_upright_in_either_byte_order_after_any_app0(orientation):
    for where in ({}, {'little_endian': True}, {'after_jfif': True, 'ifd_offset': 20}):
        encoded = tf.constant(stored_jpeg(orientation, **where))
        assert image_orientation.exif_orientation(encoded).numpy() == orientation
        decoded = image_records.decode_any_image(encoded, 3).numpy()
        assert decoded.shape == UPRIGHT.shape
        assert np.abs(decoded.astype(int) - UPRIGHT).max() <= 2, (orientation, where)


def test_what_has_no_readable_orientation_is_left_as_stored():
    jpeg = tf.io.encode_jpeg(UPRIGHT).numpy()
    png = tf.io.encode_png(UPRIGHT).numpy()
    unreadable = {
        'a JPEG without EXIF': jpeg,
        'a PNG': png,
        'no bytes': b'',
        'a cut-off APP1': b'\xff\xd8\xff\xe1\x00',
        'orientation 0': with_orientation(jpeg, 0),
        'orientation 9': with_orientation(jpeg, 9),
        'IFD0 past the end': with_orientation(jpeg, 6, ifd_offset=8)[:30],
        'the Exif header in a comment': (jpeg[:2] + b'\xff\xfe\x00\x0cExif\x00\x00MM\x00*'
                                         + jpeg[2:]),
    }
    for what, encoded in unreadable.items():
        assert image_orientation.exif_orientation(tf.constant(encoded)).numpy() == 1, what
    np.testing.assert_array_equal(image_records.decode_any_image(tf.constant(png), 3), UPRIGHT)
