"""WebP photos (common in folders saved from the web), which tf.io.decode_image does not read:
decoded by tensorflow-io (already installed, for s3://) and handed on as PNG bytes, the same
pixels and alpha, to the decode every other photo goes through.

In Python only, never in an exported graph: TF Serving has none of tensorflow-io's ops, so an
export takes PNG, JPEG, GIF or BMP, and `prepare images` and `--mode=predict` convert a WebP
before it (a client of TF Serving converts its own).
"""
import tensorflow as tf

EXTENSION = '.webp'


def is_webp(encoded: bytes) -> bool:
    return encoded[:4] == b'RIFF' and encoded[8:12] == b'WEBP'


def decodable(encoded: bytes) -> bytes:
    """The bytes as they are, or a WebP's as PNG; tf.errors.InvalidArgumentError for a WebP
    that does not decode."""
    if not is_webp(encoded):
        return encoded
    import tensorflow_io  # its ops load on import (a second or so): only once a WebP is met
    return tf.io.encode_png(tensorflow_io.image.decode_webp(encoded)).numpy()
