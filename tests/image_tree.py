"""Class-folder image trees for the tests: ROOT/<class>/[nested/]N.png|jpg|bmp|gif, of varying sizes.

Each class's images are noise with one bright colour channel (cat red, dog green, fox blue), so
a model learns them in a few steps, in colour or greyscale (the channels differ in brightness).
"""
import io
import os
import struct
from typing import Optional

import numpy as np
import tensorflow as tf

CLASSES = ('cat', 'dog', 'fox')
# A 1x1 GIF (white): TensorFlow encodes no GIF.
TINY_GIF = (b'GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00'
            b'\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;')

# An 8x12 lossless WebP of tiny_webp_pixels() (`cwebp -lossless -exact`: TensorFlow encodes no
# WebP, and tensorflow-io only decodes it).
TINY_WEBP = (b'RIFF.\x00\x00\x00WEBPVP8L!\x00\x00\x00/\x0b\xc0\x01\x00\x892D\xf4?\x16\x11'
             b'\xd1\xff\x00\x91\xb6M\xd9\xfd\x9b\x1e\xba\x801\x9f\x85\x98\x00\x8dJ\xd4\x1f\x00')


def tiny_webp_pixels() -> np.ndarray:
    """TINY_WEBP's pixels: red 230 (a cat, as class_image draws one), green and blue ramps."""
    rows, columns = np.mgrid[0:8, 0:12]
    return np.stack([np.full((8, 12), 230), columns * 7, rows * 11], -1).astype(np.uint8)


def tiff_bytes(pixels: np.ndarray, orientation: Optional[int] = None) -> bytes:
    """A baseline uncompressed RGB TIFF of uint8 pixels [H, W, 3], little-endian, one strip
    (TensorFlow encodes no TIFF): the header, one IFD of 9 entries (10 with an orientation), the
    bits per sample, the pixels."""
    height, width, _ = pixels.shape
    data = pixels.tobytes()
    bits_offset = 8 + 2 + 12 * (9 + bool(orientation)) + 4
    entries = [(256, 3, 1, width), (257, 3, 1, height), (258, 3, 3, bits_offset),
               (259, 3, 1, 1), (262, 3, 1, 2), (273, 4, 1, bits_offset + 6), (277, 3, 1, 3),
               (278, 3, 1, height), (279, 4, 1, len(data))]  # tag, type (3 short, 4 long), count
    if orientation:
        entries.insert(6, (0x0112, 3, 1, orientation))  # the tags in order
    ifd = struct.pack('<H', len(entries)) + b''.join(
        struct.pack('<HHIHH' if kind == 3 and count == 1 else '<HHII', tag, kind, count, value,
                    *((0,) if kind == 3 and count == 1 else ()))
        for tag, kind, count, value in entries)
    return b'II*\x00' + struct.pack('<I', 8) + ifd + struct.pack('<IHHH', 0, 8, 8, 8) + data


def bmp_bytes(pixels: np.ndarray) -> bytes:
    """A 24-bit BMP of uint8 RGB pixels [H, W, 3] (TensorFlow encodes no BMP): rows bottom-up, BGR,
    each padded to 4 bytes."""
    height, width, _ = pixels.shape
    row_bytes = (width * 3 + 3) // 4 * 4
    rows = b''.join(pixels[y, :, ::-1].tobytes().ljust(row_bytes, b'\0')
                    for y in range(height - 1, -1, -1))
    header = struct.pack('<2sIHHI', b'BM', 54 + len(rows), 0, 0, 54)
    info = struct.pack('<IiiHHIIiiII', 40, width, height, 1, 24, 0, len(rows), 2835, 2835, 0, 0)
    return header + info + rows


def class_image(label: int, height: int, width: int, rng) -> np.ndarray:
    pixels = rng.randint(0, 90, (height, width, 3)).astype(np.uint8)
    pixels[:, :, label % 3] = 230
    return pixels


def encode(pixels: np.ndarray, extension: str) -> bytes:
    if extension == 'png':
        return tf.io.encode_png(pixels).numpy()
    if extension == 'jpg':
        return tf.io.encode_jpeg(pixels, quality=95).numpy()
    return bmp_bytes(pixels)


# How each EXIF orientation stores an upright image (Exif 2.32, 4.6.4 table 4: row 0 and
# column 0 of the stored image are the displayed image's ...): what a camera writes.
STORED_AS = {1: lambda up: up,  # top, left
             2: lambda up: up[:, ::-1],  # top, right
             3: lambda up: up[::-1, ::-1],  # bottom, right
             4: lambda up: up[::-1],  # bottom, left
             5: lambda up: up.swapaxes(0, 1),  # left, top
             6: lambda up: np.rot90(up, 1),  # right, top: a phone held upright
             7: lambda up: up[::-1, ::-1].swapaxes(0, 1),  # right, bottom
             8: lambda up: np.rot90(up, -1)}  # left, bottom


def exif(orientation: int, little_endian=False, ifd_offset=8) -> bytes:
    """EXIF data: its header, then TIFF data whose IFD0 holds a make tag and the Orientation
    tag."""
    order = '<' if little_endian else '>'
    entries = [(0x010F, 2, 4, b'cam\0'),  # Make, ASCII
               (0x0112, 3, 1, struct.pack(order + 'H', orientation) + b'\0\0')]  # SHORT
    ifd = struct.pack(order + 'H', len(entries)) + b''.join(
        struct.pack(order + 'HHI', tag, kind, count) + value for tag, kind, count, value in entries)
    return (b'Exif\0\0' + (b'II' if little_endian else b'MM') +
            struct.pack(order + 'HI', 42, ifd_offset) + b'\0' * (ifd_offset - 8) + ifd + b'\0' * 4)


