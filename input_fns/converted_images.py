"""Photos that tf.io.decode_image does not read: WebP (common in folders saved from the web) and
TIFF (scanners, microscopes, cameras' lossless exports). Decoded by tensorflow-io (already
installed, for s3://) and handed on as PNG bytes, the same pixels (a TIFF's first page; alpha
kept) turned upright as their EXIF orientation says (as a JPEG's are), to the decode every other
photo goes through.

In Python only, never in an exported graph: TF Serving has none of tensorflow-io's ops, so an
export takes PNG, JPEG, GIF or BMP, and `prepare images` and `--mode=predict` convert a WebP or
TIFF before it (a client of TF Serving converts its own).
"""
import struct
from typing import Optional

import tensorflow as tf

from input_fns import image_orientation

EXTENSIONS = ('.webp', '.tif', '.tiff')


def format_of(encoded: bytes) -> Optional[str]:
    """'webp', 'tiff', or None for what TensorFlow decodes itself (or nothing does)."""
    if encoded[:4] == b'RIFF' and encoded[8:12] == b'WEBP':
        return 'webp'
    if encoded[:4] in (b'II*\x00', b'MM\x00*'):
        return 'tiff'
    return None


def decodable(encoded: bytes) -> bytes:
    """The bytes as they are, or a WebP's or TIFF's as PNG; tf.errors.InvalidArgumentError for
    one that does not decode."""
    kind = format_of(encoded)
    if kind is None:
        return encoded
    import tensorflow_io  # its ops load on import (a second or so): only once such a photo is met
    if kind == 'webp':  # libwebp leaves the orientation to its caller
        image = tensorflow_io.image.decode_webp(encoded)
        orientation = image_orientation.tiff_orientation(_webp_exif(encoded))
        if orientation != 1:
            image = image_orientation.upright(image, orientation)
    else:
        image = tensorflow_io.experimental.image.decode_tiff(encoded)
        orientation = image_orientation.tiff_orientation(encoded)
        if orientation > 4:  # libtiff flipped it as for orientation - 4 and did not transpose
            image = image_orientation.upright(
                image_orientation.upright(image, orientation - 4), orientation)
    return tf.io.encode_png(image).numpy()


def _webp_exif(encoded: bytes) -> bytes:
    """The TIFF data of a WebP's EXIF chunk, b'' where it has none."""
    at = 12  # after 'RIFF', the size, 'WEBP': chunks of a name, a 32-bit size, data, padding
    while at + 8 <= len(encoded):
        name, size = encoded[at:at + 4], struct.unpack_from('<I', encoded, at + 4)[0]
        if name == b'EXIF':
            data = encoded[at + 8:at + 8 + size]
            return data[6:] if data.startswith(b'Exif\x00\x00') else data
        at += 8 + size + (size & 1)
    return b''
