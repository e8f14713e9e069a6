"""A photo's EXIF orientation: a JPEG's read in the graph and the photo turned upright, for `prepare
images` and the exports alike; every photo turned by Pillow in Python, where a WebP, TIFF, HEIC or
AVIF is converted and a face photo stored; anything else (no tag, another format, a broken tag)
left as stored."""
import numpy as np
import pytest
import tensorflow as tf

from image_tree import (STORED_AS, avif_bytes, heic_bytes, tiff_bytes, tiny_webp_pixels,
                        webp_with_orientation, with_orientation)
from input_fns.faces import face_images, face_photos
from input_fns.images import converted_images, image_orientation, image_records

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
        assert converted_images.is_turned(encoded.numpy()) == (orientation != 1)
        decoded = image_records.decode_any_image(encoded, 3).numpy()
        assert decoded.shape == UPRIGHT.shape
        assert np.abs(decoded.astype(int) - UPRIGHT).max() <= 2, (orientation, where)


@pytest.mark.parametrize('orientation', range(1, 9))
def test_a_webp_tiff_heic_or_avif_photo_is_converted_upright(orientation):
    """Pillow turns a WebP or TIFF by its EXIF tag; libheif turns a HEIC by its irot and imir
    boxes, and its EXIF tag (which says the same) is not applied again."""
    stored = np.ascontiguousarray(STORED_AS[orientation](UPRIGHT))
    for encoded, as_stored in ((webp_with_orientation(orientation), tiny_webp_pixels()),
                               (tiff_bytes(stored, orientation), stored),
                               (heic_bytes(stored, orientation), stored)):
        upright = tf.io.decode_png(converted_images.decodable(encoded)).numpy()[..., :3]
        np.testing.assert_array_equal(STORED_AS[orientation](upright), as_stored)
    # Pillow reads an AVIF's irot and imir boxes as an orientation (its YUV: a few levels off).
    upright = tf.io.decode_png(converted_images.decodable(avif_bytes(stored, orientation))).numpy()
    assert upright.shape == UPRIGHT.shape
    assert np.abs(upright.astype(int) - UPRIGHT).max() <= 4


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
        assert not converted_images.is_turned(encoded), what
    np.testing.assert_array_equal(image_records.decode_any_image(tf.constant(png), 3), UPRIGHT)


@pytest.mark.parametrize('channels', [1, 3])
def test_a_face_photo_is_stored_upright_by_prepare_and_served_upright(channels, tmp_path):
    """Training decodes no EXIF: prepare stores the photo turned; serving turns it itself."""
    geometry = face_images.FaceGeometry(image_size=32, channels=channels, crop_fraction=1.0)
    upright = face_images.decode_face(tf.constant(tf.io.encode_jpeg(
        UPRIGHT, quality=100, chroma_downsampling=False).numpy()), geometry).numpy()
    reader = face_photos.PhotoReader(str(tmp_path), strict=True)
    for orientation in range(1, 9):
        (tmp_path / f'{orientation}.jpg').write_bytes(stored_jpeg(orientation))
        prepared = reader.read(f'{orientation}.jpg')
        assert image_orientation.exif_orientation(tf.constant(prepared)).numpy() == 1
        faces = {'trained on': face_images.decode_face(tf.constant(prepared), geometry),
                 'served': face_images.decode_any_face(tf.constant(stored_jpeg(orientation)),
                                                      geometry)}
        for what, face in faces.items():
            error = np.abs(face.numpy() - upright).max() * 255
            assert error <= 2, (orientation, what, error)  # JPEG's, re-encoded at quality 95


@pytest.mark.parametrize('orientation', range(1, 9))
def test_a_tiff_heic_or_avif_face_photo_is_stored_upright(orientation, tmp_path):
    """prepare faces turns the other formats by the same Python path: stored as an upright JPEG."""
    geometry = face_images.FaceGeometry(image_size=32, channels=3, crop_fraction=1.0)
    upright = face_images.decode_face(tf.constant(tf.io.encode_jpeg(
        UPRIGHT, quality=100, chroma_downsampling=False).numpy()), geometry).numpy()
    stored = np.ascontiguousarray(STORED_AS[orientation](UPRIGHT))
    reader = face_photos.PhotoReader(str(tmp_path), strict=True)
    # JPEG's error at quality 95; an AVIF's YUV adds a few levels.
    for name, encoded, tolerance in (('tiff', tiff_bytes(stored, orientation), 2),
                                     ('heic', heic_bytes(stored, orientation), 2),
                                     ('avif', avif_bytes(stored, orientation), 6)):
        (tmp_path / f'{orientation}.{name}').write_bytes(encoded)
        prepared = reader.read(f'{orientation}.{name}')
        assert prepared.startswith(b'\xff\xd8') and not converted_images.is_turned(prepared)
        error = np.abs(face_images.decode_face(tf.constant(prepared), geometry).numpy()
                       - upright).max() * 255
        assert error <= tolerance, (name, error)
