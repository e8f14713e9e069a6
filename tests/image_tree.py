"""Class-folder image trees for the tests: ROOT/<class>/[nested/]N.png|jpg|bmp|gif, of varying sizes.

Each class's images are noise with one bright colour channel (cat red, dog green, fox blue), so
a model learns them in a few steps, in colour or greyscale (the channels differ in brightness).
"""
import os
import struct

import numpy as np
import tensorflow as tf

CLASSES = ('cat', 'dog', 'fox')
# A 1x1 GIF (white): TensorFlow encodes no GIF.
TINY_GIF = (b'GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00'
            b'\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;')


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
