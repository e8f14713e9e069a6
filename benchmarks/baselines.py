"""The ways of feeding that this service's input_fns replace, as benchmarks.input_bench runs them.

All in graph mode, as the Estimator runs things: feed_dict from NumPy, queue
runners with shuffle_batch, the FloatList + parse_single_example pipeline that
parses one record at a time, tf.py_function for plain-Python preprocessing, and the face
pair sampler that held every training photo in memory (before person records).
"""
from typing import Sequence

import numpy as np
import tensorflow as tf

from input_fns.faces.face_images import augment_pair_batch, decode_training_pair
from input_fns.faces.face_records import PERSON_SPEC
from input_fns.images import image_records
from trainer.observe import timing

AUTOTUNE = tf.data.AUTOTUNE
SHUFFLE_BUFFER = 10_000


class NumpyBatches:
    """Shuffled batches of in-memory arrays, reshuffled every epoch: what feed_dict code feeds."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, batch_size: int, seed: int = 0):
        self.images, self.labels, self.batch_size = images, labels, batch_size
        self._rng = np.random.RandomState(seed)
        self._order, self._position = self._rng.permutation(len(labels)), 0

    def next(self):
        if self._position + self.batch_size > len(self._order):
            self._order, self._position = self._rng.permutation(len(self.labels)), 0
        chosen = self._order[self._position:self._position + self.batch_size]
        self._position += self.batch_size
        return self.images[chosen], self.labels[chosen]


def float_images(images: np.ndarray) -> np.ndarray:
    """uint8 [N, H, W] -> float32 [N, H, W, 1] in [0, 1], as the model takes them."""
    return (images[..., None] / 255.0).astype(np.float32)


def feed_dict_rate(batches: NumpyBatches, **timing_options) -> timing.Rate:
    """Batches/sec of session.run with a NumPy batch copied in through feed_dict each step."""
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, (None,) + batches.images.shape[1:])
        labels = tf.compat.v1.placeholder(tf.int32, [None])
        consume = timing.consume_op((images, labels))
        with tf.compat.v1.Session() as session:
            def step():
                x, y = batches.next()
                session.run(consume, feed_dict={images: x, labels: y})
            return timing.median_rate(step, **timing_options)


def queue_runner_rate(files: Sequence[str], image_shape, batch_size: int, num_threads: int,
                      **timing_options) -> timing.Rate:
    """Batches/sec of the TF 1 reader: string_input_producer, TFRecordReader, shuffle_batch."""
    with tf.Graph().as_default():
        file_queue = tf.compat.v1.train.string_input_producer(list(files), shuffle=True)
        _, serialized = tf.compat.v1.TFRecordReader().read(file_queue)
        example = tf.io.parse_single_example(serialized, image_records.FEATURE_SPEC)
        image = tf.reshape(tf.io.decode_raw(example['image'], tf.uint8), image_shape)
        image = tf.cast(image, tf.float32) * (1.0 / 255.0)
        batch = tf.compat.v1.train.shuffle_batch(
            [image, tf.cast(example['label'], tf.int32)], batch_size, num_threads=num_threads,
            capacity=SHUFFLE_BUFFER + 3 * batch_size, min_after_dequeue=SHUFFLE_BUFFER)
        consume = timing.consume_op(batch)
        with tf.compat.v1.Session() as session:
            coordinator = tf.train.Coordinator()
            threads = tf.compat.v1.train.start_queue_runners(session, coordinator)
            try:
                return timing.median_rate(lambda: session.run(consume), **timing_options)
            finally:
                coordinator.request_stop()
                coordinator.join(threads)


FLOATLIST_SPEC = {
    'image': tf.io.FixedLenFeature([784], tf.float32),
    'label': tf.io.FixedLenFeature([], tf.int64),
}


def encode_floatlist_example(pixels: np.ndarray, label: int) -> bytes:
    """The source documents' record: every pixel a float in a FloatList."""
    return tf.train.Example(features=tf.train.Features(feature={
        'image': tf.train.Feature(float_list=tf.train.FloatList(
            value=(pixels.reshape(-1) / 255.0).astype(np.float32))),
        'label': tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
    })).SerializeToString()


def floatlist_dataset(files: Sequence[str], batch_size: int) -> tf.data.Dataset:
    """The source documents' pipeline: parse_single_example on one record at a time, then batch."""
    def parse(serialized):
        example = tf.io.parse_single_example(serialized, FLOATLIST_SPEC)
        return (tf.reshape(example['image'], [28, 28, 1]), tf.cast(example['label'], tf.int32))

    dataset = tf.data.TFRecordDataset(list(files)).map(parse)
    return dataset.shuffle(SHUFFLE_BUFFER).repeat().batch(batch_size)


def in_memory_dataset(images: np.ndarray, labels: np.ndarray, batch_size: int) -> tf.data.Dataset:
    """The upper bound for a pipeline that reads and parses files: the whole dataset already
    decoded, as tensors in memory, shuffled and batched the same way (uint8 [N, H, W])."""
    dataset = tf.data.Dataset.from_tensor_slices((images, labels.astype(np.int32)))
    dataset = dataset.shuffle(SHUFFLE_BUFFER).repeat().batch(batch_size)
    dataset = dataset.map(lambda x, y: (tf.cast(x[..., None], tf.float32) * (1.0 / 255.0), y),
                          num_parallel_calls=AUTOTUNE, deterministic=False)
    return dataset.prefetch(AUTOTUNE)


