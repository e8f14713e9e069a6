"""Face pairs as model input: training pairs drawn afresh every step, fixed pairs for evaluation.

Training pairs are drawn inside tf.data (no Python in the hot path) from person records
streamed through a buffer (input_fns/faces/face_sampler.py), so memory does not grow with the
data set; decoding, cropping, resizing and augmentation run in parallel. Evaluation pairs
are fixed, read from pair shards.
"""
import dataclasses
import os
import random
from typing import Callable, List, Optional

import numpy as np
import tensorflow as tf

from common import tf_config
from common.errors import UserError
from input_fns.faces import face_records, face_sampler
from input_fns.faces.face_images import (augment_pair_batch, decode_face, decode_training_pair,
                                         FaceGeometry)
from input_fns.faces.face_records import PAIR_SPEC, PERSON_SPEC
from input_fns.faces.face_sampler import PairMix
from input_fns.records import listed_files, pipeline, shards

AUTOTUNE = tf.data.AUTOTUNE


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
    """Every photo's person and file name (the generator sampler's table: it grows with the data)."""
    spec = {key: PERSON_SPEC[key] for key in ('identity', 'filenames')}
    identities, filenames = [], []
    for batch in tf.data.TFRecordDataset(files).batch(4096).map(
            lambda s: tf.io.parse_example(s, spec)):
        names = batch['filenames']
        identities.append(np.repeat(batch['identity'].numpy(), names.row_lengths().numpy()))
        filenames.extend(f.decode() for f in names.flat_values.numpy())
    identities = np.concatenate(identities) if identities else np.zeros([0], np.int64)
    roots = {shards.read_manifest(os.path.dirname(f)).get('source_root') for f in files}
    index = PhotoIndex(identities, filenames, roots.pop() if len(roots) == 1 else None)
    people = len(np.unique(identities))
    if people < 2 or not len(index.tables()[3]):
        raise UserError(f'{files[0]}...: {len(identities)} photos of {people} people; training '
                        'pairs need at least 2 people and someone with 2 or more photos')
    return index


def check_people(files: List[str], mix: PairMix = PairMix()):
    """(people, people with 2+ photos) of training shards; one line when pairs cannot be drawn.

    Pairs of two people need 2 people; same-person pairs need someone with 2+ photos, or
    self pairs (anyone's photo under two augmentations).
    """
    people, with_two = face_sampler.count_people(files)
    if people < 2:
        raise UserError(f'{files[0]}...: {people} people; training pairs need at least 2')
    if mix.same_fraction > 0 and not with_two and not mix.self_pair_fraction:
        raise UserError(f'{files[0]}...: no one of its {people} people has 2 or more photos, so '
                        'there are no same-person pairs to train on; add photos, or pair each '
                        'photo with itself under two augmentations (--self_pair_fraction=0.25)')
    return people, with_two


def sampled_pairs_dataset(files: List[str], num_people: int, geometry: FaceGeometry,
                          batch_size: int, seed: int = 0, mix: PairMix = PairMix(),
                          augment_images: bool = True, decode: bool = True,
                          prefetch: bool = True) -> tf.data.Dataset:
    """Fresh random training pairs every step, all inside tf.data, streamed from person shards.

    decode=False (batches of JPEG bytes) and prefetch=False stop it early, to time stages.
    """
    pairs = face_sampler.streamed_pairs(files, num_people, seed, mix)
    if decode:
        pairs = pairs.map(decode_training_pair(geometry, augment_images),
                          num_parallel_calls=AUTOTUNE, deterministic=False)
    pairs = pairs.batch(batch_size, drop_remainder=True)
    if decode and augment_images:
        pairs = pairs.map(augment_pair_batch, num_parallel_calls=AUTOTUNE, deterministic=False)
    return pairs.prefetch(AUTOTUNE) if prefetch else pairs


