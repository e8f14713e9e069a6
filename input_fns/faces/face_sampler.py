"""Training pairs streamed from person records: memory grows with the buffer, not the data set.

Person records (one per person, all their photos: input_fns/faces/face_records.py) are read
from the shards in shuffled order, interleaved, shuffled in a buffer of PEOPLE_BUFFER
people, and taken a window of WINDOW_PEOPLE people at a time. Each window yields
PAIRS_PER_PERSON pairs per person it holds (at least MIN_WINDOW_PAIRS), drawn with
stateless randomness: same-person pairs from its people with two or more photos (and, with
self_pair_fraction, that share of its people with one photo: that photo twice, which training
augments apart), different-person pairs from two of its people.
People are taken in a random order without replacement within a window, so a batch
seldom holds one person twice (in-batch losses count the other rows as negatives).
"""
import dataclasses
import os
from typing import List, Tuple

import tensorflow as tf

from common.errors import UserError
from input_fns.faces.face_records import PERSON_SPEC
from input_fns.records import pipeline, shards

AUTOTUNE = tf.data.AUTOTUNE
PEOPLE_BUFFER = 2048  # person records in the shuffle buffer (LFW: about 2.4 photos, 30 KB each)
WINDOW_PEOPLE = 1024  # people pairs are drawn among at once
PAIRS_PER_PERSON = 4  # pairs a window gives per person: reading people costs CPU that decoding needs
MIN_WINDOW_PAIRS = 256  # pairs a window gives at least: fewer, and drawing costs more than decoding
PAIR_BLOCK = 256  # pairs whose photos are gathered at once, so a window's pairs are never all copied


@dataclasses.dataclass(frozen=True)
class PairMix:
    """What a window's pairs are made of: same_fraction of them same-person pairs (the rest of
    two people), drawn from its people with two or more photos and a share self_pair_fraction
    of its one-photo people (that photo twice, which training augments apart)."""
    same_fraction: float = 0.5
    self_pair_fraction: float = 0.0


def count_people(files: List[str]) -> Tuple[int, int]:
    """(people, people with two or more photos) in person shards: from manifest.json where it
    lists the files (the second an upper bound for part of a split), else by reading each
    record's num_photos (a pass over the shards, memory one block)."""
    people = with_two = 0
    unlisted, splits_counted = [], set()
    for path in files:
        folder, name = os.path.split(path)
        split, entry = next(((split, entry) for split, entry in
                             shards.read_manifest(folder).get('splits', {}).items()
                             if any(shard['file'] == name for shard in entry.get('shards', []))),
                            (None, None))
        if entry is None:
            unlisted.append(path)
            continue
        people += next(shard['records'] for shard in entry['shards'] if shard['file'] == name)
        if (folder, split) not in splits_counted:
            splits_counted.add((folder, split))
            with_two += entry.get('num_people_with_2_or_more', 0)
    spec = {'num_photos': PERSON_SPEC['num_photos']}
    for counts in tf.data.TFRecordDataset(unlisted).batch(4096).map(
            lambda s: tf.io.parse_example(s, spec)['num_photos']):
        people += len(counts)
        with_two += int(tf.reduce_sum(tf.cast(counts >= 2, tf.int32)))
    return people, with_two


def window_size(num_people: int) -> int:
    """People per window: WINDOW_PEOPLE or all, and even (different pairs take two at a time)."""
    return min(WINDOW_PEOPLE, num_people) // 2 * 2


def _pick(u, n):
    """u in [0, 1) -> an integer in [0, n), elementwise."""
    return tf.minimum(tf.cast(u * tf.cast(n, tf.float32), tf.int32), n - 1)


def _orders(seed, rows: int, people, first=None):
    """rows random orders of range(people), [rows, people]; where `first` is true, those first."""
    keys = tf.random.stateless_uniform(tf.stack([rows, people]), seed)
    if first is not None:
        keys += 2.0 * tf.cast(tf.logical_not(first), tf.float32)
    return tf.argsort(keys, axis=1, stable=True)


