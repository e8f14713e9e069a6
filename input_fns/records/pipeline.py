"""The shared tf.data pipeline every record dataset uses, and its input checks.

Training: shuffled file list -> this worker's share -> parallel interleave of
TFRecordDataset (TextLineDataset for CSV), in blocks of records -> shuffle ->
repeat -> batch -> batch-level parse -> prefetch.
Training on small records (table rows, windows=True): the same interleave -> windows of records,
each parsed at once and permuted as a whole (the share read and parsed once and kept in memory,
permuted whole each epoch, when it fits) -> repeat -> cut into batches -> prefetch: no work per
record in tf.data's element machinery, which costs more than a table row's parse.
Evaluation: files in sorted order, eight read at a time, their records taken in turn: one
deterministic pass, no dropped remainder.
"""
import os
import re
from typing import Callable, Dict, List, Optional, Tuple

import tensorflow as tf
from absl import logging

from common import store_retries, tf_config
from common.errors import op_error_summary, UserError
from input_fns.records import file_patterns, listed_files

AUTOTUNE = tf.data.AUTOTUNE
DEFAULT_SHUFFLE_BUFFER = 10_000
# Records each parallel reader hands over at a time. One at a time, the hand-offs between
# threads cost more than the reading: on 2 cores, MNIST shards read 1.8x faster in blocks.
READ_BLOCK = 64
# windows=True: a share of files of at most this many bytes is parsed once and kept in memory
# (tf.data's cache), to be permuted whole each epoch; larger ones stream in windows. Peak RSS
# grows by about 4x the files' bytes (93 MiB of table shards: 365 MiB), streaming by 70 MiB.
IN_MEMORY_BYTES = 64 << 20


def list_record_files(file_pattern: str, flag_name: str = 'file pattern') -> List[str]:
    """Expands a glob, or comma-separated globs (`\\,` is a comma in a path), into sorted files:
    one listing with sizes and one manifest read a folder, handed on with the files to the
    checks and the reader (listed_files.ListedFiles); a shard its folder's manifest lists and the
    pattern names, missing from the listing, is refused by name (listed_files.list_pattern)."""
    files, folders_seen = listed_files.ListedFiles.of({}, {}), {}
    for pattern in file_patterns.split_patterns(file_pattern):
        file_patterns.check_not_a_folder(pattern, flag_name)
        files = files.joined(listed_files.list_pattern(pattern, folders_seen))
    if not files:
        raise UserError(f'{flag_name}: no files match {file_pattern!r}; check the path, or '
                        'write shards first with `python -m input_fns.prepare`')
    if not listed_files.any_records(files):  # training or evaluating on nothing
        raise UserError(f'{flag_name}: the {len(files)} file(s) matching {file_pattern!r} hold no '
                        'records (all empty); check the path, or write shards again with '
                        '`python -m input_fns.prepare`')
    return files


def check_record_files(files: List[str], feature_spec: Dict[str, tf.io.FixedLenFeature],
                       check_example: Optional[Callable[[Dict, str], None]] = None) -> Callable:
    """Fails early, naming the file, on shards that a reader would choke on later.

    Checks that each file is listed in its folder's manifest.json at its size, and parses the
    first record of each file no manifest vouches for, and of one shard of each listed split,
    against feature_spec. Returns the files' reader (listed_files.check_listed's).
    """
    reader, samples = listed_files.check_listed_samples(files)
    for path in samples:
        try:
            first = next(iter(reader(path).take(1)), None)
        except tf.errors.OpError as e:
            if store_retries.is_transient(e):
                raise  # the store failing is not a bad file
            raise UserError(f'{path}: not a readable TFRecord file ({e.message.splitlines()[0]})')
        if first is None:
            continue
        try:
            example = tf.io.parse_single_example(first, feature_spec)
        except tf.errors.OpError as e:
            mismatch = re.search(r"Key: (\S+)\.\s+Data types don't match\. Data type: (\w+) but "
                                 r'expected type: (\w+)', e.message)
            if mismatch:  # a table prepared apart from the training data typed a column anew
                name, found, wanted = mismatch.groups()
                raise UserError(f'{path}: feature {name!r} holds {found} values where the model '
                                f'reads {wanted}; write these records with the training data\'s '
                                'types (a CSV: prepare csv --schema_from=TRAINING_DATA_FOLDER)')
            raise UserError(f'{path}: records do not match the expected features '
                            f'{sorted(feature_spec)}: {e.message.splitlines()[0]}')
        if check_example is not None:
            check_example(example, path)
    return reader


