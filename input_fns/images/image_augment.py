"""Training-time augmentation of image batches: random shifts, rotations, scaling, slant and
elastic distortion.

One op warps a whole batch, each image by its own random map, so the cost is one op per batch
rather than one per example: the projective-transform op for affine maps, one bilinear gather
when an elastic field is added. Evaluation and serving never call this.
"""
import dataclasses
import math
from typing import Optional

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class AffineRange:
    """Each image gets a rotation, a scale and a shift drawn uniformly from these ranges."""
    max_degrees: float = 10.0
    max_scale_change: float = 0.1  # scale in [1 - this, 1 + this]
    max_shift_fraction: float = 0.1  # of the image's height (vertical) and width (horizontal)
    fill_mode: str = 'CONSTANT'  # outside the image: black (digits), or 'REFLECT' (photos)
    max_shear_degrees: float = 0.0  # horizontal shear: the slant of handwriting
    # After the affine map, each pixel moves along a smooth random field whose RMS length is
    # this many pixels: elastic distortion, the wobble of a hand (Simard et al. 2003).
    elastic_pixels: float = 0.0

    def stronger(self, strength: float, shear_degrees: float,
                 elastic_pixels: float = 0.0) -> 'AffineRange':
        """These ranges of rotation, scale and shift times strength, with this shear and elastic
        distortion."""
        return dataclasses.replace(
            self, max_degrees=self.max_degrees * strength,
            max_scale_change=self.max_scale_change * strength,
            max_shift_fraction=self.max_shift_fraction * strength, max_shear_degrees=shear_degrees,
            elastic_pixels=elastic_pixels)


DIGITS = AffineRange()  # MNIST-style digits: the ink stays inside the 28x28 frame
# Faces: the crop already moves and scales (face_images); corners are filled by reflection.
FACES = AffineRange(max_degrees=8.0, max_scale_change=0.0, max_shift_fraction=0.0,
                    fill_mode='REFLECT')


def affine_transforms(degrees, scales, shifts_y, shifts_x, height: int, width: int,
                      shear_degrees=0.0):
    """[N, 8] transforms for tf.raw_ops.ImageProjectiveTransformV3: shear horizontally by
    shear_degrees, rotate by degrees and scale about the centre, then move the content by
    (shifts_y, shifts_x) pixels.

    The op maps each output pixel to the input pixel it samples, so this is the inverse map:
    the shear's inverse [[1, -slant], [0, 1]] after the rotation's and scale's.
    """
    radians = degrees * (math.pi / 180.0)
    cos, sin = tf.cos(radians) / scales, tf.sin(radians) / scales
    slant = tf.tan(shear_degrees * (math.pi / 180.0))
    to_x_from_x, to_x_from_y = cos + slant * sin, sin - slant * cos
    center_y, center_x = (height - 1) / 2.0, (width - 1) / 2.0
    from_y, from_x = center_y + shifts_y, center_x + shifts_x
    offset_x = center_x - to_x_from_x * from_x - to_x_from_y * from_y
    offset_y = center_y + sin * from_x - cos * from_y
    zeros = tf.zeros_like(cos)
    return tf.stack([to_x_from_x, to_x_from_y, offset_x, -sin, cos, offset_y, zeros, zeros],
                    axis=1)


def warp(images, transforms, fill_mode: str = 'CONSTANT'):
    """images [N, H, W, C] float, each warped by its transform; CONSTANT fills with black."""
    return tf.raw_ops.ImageProjectiveTransformV3(
        images=images, transforms=tf.cast(transforms, tf.float32),
        output_shape=tf.shape(images)[1:3], fill_value=0.0, interpolation='BILINEAR',
        fill_mode=fill_mode)


# The elastic field's Gaussian smoothing, sigma as a fraction of the image height: 4 px at 28
# (Simard et al.), so the field bends strokes rather than scattering pixels.
ELASTIC_SMOOTHING = 1.0 / 7.0


def elastic_fields(count, height: int, width: int, rms_pixels: float, seed=None):
    """[N, H, W, 2] smooth random displacements (dy, dx): uniform noise blurred by a Gaussian,
    each image's field scaled so that its RMS length is rms_pixels."""
    shape = [count, height, width, 2]
    noise = (tf.random.uniform(shape, -1.0, 1.0) if seed is None
             else tf.random.stateless_uniform(shape, seed, -1.0, 1.0))
    sigma = ELASTIC_SMOOTHING * height
    radius = int(math.ceil(3.0 * sigma))
    taps = tf.exp(-0.5 * (tf.range(-radius, radius + 1, dtype=tf.float32) / sigma) ** 2)
    taps = tf.tile(tf.reshape(taps / tf.reduce_sum(taps), [-1, 1, 1, 1]), [1, 1, 2, 1])
    field = tf.nn.depthwise_conv2d(noise, taps, [1, 1, 1, 1], 'SAME')  # down the columns
    field = tf.nn.depthwise_conv2d(field, tf.transpose(taps, [1, 0, 2, 3]), [1, 1, 1, 1], 'SAME')
    length = tf.sqrt(tf.reduce_mean(tf.reduce_sum(tf.square(field), axis=3), axis=[1, 2]))
    return field * tf.reshape(rms_pixels / tf.maximum(length, 1e-6), [-1, 1, 1, 1])


