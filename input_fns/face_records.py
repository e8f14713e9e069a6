"""Face photo and face pair records, and the input_fns that read them.

Photo records keep the JPEG bytes exactly as on disk. Training pairs are drawn
afresh at random every step inside tf.data (no Python in the hot path): a table
of all training photos is read once, then a counter-seeded stateless sampler
picks same-person pairs (from people with two or more photos) and different-person
pairs, and decoding, cropping, resizing and augmentation run in parallel.
Evaluation pairs are fixed, read from pair shards.
"""
import dataclasses
import os
import random
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from common.errors import UserError
from input_fns import pipeline, shards

AUTOTUNE = tf.data.AUTOTUNE

PHOTO_SPEC = {
    'image': tf.io.FixedLenFeature([], tf.string),
    'identity': tf.io.FixedLenFeature([], tf.int64),
    'name': tf.io.FixedLenFeature([], tf.string),
    'filename': tf.io.FixedLenFeature([], tf.string),
}
PAIR_SPEC = {
    'image_a': tf.io.FixedLenFeature([], tf.string),
    'image_b': tf.io.FixedLenFeature([], tf.string),
    'label': tf.io.FixedLenFeature([], tf.int64),
    'fold': tf.io.FixedLenFeature([], tf.int64),
}
PHOTO_MANIFEST_FEATURES = {
    'image': 'bytes: the JPEG file exactly as on disk',
    'identity': 'int64: person index, unique across splits',
    'name': 'bytes: the person\'s name',
    'filename': 'bytes: path relative to source_root, e.g. Name/Name_0001.jpg',
}
PAIR_MANIFEST_FEATURES = {
    'image_a': 'bytes: JPEG', 'image_b': 'bytes: JPEG',
    'label': 'int64: 1 same person, 0 different', 'fold': 'int64: fold of pairs.txt (0 if one set)',
}


@dataclasses.dataclass(frozen=True)
class FaceGeometry:
    """How a photo becomes model input: a centred square crop, resized."""
    image_size: int = 64
    channels: int = 1  # 1 grayscale, 3 RGB
    crop_fraction: float = 0.5  # of the shorter side; LFW faces fill about the central half


def _bytes(value: bytes) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _int64(value: int) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))


def encode_photo(jpeg: bytes, identity: int, name: str, filename: str) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature={
        'image': _bytes(jpeg), 'identity': _int64(identity), 'name': _bytes(name.encode()),
        'filename': _bytes(filename.encode())})).SerializeToString()


def encode_pair(jpeg_a: bytes, jpeg_b: bytes, same: bool, fold: int) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature={
        'image_a': _bytes(jpeg_a), 'image_b': _bytes(jpeg_b), 'label': _int64(same),
        'fold': _int64(fold)})).SerializeToString()


def _crop_box(shape, crop_fraction, jitter=None):
    """(top, left, side) of the centred square; jitter in [0,1)^3 moves and scales it (training)."""
    height, width = tf.cast(shape[0], tf.float32), tf.cast(shape[1], tf.float32)
    side = tf.minimum(height, width) * crop_fraction
    center_y, center_x = height / 2, width / 2
    if jitter is not None:
        side = side * (0.9 + 0.2 * jitter[0])
        center_y += (jitter[1] - 0.5) * 0.12 * side
        center_x += (jitter[2] - 0.5) * 0.12 * side
    side = tf.minimum(side, tf.minimum(height, width))
    top = tf.clip_by_value(center_y - side / 2, 0.0, height - side)
    left = tf.clip_by_value(center_x - side / 2, 0.0, width - side)
    return tf.cast(top, tf.int32), tf.cast(left, tf.int32), tf.cast(side, tf.int32)


def decode_face(jpeg, geometry: FaceGeometry, jitter=None):
    """JPEG bytes -> float32 [size, size, channels] in [0, 1]; decodes only the central crop."""
    top, left, side = _crop_box(tf.io.extract_jpeg_shape(jpeg), geometry.crop_fraction, jitter)
    image = tf.io.decode_and_crop_jpeg(jpeg, tf.stack([top, left, side, side]),
                                       channels=geometry.channels)
    return _resize(image, geometry)