def window_pair_indices(photos: tf.RaggedTensor, mix: PairMix, seed, first_step):
    """photos: [people, None], a window of distinct people's photos -> its pairs as indices into
    photos.flat_values (a, b), same (float32) and step (int64: seeds the crop jitter)."""
    people = photos.nrows(out_type=tf.int32)
    num_pairs = tf.maximum(PAIRS_PER_PERSON * people, MIN_WINDOW_PAIRS)
    counts = tf.cast(photos.row_lengths(), tf.int32)
    starts = tf.cast(photos.row_starts(), tf.int32)
    seeds = tf.random.experimental.stateless_split(seed, 3)
    u = tf.unstack(tf.random.stateless_uniform(tf.stack([5, num_pairs]), seeds[0]), num=5)
    # A fresh draw of one-photo people each window; folded in apart so the other draws keep.
    self_seed = tf.random.experimental.stateless_fold_in(seed, 3)
    self_paired = tf.random.stateless_uniform(tf.shape(counts), self_seed) < mix.self_pair_fraction
    eligible = (counts >= 2) | ((counts == 1) & self_paired)
    num_eligible = tf.reduce_sum(tf.cast(eligible, tf.int32))
    same = (u[0] < mix.same_fraction) & (num_eligible > 0)
    # The j-th same pair's person: the window's eligible people in random orders, one after another.
    per_order = tf.maximum(num_eligible, 1)
    same_order = tf.reshape(
        _orders(seeds[1], num_pairs // per_order + 1, people, eligible)[:, :per_order], [-1])
    same_person = tf.gather(same_order, tf.cumsum(tf.cast(same, tf.int32), exclusive=True))
    # The j-th different pair: places 2j and 2j+1 of random orders of the window (never one person).
    different_order = tf.reshape(_orders(seeds[2], 2 * num_pairs // people + 1, people), [-1])
    rank = tf.cumsum(tf.cast(~same, tf.int32), exclusive=True)
    person_a = tf.gather(different_order, 2 * rank)
    person_b = tf.gather(different_order, 2 * rank + 1)
    same_count = tf.gather(counts, same_person)
    first = _pick(u[1], same_count)
    # Another of the person's photos; of a one-photo person (self pairs), the same one.
    second = (first + 1 + _pick(u[2], same_count - 1)) % tf.maximum(same_count, 1)
    same_start = tf.gather(starts, same_person)
    a = tf.where(same, same_start + first,
                 tf.gather(starts, person_a) + _pick(u[3], tf.gather(counts, person_a)))
    b = tf.where(same, same_start + second,
                 tf.gather(starts, person_b) + _pick(u[4], tf.gather(counts, person_b)))
    return a, b, tf.cast(same, tf.float32), first_step + tf.range(tf.cast(num_pairs, tf.int64))


def draw_window_pairs(photos: tf.RaggedTensor, mix: PairMix, seed, first_step):
    """A window's pairs as (photo_a, photo_b, same, step): window_pair_indices, gathered."""
    a, b, same, steps = window_pair_indices(photos, mix, seed, first_step)
    return tf.gather(photos.flat_values, a), tf.gather(photos.flat_values, b), same, steps


def streamed_pairs(files: List[str], num_people: int, seed: int, mix: PairMix = PairMix(),
                   photo_feature: str = 'images') -> tf.data.Dataset:
    """An endless dataset of (photo_a, photo_b, same, step); photo_feature='filenames' draws
    file names instead of JPEGs (to count what the sampler draws)."""
    window = window_size(num_people)
    if window < 2:
        raise UserError(f'{files[0]}...: {num_people} people; training pairs need at least 2')
    people = tf.data.Dataset.from_tensor_slices(files).shuffle(
        len(files), seed=seed, reshuffle_each_iteration=True)
    people = people.interleave(
        lambda path: tf.data.TFRecordDataset(path).batch(pipeline.READ_BLOCK),
        cycle_length=min(len(files), pipeline.TRAIN_PARALLEL_FILES), num_parallel_calls=AUTOTUNE,
        deterministic=False)
    people = people.unbatch().shuffle(PEOPLE_BUFFER, seed=seed, reshuffle_each_iteration=True)
    # Windows within one pass (drop_remainder), so a window never holds one person twice.
    windows = people.batch(window, drop_remainder=True).repeat()
    spec = {photo_feature: PERSON_SPEC[photo_feature]}

    pairs_per_window = max(PAIRS_PER_PERSON * window, MIN_WINDOW_PAIRS)

    def draw(window_index, serialized):
        photos = tf.io.parse_example(serialized, spec)[photo_feature]
        seed_pair = tf.stack([tf.constant(seed, tf.int64), window_index])
        return (photos.flat_values,) + window_pair_indices(
            photos, mix, seed_pair, window_index * pairs_per_window)

    def pairs_of(photos, a, b, same, steps):
        blocks = tf.data.Dataset.from_tensor_slices((a, b, same, steps)).batch(PAIR_BLOCK)
        return blocks.map(lambda a, b, same, steps: (
            tf.gather(photos, a), tf.gather(photos, b), same, steps)).unbatch()

    # The next window is read and drawn while this one's pairs decode: else decoding waits.
    windows = tf.data.Dataset.zip((tf.data.Dataset.counter(), windows)).map(draw).prefetch(1)
    return windows.flat_map(pairs_of)
