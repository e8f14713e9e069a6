"""Photos in Python: the one place outside the graph that opens a photo and turns it upright.

Pillow opens it (with pillow-heif's plugin for HEIC; Pillow's own libwebp, libtiff and libavif
for the rest) and PIL.ImageOps.exif_transpose turns it as its orientation says: a JPEG's,
WebP's or TIFF's EXIF tag, a HEIF's irot and imir boxes (which pillow-heif and Pillow's AVIF
plugin report as that tag, dropping any EXIF tag that says otherwise, so no turn is made twice).
Used for what tf.io.decode_image does not read (WebP: folders saved from the web; TIFF: scanners,
cameras' lossless exports; HEIC: an iPhone's own format; AVIF: HEIF with AV1 inside, Android's
newer format), handed on as PNG bytes (a TIFF's first page, a HEIF's primary image; alpha kept),
and for a face photo `prepare faces` stores re-encoded (upright_jpeg).

Never in an exported graph: TF Serving has none of these decoders, so an export takes PNG,
JPEG, GIF or BMP and turns a JPEG by its EXIF tag itself (image_orientation, the graph's one
path), and `prepare images` and `--mode=predict` convert the others before it (a client of TF
Serving converts its own).
"""
import io
import struct
import warnings
from typing import Optional

import numpy as np
import tensorflow as tf

EXTENSIONS = ('.webp', '.tif', '.tiff', '.heic', '.heif', '.hif', '.avif')
# Every format a photo may come in, for messages.
FORMATS = 'PNG, JPEG, GIF, BMP, WebP, TIFF, HEIC or AVIF'
# The ftyp brands of HEIF files whose images are HEVC (ISO/IEC 23008-12 Annex B), which
# libheif's decoder here reads, and of those whose images are AV1 (AVIF), which Pillow reads.
_HEVC_BRANDS = (b'heic', b'heix', b'heim', b'heis', b'hevc', b'hevx', b'hevm', b'hevs')
_AV1_BRANDS = (b'avif', b'avis')
_HEIF_BRANDS = (b'mif1', b'msf1')  # HEIF whatever its codec: a codec's brand must be compatible
_NAMES = {'webp': 'WebP', 'tiff': 'TIFF', 'heic': 'HEIC', 'avif': 'AVIF'}
_ORIENTATION_TAG = 0x0112
# Pillow's modes that a PNG holds as 8-bit channels, as TensorFlow's decoders give them.
_EIGHT_BIT_MODES = ('L', 'LA', 'RGB', 'RGBA')


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


def _opened(encoded: bytes):
    """A PIL image of the bytes (decoded when its pixels are first asked for)."""
    from PIL import Image  # Pillow and libheif load on first use: only once such a photo is met
    if format_of(encoded) == 'heic':
        import pillow_heif
        pillow_heif.register_heif_opener()  # once is enough; again is a dictionary update
    return Image.open(io.BytesIO(encoded))


def upright(encoded: bytes):
    """The photo's first frame or page as a PIL image, decoded and turned as its orientation
    says; tf.errors.InvalidArgumentError naming the format for one that does not decode (as
    TensorFlow's decoders raise, so callers catch one error)."""
    from PIL import Image, ImageOps, UnidentifiedImageError
    kind = _NAMES.get(format_of(encoded))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # a cut file's warning, beside the error below
            with _opened(encoded) as image:
                return ImageOps.exif_transpose(image)  # a copy, loaded, even if not turned
    except UnidentifiedImageError:
        reason = f'{kind}: cut short or damaged' if kind else 'Unknown image file format'
    except (OSError, ValueError, SyntaxError, RuntimeError, EOFError,  # Pillow's, libheif's
            Image.DecompressionBombError) as e:
        reason = f'{kind or "image"}: {e}'
    raise tf.errors.InvalidArgumentError(None, None, reason)


def is_turned(encoded: bytes) -> bool:
    """Whether the photo's EXIF orientation turns it (reads its header only, decodes nothing);
    False where Pillow cannot read the header (the decoder that needs it will say why)."""
    try:
        with _opened(encoded) as image:
            return image.getexif().get(_ORIENTATION_TAG, 1) in range(2, 9)
    except (OSError, ValueError, SyntaxError, RuntimeError, EOFError):
        return False


def _eight_bit(image):
    """The image as L, LA, RGB or RGBA: a 16-bit grey one by its high byte (as libpng's and
    libtiff's 8-bit reads take it: Pillow's own conversion clips it at 255)."""
    if image.mode in _EIGHT_BIT_MODES:
        return image
    from PIL import Image
    if image.mode.startswith('I;16'):
        return Image.fromarray((np.asarray(image).astype(np.uint16) >> 8).astype(np.uint8))
    return image.convert('RGBA' if image.has_transparency_data else 'RGB')


def decodable(encoded: bytes) -> bytes:
    """The bytes as they are, or a WebP's, TIFF's, HEIC's or AVIF's as PNG, upright;
    tf.errors.InvalidArgumentError for one that does not decode."""
    if format_of(encoded) is None:
        return encoded
    png = io.BytesIO()
    _eight_bit(upright(encoded)).save(png, format='PNG', compress_level=1)  # decoded next: fast
    return png.getvalue()


def upright_jpeg(encoded: bytes) -> bytes:
    """Any photo as an RGB JPEG, upright, at quality 95 without chroma subsampling, its EXIF
    dropped (a GIF's first frame; alpha dropped as TensorFlow's 3-channel decode drops it)."""
    jpeg = io.BytesIO()
    _eight_bit(upright(encoded)).convert('RGB').save(jpeg, format='JPEG', quality=95,
                                                     subsampling=0)
    return jpeg.getvalue()