# ------------------------------------------------------------ Estimator, feed_dict style

FEED_IMAGES, FEED_LABELS = 'feed_images', 'feed_labels'


def feed_dict_input_fn(image_shape):
    """An input_fn of placeholders, which FeedDictHook fills every step."""
    def input_fn():
        images = tf.compat.v1.placeholder(tf.float32, [None, *image_shape], name=FEED_IMAGES)
        labels = tf.compat.v1.placeholder(tf.int32, [None], name=FEED_LABELS)
        return {'image': images}, labels
    return input_fn


class FeedDictHook(tf.estimator.SessionRunHook):
    def __init__(self, batches: NumpyBatches):
        self._batches = batches

    def begin(self):
        graph = tf.compat.v1.get_default_graph()
        self._images = graph.get_tensor_by_name(FEED_IMAGES + ':0')
        self._labels = graph.get_tensor_by_name(FEED_LABELS + ':0')

    def before_run(self, run_context):
        images, labels = self._batches.next()
        return tf.estimator.SessionRunArgs(None, feed_dict={self._images: images,
                                                            self._labels: labels})


# ------------------------------------------------------------ plain-Python preprocessing


def py_function_dataset(fn, output_signature, batch_size: int) -> tf.data.Dataset:
    """fn(index) for index 0, 1, ... through tf.py_function with num_parallel_calls=AUTOTUNE."""
    specs = tf.nest.flatten(output_signature)

    def call(index):
        return [np.asarray(value, spec.dtype.as_numpy_dtype)
                for value, spec in zip(tf.nest.flatten(fn(int(index))), specs)]

    def py_map(index):
        values = tf.py_function(call, [index], [spec.dtype for spec in specs])
        for value, spec in zip(values, specs):
            value.set_shape(spec.shape)
        return tf.nest.pack_sequence_as(output_signature, values)

    dataset = tf.data.Dataset.range(2 ** 62).map(py_map, num_parallel_calls=AUTOTUNE,
                                                  deterministic=False)
    return dataset.batch(batch_size).prefetch(AUTOTUNE)


# ------------------------------------------------ face pairs: the sampler before streaming

IN_MEMORY_SAMPLE_BLOCK = 256  # pairs drawn at once, as that sampler did


def _in_memory_sampled_pairs(photos, index, seed: int, same_fraction: float):
    """The training-pair sampler before person records (verbatim but for names): every photo in
    one tensor, pairs drawn uniformly over all people with stateless randomness."""
    order, starts, counts, eligible = (tf.constant(a, tf.int32) for a in index.tables())
    num_people = tf.size(counts)

    def pick(u, n):
        return tf.minimum(tf.cast(u * tf.cast(n, tf.float32), tf.int32), n - 1)

    def photo(person, number):
        return tf.gather(order, tf.gather(starts, person) + number)

    def draw(block):
        steps = block * IN_MEMORY_SAMPLE_BLOCK + tf.range(IN_MEMORY_SAMPLE_BLOCK, dtype=tf.int64)
        u = tf.unstack(tf.random.stateless_uniform(
            [5, IN_MEMORY_SAMPLE_BLOCK], seed=tf.stack([tf.constant(seed, tf.int64), block])))
        same = u[0] < same_fraction
        person = tf.gather(eligible, pick(u[1], tf.size(eligible)))
        count = tf.gather(counts, person)
        first = pick(u[2], count)
        second = (first + 1 + pick(u[3], count - 1)) % count
        person_a = pick(u[1], num_people)
        person_b = (person_a + 1 + pick(u[2], num_people - 1)) % num_people
        a = tf.where(same, photo(person, first),
                     photo(person_a, pick(u[3], tf.gather(counts, person_a))))
        b = tf.where(same, photo(person, second),
                     photo(person_b, pick(u[4], tf.gather(counts, person_b))))
        return tf.gather(photos, a), tf.gather(photos, b), tf.cast(same, tf.float32), steps

    return tf.data.Dataset.counter().map(draw).unbatch()


def in_memory_pairs(files, index, seed: int = 0, same_fraction: float = 0.5,
                    photo_feature: str = 'images'):
    """(photo_a, photo_b, same, step) drawn from all photos of person shards held in one tensor,
    in index's order (face_pairs.read_photo_index); photo_feature='filenames' for statistics."""
    spec = {photo_feature: PERSON_SPEC[photo_feature]}
    photos = tf.data.TFRecordDataset(files).batch(len(np.unique(index.identities))).map(
        lambda s: tf.io.parse_example(s, spec)[photo_feature].flat_values)
    return photos.flat_map(lambda table: _in_memory_sampled_pairs(table, index, seed,
                                                                  same_fraction))


def in_memory_pairs_dataset(files, index, geometry, batch_size: int, seed: int = 0,
                            same_fraction: float = 0.5, augment_images: bool = True):
    """The face input before streaming: in_memory_pairs, then decode, batch and augment exactly
    as face_pairs.sampled_pairs_dataset does."""
    pairs = in_memory_pairs(files, index, seed, same_fraction).map(
        decode_training_pair(geometry, augment_images), num_parallel_calls=AUTOTUNE,
        deterministic=False).batch(batch_size, drop_remainder=True)
    if augment_images:
        pairs = pairs.map(augment_pair_batch, num_parallel_calls=AUTOTUNE, deterministic=False)
    return pairs.prefetch(AUTOTUNE)
