"""A JPEG's EXIF orientation, read and applied in the graph: a phone stores a portrait photo's
pixels as the sensor saw them (sideways) with an Orientation tag saying how to turn them, and
tf.io.decode_image ignores the tag. `prepare images` and the exports' serving graphs both turn
the photo upright with these ops (core TensorFlow only, so TF Serving runs them), so a served
photo gives the pixels its training record holds. This is the graph's one path; outside the
graph every other photo is turned by Pillow (input_fns/images/converted_images.py).

The tag is tag 0x0112 of the first image file directory (IFD0) of the TIFF structure inside
the 'Exif' APP1 segment (Exif 2.32, 4.5.4 and 4.6.4). Anything unreadable on the way reads
as 1, the photo as stored.
"""
import tensorflow as tf

# The APP1 segment's start: its marker, its length (any), the Exif header; then the TIFF data.
_EXIF_HEADER = b'Exif\x00\x00'
_APP1_START = (0xFF, 0xE1, None, None, *_EXIF_HEADER)
_ORIENTATION_TAG = 0x0112
_HEAD_BYTES = 1 << 17  # where APP1 is looked for: after SOI, or APP0 and maybe APP2 (< 64 KiB)
_MAX_IFD_ENTRIES = 64  # a camera's IFD0 has 10-20; the tags are sorted and 0x0112 comes early


def exif_orientation(encoded) -> tf.Tensor:
    """The Orientation tag (int32, 1-8) of a JPEG's EXIF data; 1 for any other image, and when
    the file has no such tag or it cannot be read.

    Without branches, loops or string searches, which cost more than a small PNG's decoding in
    tf.data: the APP1 segment is found by comparing every byte of the file's head at once (its
    cost grows with the file, as decoding's does), and IFD0's entries are read side by side."""
    head = tf.io.decode_raw(tf.strings.substr(encoded, 0, _HEAD_BYTES), tf.uint8)
    size = tf.size(head)
    head = tf.concat([head, tf.zeros([len(_APP1_START)], tf.uint8)], 0)  # reads past the end: 0
    is_app1 = tf.reduce_all(tf.stack([tf.equal(head[at:at + size + 1], byte)  # never empty
                                      for at, byte in enumerate(_APP1_START) if byte is not None]),
                            0)
    tiff = tf.cast(tf.argmax(is_app1), tf.int32) + len(_APP1_START)  # the first, if any

    def read(at, count):
        """count bytes from at, as int32."""
        return tf.cast(tf.gather(head, tf.clip_by_value(at + tf.range(count), 0, size)), tf.int32)

    header = read(tiff, 8)  # byte order 'II' or 'MM', 42, IFD0's offset (32 bits)
    little = tf.equal(header[0], 0x49) & tf.equal(header[1], 0x49)
    big = tf.equal(header[0], 0x4D) & tf.equal(header[1], 0x4D)
    weights = tf.where(little, [1, 256], [256, 1])  # of a 16-bit number's two bytes

    def numbers_16(pairs):
        """Unsigned 16-bit numbers from [N, 2] bytes in the file's byte order."""
        return tf.reduce_sum(pairs * weights, 1)

    halves = numbers_16(tf.reshape(header[4:], [2, 2]))  # the offset's, in file order
    ifd = tiff + tf.reduce_sum(halves * tf.where(little, [1, 65536], [65536, 1]))
    directory = read(ifd, 2 + 12 * _MAX_IFD_ENTRIES)  # count, then 12 bytes an entry
    count = numbers_16(tf.reshape(directory[:2], [1, 2]))[0]
    entries = tf.reshape(directory[2:], [_MAX_IFD_ENTRIES, 12])  # tag, type, count, value
    is_orientation = (tf.equal(numbers_16(entries[:, :2]), _ORIENTATION_TAG)
                      & (tf.range(_MAX_IFD_ENTRIES) < count))
    value = tf.reduce_max(tf.where(is_orientation, numbers_16(entries[:, 8:10]), 0))
    readable = (tf.equal(read(0, 2), [0xFF, 0xD8]) & tf.reduce_any(is_app1)  # a JPEG with APP1
                & (little | big))
    return tf.where(tf.reduce_all(readable) & (value >= 1) & (value <= 8), value, 1)


# What turns a stored image upright, for orientations 1-8 (Exif 2.32, 4.6.4 table 4): swap its
# axes first (5-8: stored on its side), then flip it top to bottom, then left to right.
_TRANSPOSE = (False, False, False, False, True, True, True, True)
_FLIP_UP_DOWN = (False, False, True, True, False, False, True, True)
_FLIP_LEFT_RIGHT = (False, True, True, False, False, True, True, False)


def upright(image, orientation):
    """image [H, W, C] as stored, turned as its orientation (1-8) says to display it. Without
    branches: a dynamic transpose and reverse (orientation 1 passes the image through)."""
    which = orientation - 1
    perm = tf.where(tf.gather(_TRANSPOSE, which), [1, 0, 2], [0, 1, 2])
    flips = tf.stack([tf.gather(_FLIP_UP_DOWN, which), tf.gather(_FLIP_LEFT_RIGHT, which)])
    return tf.reverse(tf.transpose(image, perm), tf.boolean_mask([0, 1], flips))