def decode_any_face(encoded, geometry: FaceGeometry):
    """As decode_face, for any PNG/JPEG/GIF/BMP bytes (serving)."""
    image = tf.io.decode_image(encoded, channels=geometry.channels, expand_animations=False)
    top, left, side = _crop_box(tf.shape(image), geometry.crop_fraction)
    return _resize(tf.image.crop_to_bounding_box(image, top, left, side, side), geometry)


def _resize(image, geometry):
    image = tf.image.resize(image, [geometry.image_size, geometry.image_size])
    image.set_shape([geometry.image_size, geometry.image_size, geometry.channels])
    return image * (1.0 / 255.0)


def augment(image, seed):
    """Training only: flip, brightness, contrast; stateless, so a seed reproduces it."""
    image = tf.image.stateless_random_flip_left_right(image, seed)
    image = tf.image.stateless_random_brightness(image, 0.1, seed + 1)
    image = tf.image.stateless_random_contrast(image, 0.8, 1.2, seed + 2)
    return tf.clip_by_value(image, 0.0, 1.0)


# ---------------------------------------------------------------- photo tables


@dataclasses.dataclass
class PhotoIndex:
    """Who is in which photo of a set of shards, read once before training."""
    identities: np.ndarray  # [num_photos], in the order TFRecordDataset(files) reads them
    filenames: List[str]
    source_root: Optional[str]

    def tables(self):
        """Photos grouped by person: (order, starts, counts, people with 2+ photos)."""
        _, dense = np.unique(self.identities, return_inverse=True)
        order = np.argsort(dense, kind='stable')
        counts = np.bincount(dense)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        return order, starts, counts, np.flatnonzero(counts >= 2)


def read_photo_index(files: List[str]) -> PhotoIndex:
    spec = {key: PHOTO_SPEC[key] for key in ('identity', 'filename')}
    identities, filenames = [], []
    for batch in tf.data.TFRecordDataset(files).batch(4096).map(
            lambda s: tf.io.parse_example(s, spec)):
        identities.append(batch['identity'].numpy())
        filenames.extend(f.decode() for f in batch['filename'].numpy())
    identities = np.concatenate(identities) if identities else np.zeros([0], np.int64)
    roots = {shards.read_manifest(os.path.dirname(f)).get('source_root') for f in files}
    index = PhotoIndex(identities, filenames, roots.pop() if len(roots) == 1 else None)
    people = len(np.unique(identities))
    if people < 2 or not len(index.tables()[3]):
        raise UserError(f'{files[0]}...: {len(identities)} photos of {people} people; training '
                        'pairs need at least 2 people and someone with 2 or more photos')
    return index


SAMPLE_BLOCK = 256  # pairs drawn at once: drawn one at a time, drawing cost a third of decoding


def _sampled_pairs(jpegs, index: PhotoIndex, seed: int, same_fraction: float):
    """An endless dataset of (jpeg_a, jpeg_b, same, step), drawn with stateless randomness."""
    order, starts, counts, eligible = (tf.constant(a, tf.int32) for a in index.tables())
    num_people = tf.size(counts)

    def pick(u, n):  # u in [0, 1) -> integer in [0, n), elementwise
        return tf.minimum(tf.cast(u * tf.cast(n, tf.float32), tf.int32), n - 1)

    def photo(person, number):
        return tf.gather(order, tf.gather(starts, person) + number)

    def draw(block):
        steps = block * SAMPLE_BLOCK + tf.range(SAMPLE_BLOCK, dtype=tf.int64)
        u = tf.unstack(tf.random.stateless_uniform(
            [5, SAMPLE_BLOCK], seed=tf.stack([tf.constant(seed, tf.int64), block])))
        same = u[0] < same_fraction
        person = tf.gather(eligible, pick(u[1], tf.size(eligible)))
        count = tf.gather(counts, person)
        first = pick(u[2], count)
        second = (first + 1 + pick(u[3], count - 1)) % count  # a different photo of the same person
        person_a = pick(u[1], num_people)
        person_b = (person_a + 1 + pick(u[2], num_people - 1)) % num_people  # another person
        a = tf.where(same, photo(person, first),
                     photo(person_a, pick(u[3], tf.gather(counts, person_a))))
        b = tf.where(same, photo(person, second),
                     photo(person_b, pick(u[4], tf.gather(counts, person_b))))
        return tf.gather(jpegs, a), tf.gather(jpegs, b), tf.cast(same, tf.float32), steps

    return tf.data.Dataset.counter().map(draw).unbatch()