def sampled_pair_stages(file_pattern: str, geometry: FaceGeometry, batch_size: int,
                        seed: int = 0, mix: PairMix = PairMix(),
                        flag_name: str = 'file pattern'):
    """The graph sampler's pipeline cut short after each stage: [(stage, dataset function)]."""
    files = pipeline.list_record_files(file_pattern, flag_name)
    num_people, _ = check_people(files, mix)

    def up_to(**options):
        return lambda: sampled_pairs_dataset(files, num_people, geometry, batch_size, seed, mix,
                                             prefetch=False, **options)

    return [('sample pairs of JPEG bytes, batch', up_to(decode=False)),
            ('+ decode, crop, resize', up_to(augment_images=False))]


def fixed_pairs_dataset(files: List[str], geometry: FaceGeometry,
                        batch_size: int) -> tf.data.Dataset:
    """One deterministic pass over pair shards; labels are 1.0 (same) or 0.0."""
    def parse(serialized):
        pair = tf.io.parse_single_example(serialized, PAIR_SPEC)
        features = {'image_a': decode_face(pair['image_a'], geometry),
                    'image_b': decode_face(pair['image_b'], geometry)}
        return features, tf.cast(pair['label'], tf.float32)

    # Decoding dominates here, so records are parsed one at a time, in parallel.
    dataset = tf.data.TFRecordDataset(files).map(parse, num_parallel_calls=AUTOTUNE,
                                                 deterministic=True)
    return dataset.batch(batch_size).prefetch(AUTOTUNE)


def make_train_input_fn(file_pattern: str, geometry: FaceGeometry, batch_size: int,
                        seed: int = 0, mix: PairMix = PairMix(),
                        flag_name: str = 'file pattern', pairs_dataset: Callable = None,
                        augment: bool = False):
    """Training pairs drawn at random from person shards.

    Every worker of a cluster reads all shards (pairs need people from all of them) and
    draws its own pairs with its own seed. pairs_dataset(files, num_people, geometry,
    batch_size, seed, mix, augment_images=) draws them;
    default: sampled_pairs_dataset. augment: random crops, flips, brightness, contrast and
    rotations.
    """
    files = pipeline.list_record_files(file_pattern, flag_name)
    listed_files.check_listed(files)
    face_records.check_layout(files, 'people', flag_name)
    pipeline.check_record_files(files, PERSON_SPEC)
    num_people, _ = check_people(files, mix)
    seed = seed * 1000 + tf_config.role().reader_index
    pairs_dataset = pairs_dataset or sampled_pairs_dataset
    return lambda: pipeline.without_autotuner(pairs_dataset(
        files, num_people, geometry, batch_size, seed, mix, augment_images=augment))


def make_eval_input_fn(file_pattern: str, geometry: FaceGeometry, batch_size: int,
                       flag_name: str = 'file pattern'):
    files = pipeline.list_record_files(file_pattern, flag_name)
    listed_files.check_listed(files)
    face_records.check_layout(files, 'pairs', flag_name)
    pipeline.check_record_files(files, PAIR_SPEC)
    return lambda: pipeline.without_autotuner(fixed_pairs_dataset(files, geometry, batch_size))


def generator_pairs_dataset(index: PhotoIndex, geometry: FaceGeometry,
                            batch_size: int, seed: int = 0, same_fraction: float = 0.5,
                            augment_images: bool = True) -> tf.data.Dataset:
    """Face pairs the naive way (--pair_sampler=generator): a Python generator yields path pairs,
    map reads them, kept to measure sampled_pairs_dataset against."""
    # The naive way reads the photo folder prepare recorded, by path, as such code does.
    if not index.source_root or not os.path.isdir(index.source_root):  # local: see above
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
    decode = decode_training_pair(geometry, augment_images)
    pairs = pairs.map(lambda a, b, same, step: decode(tf.io.read_file(a), tf.io.read_file(b),
                                                      same, step),
                      num_parallel_calls=AUTOTUNE)
    pairs = pairs.batch(batch_size, drop_remainder=True)
    if augment_images:
        pairs = pairs.map(augment_pair_batch, num_parallel_calls=AUTOTUNE)
    return pairs.prefetch(AUTOTUNE)
