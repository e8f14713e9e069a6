"""Plain-Python per-example preprocessing in worker processes, as a tf.data dataset.

`tf.py_function` with `num_parallel_calls` still runs one example at a time,
because each call holds the GIL. parallel_map runs the function in worker
processes instead (input_fns.records.python_workers), fed by indices or serialized
records, and returns its arrays into tf.data:

    def load_and_augment(index):            # module level, so workers can import it
        image = augment(decode(paths[index]))  # anything Python: dicts, PIL, ...
        return {'image': image}, labels[index]

    dataset = parallel_python.parallel_map(
        load_and_augment, range(num_examples),
        output_signature=({'image': tf.TensorSpec([64, 64, 3], tf.float32)},
                          tf.TensorSpec([], tf.int32)))
    dataset = dataset.batch(32).prefetch(tf.data.AUTOTUNE)

The workers start when the dataset is iterated and end when the pass is over,
the iterator is dropped (the Estimator's session closes), or the process exits;
a worker also exits by itself if the parent process is killed outright.
"""
import os
from typing import Callable, Iterable, Optional, Union

import tensorflow as tf

from input_fns.records import pipeline, python_workers

DEFAULT_CHUNK_SIZE = 16


def default_num_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()


def parallel_map(fn: Callable,
                 inputs: Union[Iterable, Callable[[], Iterable]],
                 output_signature,
                 num_workers: Optional[int] = None,
                 ordered: bool = True,
                 chunk_size: int = DEFAULT_CHUNK_SIZE,
                 start_method: str = 'forkserver') -> tf.data.Dataset:
    """A dataset of fn(item) for each item of inputs, computed in worker processes.

    fn: a module-level function of one picklable item (an index, serialized record
      bytes, ...) returning arrays in the structure of output_signature.
    inputs: a sequence (e.g. range(n), a list of records), read again on every pass,
      or a function returning a fresh iterable for each pass (e.g. records_from_files).
    output_signature: tf.TensorSpec per example (nested tuples and dicts allowed),
      with fully known shapes.
    ordered: keep the inputs' order; False yields examples as workers finish them.
    A failure in fn raises tf.errors.InvalidArgumentError naming the example's index.
    """
    python_workers.check_picklable(fn)
    specs = tf.nest.flatten(output_signature)
    for spec in specs:
        if not spec.shape.is_fully_defined():
            raise ValueError(f'output_signature: shape {spec.shape} is not fully known; '
                             'parallel_map stacks examples in chunks')
    flat_specs = [(spec.dtype.as_numpy_dtype, tuple(spec.shape.as_list())) for spec in specs]
    num_workers = num_workers or default_num_workers()

    def generate_chunks():
        pool = python_workers.WorkerPool(fn, flat_specs, num_workers, start_method)
        try:
            items = inputs() if callable(inputs) else inputs
            for outputs in pool.map_chunks(items, chunk_size, ordered):
                yield tuple(outputs)
        finally:  # end of the pass, or the iterator (and with it this generator) dropped
            pool.close()

    chunks = tf.data.Dataset.from_generator(generate_chunks, output_signature=tuple(
        tf.TensorSpec([None] + spec.shape.as_list(), spec.dtype) for spec in specs))
    return chunks.unbatch().map(
        lambda *flat: tf.nest.pack_sequence_as(output_signature, list(flat)))


def records_from_files(file_pattern: str, flag_name: str = 'file pattern') -> Callable[[], Iterable]:
    """inputs for parallel_map: the serialized records of TFRecord files, in sorted file order."""
    files = pipeline.list_record_files(file_pattern, flag_name)

    def read():
        # Runs in the generator's tf.data thread, where TensorFlow executes eagerly.
        return tf.data.TFRecordDataset(files).as_numpy_iterator()

    return read