def _decode_training_pair(geometry, augment_images):
    def decode(jpeg_a, jpeg_b, label, step):
        if not augment_images:
            return {'image_a': decode_face(jpeg_a, geometry),
                    'image_b': decode_face(jpeg_b, geometry)}, label
        seed = tf.stack([step, tf.constant(7, tf.int64)])
        jitter = tf.random.stateless_uniform([2, 3], seed=seed)  # crop position and scale
        image_a = augment(decode_face(jpeg_a, geometry, jitter[0]), seed + 1)
        image_b = augment(decode_face(jpeg_b, geometry, jitter[1]), seed + 11)
        return {'image_a': image_a, 'image_b': image_b}, label
    return decode


def sampled_pairs_dataset(files: List[str], index: PhotoIndex, geometry: FaceGeometry,
                          batch_size: int, seed: int = 0, same_fraction: float = 0.5,
                          augment_images: bool = True, decode: bool = True,
                          prefetch: bool = True) -> tf.data.Dataset:
    """Fresh random training pairs every step, all inside tf.data.

    decode=False (batches of JPEG bytes) and prefetch=False stop it early, to time stages.
    """
    photos = tf.data.TFRecordDataset(files).batch(len(index.identities)).map(
        lambda s: tf.io.parse_example(s, {'image': PHOTO_SPEC['image']})['image'])
    pairs = photos.flat_map(lambda jpegs: _sampled_pairs(jpegs, index, seed, same_fraction))
    if decode:
        pairs = pairs.map(_decode_training_pair(geometry, augment_images),
                          num_parallel_calls=AUTOTUNE, deterministic=False)
    pairs = pairs.batch(batch_size, drop_remainder=True)
    return pairs.prefetch(AUTOTUNE) if prefetch else pairs


def sampled_pair_stages(file_pattern: str, geometry: FaceGeometry, batch_size: int,
                        seed: int = 0, same_fraction: float = 0.5,
                        flag_name: str = 'file pattern'):
    """The graph sampler's pipeline cut short after each stage: [(stage, dataset function)]."""
    files = pipeline.list_record_files(file_pattern, flag_name)
    index = read_photo_index(files)

    def up_to(**options):
        return lambda: sampled_pairs_dataset(files, index, geometry, batch_size, seed,
                                             same_fraction, prefetch=False, **options)

    return [('sample pairs of JPEG bytes, batch', up_to(decode=False)),
            ('+ decode, crop, resize', up_to(augment_images=False))]