def with_orientation(jpeg: bytes, orientation: int, little_endian=False, after_jfif=False,
                     ifd_offset=8) -> bytes:
    """The JPEG with an EXIF APP1 segment (exif()) right after SOI (as cameras write it) or
    after a JFIF APP0 segment (as some editors do)."""
    app1 = exif(orientation, little_endian, ifd_offset)
    segments = b'\xff\xe1' + struct.pack('>H', len(app1) + 2) + app1
    if after_jfif:
        segments = b'\xff\xe0\x00\x10JFIF\0\x01\x01\0\0\x01\0\x01\0\0' + segments
    rest = jpeg[2:]
    if rest[:2] == b'\xff\xe0':  # TensorFlow's own JFIF APP0: replaced by the above
        rest = rest[2 + struct.unpack('>H', rest[2:4])[0]:]
    return jpeg[:2] + segments + rest


def webp_with_orientation(orientation: int) -> bytes:
    """TINY_WEBP in WebP's extended format (a VP8X chunk, flag: EXIF), with an EXIF chunk."""
    def chunk(name, data):
        return name + struct.pack('<I', len(data)) + data + b'\0' * (len(data) & 1)
    height, width, _ = tiny_webp_pixels().shape
    vp8x = bytes([0x08, 0, 0, 0]) + (width - 1).to_bytes(3, 'little') + (height - 1).to_bytes(
        3, 'little')
    body = b'WEBP' + chunk(b'VP8X', vp8x) + TINY_WEBP[12:] + chunk(b'EXIF', exif(orientation))
    return b'RIFF' + struct.pack('<I', len(body)) + body


def heic_bytes(pixels: np.ndarray, orientation: Optional[int] = None, lossless: bool = True) -> bytes:
    """A HEIC of uint8 pixels [H, W, 3] as stored, by libheif's x265 (pillow-heif): lossless in
    4:4:4 RGB (the 'heix' brand), or an iPhone's lossy 4:2:0 ('heic'). An EXIF orientation is
    written as the file's irot and imir boxes, as a phone's are (and kept in its EXIF)."""
    import pillow_heif
    from PIL import Image
    image = Image.fromarray(np.ascontiguousarray(pixels))
    options = {'quality': -1, 'chroma': 444, 'matrix_coefficients': 0} if lossless else {}
    if orientation:
        exif = Image.Exif()
        exif[0x0112] = orientation
        options['exif'] = exif.tobytes()
    encoded = io.BytesIO()
    pillow_heif.from_pillow(image).save(encoded, **options)
    return encoded.getvalue()


def pillow_bytes(pixels: np.ndarray, image_format: str, **options) -> bytes:
    """uint8 pixels [H, W, 3] in a format Pillow writes ('WEBP', 'GIF'...)."""
    from PIL import Image
    encoded = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(encoded, format=image_format, **options)
    return encoded.getvalue()


def avif_bytes(pixels: np.ndarray, orientation: Optional[int] = None) -> bytes:
    """An AVIF of uint8 pixels [H, W, 3] as stored, by Pillow's libavif (aom) at quality 100 in
    4:4:4 (a few levels off: its YUV is not lossless). An EXIF orientation is written as the
    file's irot and imir boxes, as a phone's are."""
    from PIL import Image
    options = {'quality': 100, 'subsampling': '4:4:4'}
    if orientation:
        exif = Image.Exif()
        exif[0x0112] = orientation
        options['exif'] = exif.tobytes()
    return pillow_bytes(pixels, 'AVIF', **options)


def write_image_tree(root, per_class: int = 12, classes=CLASSES, seed: int = 0, first: int = 0):
    """per_class images a class (numbered from `first`) in PNG, JPEG and BMP, 20-60 pixels a side,
    every fourth in a nested folder; returns their paths relative to root."""
    rng = np.random.RandomState(seed)
    written = []
    for label, name in enumerate(classes):
        for number in range(first, first + per_class):
            extension = ('png', 'jpg', 'bmp')[number % 3]
            relative = os.path.join(name, 'more' if number % 4 == 0 else '', f'{number}.{extension}')
            path = os.path.join(root, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            pixels = class_image(label, rng.randint(20, 60), rng.randint(20, 60), rng)
            with open(path, 'wb') as f:
                f.write(encode(pixels, extension))
            written.append(os.path.normpath(relative))
    return written


def prepared_tree(root, per_class: int, **prepare_flags) -> str:
    """write_image_tree under ROOT/photos, prepared (cropped, by one decode worker) into
    ROOT/data with prepare_flags; returns its training shards' pattern."""
    from helpers import run_prepare
    from input_fns.images import prepare_images
    write_image_tree(root / 'photos', per_class=per_class)
    run_prepare(prepare_images.prepare_images, source_dir=str(root / 'photos'),
                output_dir=str(root / 'data'), resize='crop', skip_bad_images=False,
                decode_workers=1, **prepare_flags)
    return f'{root}/data/train-*'
