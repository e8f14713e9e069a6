"""Photos that tf.io.decode_image does not read: WebP (common in folders saved from the web),
TIFF (scanners, microscopes, cameras' lossless exports), HEIC (an iPhone's own format, and
many Android phones') and AVIF (HEIF with AV1 inside: Android's and the web's newer format).
WebP and TIFF are decoded by tensorflow-io (already installed, for s3://), HEIC by libheif
(pillow-heif), AVIF by Pillow's libavif (its dav1d decoder); each is handed on as PNG bytes,
the same pixels (a TIFF's first page, a HEIF's primary image; alpha kept) turned upright as the
file says (as a JPEG's are), to the decode every other photo goes through.

In Python only, never in an exported graph: TF Serving has none of these decoders, so an export
takes PNG, JPEG, GIF or BMP, and `prepare images` and `--mode=predict` convert the others before
it (a client of TF Serving converts its own).
"""
import io
import struct
from typing import Optional

import numpy as np
import tensorflow as tf

from input_fns.images import image_orientation

EXTENSIONS = ('.webp', '.tif', '.tiff', '.heic', '.heif', '.hif', '.avif')
# Every format a photo may come in, for messages.
FORMATS = 'PNG, JPEG, GIF, BMP, WebP, TIFF, HEIC or AVIF'
# The ftyp brands of HEIF files whose images are HEVC (ISO/IEC 23008-12 Annex B), which
# libheif's decoder here reads, and of those whose images are AV1 (AVIF), which it does not.
_HEVC_BRANDS = (b'heic', b'heix', b'heim', b'heis', b'hevc', b'hevx', b'hevm', b'hevs')
_AV1_BRANDS = (b'avif', b'avis')
_HEIF_BRANDS = (b'mif1', b'msf1')  # HEIF whatever its codec: a codec's brand must be compatible


def format_of(encoded: bytes) -> Optional[str]:
    """'webp', 'tiff', 'heic', 'avif', or None for what TensorFlow decodes itself (or nothing
    does)."""
    if encoded[:4] == b'RIFF' and encoded[8:12] == b'WEBP':
        return 'webp'
    if encoded[:4] in (b'II*\x00', b'MM\x00*'):
        return 'tiff'
    if encoded[4:8] == b'ftyp':
        if _is_heif_of(encoded, _HEVC_BRANDS):
            return 'heic'
        if _is_heif_of(encoded, _AV1_BRANDS):
            return 'avif'
    return None


def _is_heif_of(encoded: bytes, codec_brands) -> bool:
    """Whether the ftyp box (its size, 'ftyp', the major brand, a version, compatible brands)
    names one of a codec's brands as the major one, or beside a generic HEIF major brand."""
    size = struct.unpack_from('>I', encoded)[0]
    major = encoded[8:12]
    compatible = [encoded[at:at + 4] for at in range(16, min(size, len(encoded), 256) - 3, 4)]
    return major in codec_brands or (major in _HEIF_BRANDS and
                                     any(brand in codec_brands for brand in compatible))


def decodable(encoded: bytes) -> bytes:
    """The bytes as they are, or a WebP's, TIFF's, HEIC's or AVIF's as PNG;
    tf.errors.InvalidArgumentError for one that does not decode."""
    kind = format_of(encoded)
    if kind is None:
        return encoded
    if kind in ('heic', 'avif'):
        pixels = _heic_pixels(encoded) if kind == 'heic' else _avif_pixels(encoded)
        return tf.io.encode_png(pixels[..., np.newaxis] if pixels.ndim == 2 else pixels).numpy()
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


def _heic_pixels(encoded: bytes) -> np.ndarray:
    """A HEIC's primary image as uint8 [height, width, channels], turned as its irot and imir
    boxes say. libheif applies them; the EXIF orientation a phone also writes says the same turn
    (HEIF readers must ignore it), so it is not applied again."""
    import pillow_heif  # libheif loads on import: only once such a photo is met
    try:
        heif = pillow_heif.open_heif(io.BytesIO(encoded), convert_hdr_to_8bit=True)
        pixels = np.asarray(heif)
    except (ValueError, RuntimeError, EOFError) as e:  # libheif's word for a damaged file
        raise tf.errors.InvalidArgumentError(None, None, f'HEIC: {e}') from None
    return pixels


def _avif_pixels(encoded: bytes) -> np.ndarray:
    """An AVIF's primary image as uint8 [height, width(, channels)], upright. Pillow reports its
    irot and imir boxes as an EXIF orientation (and drops any EXIF tag that says otherwise),
    which exif_transpose applies."""
    from PIL import Image, ImageOps  # libavif loads with Pillow's plugin: only once one is met
    try:
        with Image.open(io.BytesIO(encoded), formats=['AVIF']) as image:
            return np.asarray(ImageOps.exif_transpose(image))
    except (OSError, ValueError, SyntaxError) as e:  # Pillow's words for a damaged file
        raise tf.errors.InvalidArgumentError(None, None, f'AVIF: {e}') from None


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