def generator_pairs_dataset(index: PhotoIndex, geometry: FaceGeometry, batch_size: int,
                            seed: int = 0, same_fraction: float = 0.5,
                            augment_images: bool = True) -> tf.data.Dataset:
    """The naive way, kept for comparison: a Python generator yields path pairs, map reads them."""
    if not index.source_root or not os.path.isdir(index.source_root):
        raise UserError(f'the generator pair sampler reads the photo folder {index.source_root!r} '
                        'named in manifest.json, and it is not there')
    order, starts, counts, eligible = index.tables()
    paths = [os.path.join(index.source_root, f) for f in index.filenames]

    def generate():
        rng = random.Random(seed)
        step = 0
        while True:
            if rng.random() < same_fraction:
                person = eligible[rng.randrange(len(eligible))]
                a, b = rng.sample(range(counts[person]), 2)
                a, b, same = order[starts[person] + a], order[starts[person] + b], 1.0
            else:
                person_a, person_b = rng.sample(range(len(counts)), 2)
                a = order[starts[person_a] + rng.randrange(counts[person_a])]
                b = order[starts[person_b] + rng.randrange(counts[person_b])]
                same = 0.0
            yield paths[a], paths[b], same, step
            step += 1

    pairs = tf.data.Dataset.from_generator(generate, output_signature=(
        tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.float32),
        tf.TensorSpec([], tf.int64)))
    decode = _decode_training_pair(geometry, augment_images)
    pairs = pairs.map(lambda a, b, same, step: decode(tf.io.read_file(a), tf.io.read_file(b),
                                                      same, step),
                      num_parallel_calls=AUTOTUNE)
    return pairs.batch(batch_size, drop_remainder=True).prefetch(AUTOTUNE)


def fixed_pairs_dataset(files: List[str], geometry: FaceGeometry, batch_size: int,
                        with_folds: bool = False) -> tf.data.Dataset:
    """One deterministic pass over pair shards; labels are 1.0 (same) or 0.0."""
    def parse(serialized):
        pair = tf.io.parse_single_example(serialized, PAIR_SPEC)
        features = {'image_a': decode_face(pair['image_a'], geometry),
                    'image_b': decode_face(pair['image_b'], geometry)}
        if with_folds:
            features['fold'] = pair['fold']
        return features, tf.cast(pair['label'], tf.float32)

    # Decoding dominates here, so records are parsed one at a time, in parallel.
    dataset = tf.data.TFRecordDataset(files).map(parse, num_parallel_calls=AUTOTUNE,
                                                 deterministic=True)
    return dataset.batch(batch_size).prefetch(AUTOTUNE)


def make_train_input_fn(file_pattern: str, geometry: FaceGeometry, batch_size: int,
                        seed: int = 0, same_fraction: float = 0.5, sampler: str = 'graph',
                        flag_name: str = 'file pattern'):
    """Training pairs drawn at random from photo shards.

    Every worker of a cluster reads all photos (pairs need people from all shards)
    and draws its own pairs with its own seed.
    """
    files = pipeline.list_record_files(file_pattern, flag_name)
    pipeline.check_record_files(files, PHOTO_SPEC)
    index = read_photo_index(files)
    _, worker_index = pipeline.worker_share_from_tf_config()
    seed = seed * 1000 + worker_index
    if sampler not in ('graph', 'generator'):
        raise UserError(f'--pair_sampler={sampler}: use graph or generator')

    def input_fn():
        if sampler == 'generator':
            return generator_pairs_dataset(index, geometry, batch_size, seed, same_fraction)
        return sampled_pairs_dataset(files, index, geometry, batch_size, seed, same_fraction)

    return input_fn


def make_eval_input_fn(file_pattern: str, geometry: FaceGeometry, batch_size: int,
                       flag_name: str = 'file pattern', with_folds: bool = False):
    files = pipeline.list_record_files(file_pattern, flag_name)
    pipeline.check_record_files(files, PAIR_SPEC)
    return lambda: fixed_pairs_dataset(files, geometry, batch_size, with_folds)


def read_pair_labels(file_pattern: str, flag_name: str = 'file pattern') -> Dict[str, np.ndarray]:
    """Labels and folds of pair shards, in the order fixed_pairs_dataset reads them."""
    files = pipeline.list_record_files(file_pattern, flag_name)
    spec = {key: PAIR_SPEC[key] for key in ('label', 'fold')}
    labels, folds = [], []
    for batch in tf.data.TFRecordDataset(files).batch(4096).map(
            lambda s: tf.io.parse_example(s, spec)):
        labels.append(batch['label'].numpy())
        folds.append(batch['fold'].numpy())
    return {'label': np.concatenate(labels), 'fold': np.concatenate(folds)}