def worker_share(files: List[str], num_workers: int, worker_index: int) -> List[str]:
    """This training worker's files: every num_workers-th of the sorted list, disjoint from the others'."""
    if num_workers <= 1:
        return files
    if len(files) < num_workers:
        raise UserError(f'{len(files)} files cannot be shared among {num_workers} workers: '
                        f'write at least {num_workers} shards (prepare --num_shards)')
    share = listed_files.part_of(files, files[worker_index::num_workers])
    logging.info('training worker %d of %d reads its share: %s', worker_index, num_workers,
                 ' '.join(os.path.basename(f) for f in share))
    return share


def process_record_dataset(files: List[str],
                           parse_batch: Optional[Callable],
                           batch_size: int,
                           training: bool,
                           seed: Optional[int] = None,
                           shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
                           num_workers: int = 1,
                           worker_index: int = 0,
                           reader: Callable = tf.data.TFRecordDataset,
                           prefetch: bool = True,
                           windows: bool = False) -> tf.data.Dataset:
    """Batches of parsed records; parse_batch maps a [batch] string tensor to (features, labels).

    reader: files -> records (tf.data.TextLineDataset for text shards). parse_batch=None
    and prefetch=False stop the pipeline early, to time its stages. windows: training parses
    and shuffles windows of shuffle_buffer records (all of them, when they fit in
    IN_MEMORY_BYTES) instead of shuffling records one at a time; for records whose parse is
    cheap and whose parsed batch has the batch first in every tensor (table rows).
    """
    if not training:
        dataset = _in_order(files, reader)
        dataset = dataset.batch(batch_size, drop_remainder=False)
        return _parse_and_prefetch(dataset, parse_batch, prefetch, deterministic=True)

    files = worker_share(files, num_workers, worker_index)
    shuffle_buffer = training_buffer(files, shuffle_buffer)
    if windows:
        return _windowed_batches(files, parse_batch, batch_size, seed, shuffle_buffer, reader,
                                 prefetch)
    dataset = _interleaved_blocks(files, seed, reader).unbatch()
    dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.repeat()
    dataset = dataset.batch(batch_size, drop_remainder=True)
    return _parse_and_prefetch(dataset, parse_batch, prefetch, deterministic=False)


# Training reads this many files at once, in a new order each epoch.
TRAIN_PARALLEL_FILES = 8
# The training buffer over shards prepare shuffled fills from two cycles' files at most.
SHUFFLED_SHARDS_BUFFERED = 2 * TRAIN_PARALLEL_FILES


def training_buffer(files: List[str], shuffle_buffer: int) -> int:
    """The training shuffle's records (windows: a window's): shuffle_buffer at most, and no more
    than the files hold, nor, where prepare shuffled them on disk, than two cycles of the
    interleave's files hold, as the manifests list them.

    The first batch waits for the buffer to fill. One larger than the files is filled across
    epochs (tf.data fuses shuffle and repeat): 2,000 one-record shards were each read three
    times before the first step. A shard prepare shuffled is already a random sample of its
    split, and what the buffer must undo is the interleave's order (blocks of READ_BLOCK from
    TRAIN_PARALLEL_FILES files at once): a buffer over more shards than two cycles' only waits
    for more of them to be read first (all 2,000 there; 16 now).
    """
    listed = listed_files.shard_records(files)
    if listed is None:
        return shuffle_buffer
    records, shuffled = listed
    held = sum(records)
    if shuffled:
        held = sum(sorted(records, reverse=True)[:SHUFFLED_SHARDS_BUFFERED])
    return max(1, min(shuffle_buffer, held))


# Evaluation reads this many files at once: in a bucket each file costs a round trip or more,
# which a thousand shards one after another would wait out one by one.
EVAL_PARALLEL_FILES = 8


def _in_order(files: List[str], reader: Callable) -> tf.data.Dataset:
    """The files' records in one fixed order: a record of each of EVAL_PARALLEL_FILES files in
    turn, the files taken in the order given, read in parallel."""
    if len(files) == 1:
        return reader(files)
    parallel = min(len(files), EVAL_PARALLEL_FILES)
    return tf.data.Dataset.from_tensor_slices(files).interleave(
        reader, cycle_length=parallel, block_length=1, num_parallel_calls=parallel,
        deterministic=True)