def sample_bilinear(images, ys, xs):
    """images [N, H, W, C] read at float coordinates ys, xs [N, H', W'] -> [N, H', W', C],
    bilinearly, black outside the image (as warp's CONSTANT fill)."""
    height, width = images.shape[1], images.shape[2]
    padded = tf.pad(images, [[0, 0], [1, 1], [1, 1], [0, 0]])  # a black frame outside
    top, left = tf.floor(ys), tf.floor(xs)
    batch = tf.broadcast_to(tf.range(tf.shape(ys)[0])[:, None, None], tf.shape(ys))

    def pixels(y, x):  # the frame's black for every corner off the image
        row = tf.cast(tf.clip_by_value(y, -1.0, height), tf.int32) + 1
        column = tf.cast(tf.clip_by_value(x, -1.0, width), tf.int32) + 1
        return tf.gather_nd(padded, tf.stack([batch, row, column], axis=-1))

    down, right = (ys - top)[..., None], (xs - left)[..., None]
    upper = pixels(top, left) * (1.0 - right) + pixels(top, left + 1.0) * right
    lower = pixels(top + 1.0, left) * (1.0 - right) + pixels(top + 1.0, left + 1.0) * right
    return upper * (1.0 - down) + lower * down


def warp_elastic(images, transforms, displacements):
    """images [N, H, W, C] float, each moved by its displacement field [N, H, W, 2] and then
    warped by its affine transform (as warp reads them), in one bilinear read; black fill."""
    height, width = images.shape[1], images.shape[2]
    rows, columns = tf.meshgrid(tf.range(height, dtype=tf.float32),
                                tf.range(width, dtype=tf.float32), indexing='ij')
    ys, xs = rows + displacements[..., 0], columns + displacements[..., 1]
    t = tf.cast(transforms, tf.float32)[:, :, None, None]
    return sample_bilinear(images, t[:, 3] * xs + t[:, 4] * ys + t[:, 5],
                           t[:, 0] * xs + t[:, 1] * ys + t[:, 2])


def random_affine(images, affine: AffineRange = DIGITS, seed=None):
    """images [N, H, W, C] float, each rotated, scaled, shifted, sheared and elastically
    distorted at random within `affine`.

    seed: a [2] int tensor makes the draw reproducible (stateless); None draws afresh.
    """
    height, width = images.shape[1], images.shape[2]
    count = tf.shape(images)[0]

    def uniform(limit, offset):
        if seed is None:
            return tf.random.uniform([count], -limit, limit)
        return tf.random.stateless_uniform([count], seed + offset, -limit, limit)

    transforms = affine_transforms(
        uniform(affine.max_degrees, 0), 1.0 + uniform(affine.max_scale_change, 1),
        uniform(affine.max_shift_fraction * height, 2),
        uniform(affine.max_shift_fraction * width, 3), height, width,
        uniform(affine.max_shear_degrees, 4) if affine.max_shear_degrees else 0.0)
    if affine.elastic_pixels:
        if affine.fill_mode != 'CONSTANT':
            raise ValueError('elastic distortion fills with black only')
        return warp_elastic(images, transforms, elastic_fields(
            count, height, width, affine.elastic_pixels, None if seed is None else seed + 5))
    return warp(images, transforms, affine.fill_mode)


def random_flip(images):
    """images [N, H, W, C], each mirrored left-right or not, by its own draw."""
    flipped = tf.random.uniform([tf.shape(images)[0], 1, 1, 1]) < 0.5
    return tf.where(flipped, tf.reverse(images, axis=[2]), images)


def augment_batch_fn(parse_batch, affine: Optional[AffineRange] = DIGITS, flip: bool = False):
    """parse_batch followed by random_affine (unless affine is None) and, if flip, random_flip
    on its 'image' feature: a training parse."""
    def parse_and_augment(serialized):
        features, labels = parse_batch(serialized)
        images = features['image']
        if affine is not None:
            images = random_affine(images, affine)
        if flip:
            images = random_flip(images)
        return {**features, 'image': images}, labels
    return parse_and_augment
