"""Photos that tf.io.decode_image does not read: WebP (common in folders saved from the web) and
TIFF (scanners, microscopes, cameras' lossless exports). Decoded by tensorflow-io (already
installed, for s3://) and handed on as PNG bytes, the same pixels (a TIFF's first page; alpha
kept), to the decode every other photo goes through.

In Python only, never in an exported graph: TF Serving has none of tensorflow-io's ops, so an
export takes PNG, JPEG, GIF or BMP, and `prepare images` and `--mode=predict` convert a WebP or
TIFF before it (a client of TF Serving converts its own).
"""
from typing import Optional

import tensorflow as tf

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
    decode = (tensorflow_io.image.decode_webp if kind == 'webp'
              else tensorflow_io.experimental.image.decode_tiff)
    return tf.io.encode_png(decode(encoded)).numpy()