def _interleaved_blocks(files: List[str], seed: Optional[int], reader: Callable):
    """Blocks of up to READ_BLOCK records, from the files in a new order each epoch."""
    file_dataset = tf.data.Dataset.from_tensor_slices(files)
    file_dataset = file_dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    return file_dataset.interleave(
        lambda path: reader(path).batch(READ_BLOCK),
        cycle_length=min(len(files), TRAIN_PARALLEL_FILES),
        num_parallel_calls=AUTOTUNE,
        deterministic=False)


def _windowed_batches(files, parse_batch, batch_size, seed, window, reader, prefetch):
    """Training batches cut from windows of records parsed at once and permuted as a whole."""
    in_memory = listed_files.total_bytes(files) <= IN_MEMORY_BYTES
    # In memory, the records are parsed a window at a time before they are joined: the serialized
    # share is never held whole.
    windows = _interleaved_blocks(files, seed, reader).rebatch(window)
    if parse_batch is not None:
        windows = windows.map(parse_batch, num_parallel_calls=AUTOTUNE, deterministic=False)
    if in_memory:  # one element, read and parsed once: the same records each epoch
        windows = windows.rebatch(_ALL_RECORDS).cache()
    windows = windows.repeat()
    # A seed per window (per epoch in memory), so that no two are permuted alike.
    window_seeds = tf.data.Dataset.random(seed=seed).batch(2)
    windows = tf.data.Dataset.zip((windows, window_seeds)).map(
        _permuted, num_parallel_calls=AUTOTUNE, deterministic=False)
    batches = windows.rebatch(batch_size, drop_remainder=True)
    return batches.prefetch(AUTOTUNE) if prefetch else batches


_ALL_RECORDS = 1 << 62  # rebatch's size for one window of everything


def _permuted(window, seed):
    """Every tensor of the window reordered by one random permutation of its first dimension."""
    first = tf.nest.flatten(window)[0]
    order = tf.random.experimental.stateless_shuffle(tf.range(tf.shape(first)[0]), seed)
    return tf.nest.map_structure(lambda tensor: tf.gather(tensor, order), window)


def _parse_and_prefetch(batches, parse_batch, prefetch, deterministic):
    if parse_batch is not None:
        batches = batches.map(parse_batch, num_parallel_calls=AUTOTUNE,
                              deterministic=deterministic)
    return batches.prefetch(AUTOTUNE) if prefetch else batches


def record_input_fn(files: List[str], parse_batch: Callable, batch_size: int, training: bool,
                    seed: Optional[int] = None, shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
                    reader: Callable = tf.data.TFRecordDataset,
                    windows: bool = False) -> Callable[[], tf.data.Dataset]:
    """An Estimator input_fn over checked files; under TF_CONFIG each worker reads its share."""
    if training:  # shared out now, so a cluster task logs its share (or fails) as it starts
        task = tf_config.role()
        files = worker_share(files, task.readers, task.reader_index)

    def input_fn():
        return without_autotuner(process_record_dataset(
            files, parse_batch, batch_size, training, seed=seed, shuffle_buffer=shuffle_buffer,
            reader=reader, windows=windows))

    return input_fn


def without_autotuner(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """The dataset an Estimator reads, with tf.data's autotuner off.

    TensorFlow 2.15's autotuner thread sleeps a period that doubles while the input runs (up
    to 60 s), and closing the session waits that sleep out: training runs sat idle for up to
    half a minute after their final checkpoint. Without it each AUTOTUNE map and interleave
    runs as many calls at once as there are cores (up to 16) and prefetch grows its own
    buffer; training ran as fast (docs/bench.md, "tf.data's autotuner").
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def find_bad_file(files: List[str], parse_batch: Callable, reader: Callable = tf.data.TFRecordDataset,
                  batch_size: int = 256) -> Optional[Tuple[str, str]]:
    """(file, what is wrong) for the first file whose records fail to read or parse, else None.

    Training reads files interleaved, so an error mid-read cannot say which file it came
    from; reading each file alone again (only after such an error) can.
    """
    for path in files:
        try:
            for _ in reader(path).batch(batch_size).map(parse_batch):
                pass
        except tf.errors.OpError as e:
            return path, f'{type(e).__name__}: {op_error_summary(e)}'
    return None
