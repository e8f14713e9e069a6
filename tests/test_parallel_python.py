"""Plain-Python preprocessing in worker processes: same results as the plain function, in order
when asked, errors with their example index, and no workers left behind."""
import os
import signal
import time

import numpy as np
import pytest
import tensorflow as tf

from common import errors
from input_fns.records import parallel_python, python_workers

SIGNATURE = ({'values': tf.TensorSpec([3], tf.float32), 'name': tf.TensorSpec([], tf.string)},
             tf.TensorSpec([], tf.int64))
PID_SIGNATURE = (tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.int64))


def describe(index):  # plain Python: dicts, strings, a loop
    values = [sum(k * index for k in range(j + 1)) / 7 for j in range(3)]
    return {'values': np.array(values, np.float32), 'name': f'item-{index}'.encode()}, index * 2


def slow_first_chunk(index):
    """The first chunk (of 4) finishes last, while the other worker does the rest."""
    time.sleep(0.3 if index < 4 else 0.0)
    return index, os.getpid()


def fails_on_37(index):
    if index == 37:
        raise ValueError(f'cannot handle {index}')
    return index, os.getpid()


def killed_on_5(index):
    if index == 5:  # what the kernel does to a worker when memory runs out
        os.kill(os.getpid(), signal.SIGKILL)
    return index


def with_pid(index):
    return index, os.getpid()


def parse_record(record):
    example = tf.train.Example.FromString(record)
    return example.features.feature['x'].int64_list.value[0], os.getpid()


def as_python(dataset):
    return [tf.nest.map_structure(lambda t: t.numpy(), element) for element in dataset]


def wait_until_gone(pids, seconds=10):
    """The pids still running after `seconds` (zombies count as gone)."""
    deadline = time.time() + seconds
    while True:
        alive = [pid for pid in pids if _running(pid)]
        if not alive or time.time() > deadline:
            return alive
        time.sleep(0.1)


def _running(pid):
    try:
        with open(f'/proc/{pid}/status') as f:
            return 'zombie' not in f.read()
    except FileNotFoundError:
        return False


def test_same_results_as_the_plain_function_in_order():
    got = as_python(parallel_python.parallel_map(describe, range(50), SIGNATURE, num_workers=2,
                                                 chunk_size=4))
    want = [describe(i) for i in range(50)]
    assert len(got) == 50
    for (features, label), (want_features, want_label) in zip(got, want):
        np.testing.assert_array_equal(features['values'], want_features['values'])
        assert features['name'] == want_features['name'] and label == want_label


def test_unordered_gives_the_same_examples_as_they_finish():
    ordered = [int(i) for i, _ in as_python(parallel_python.parallel_map(
        slow_first_chunk, range(64), PID_SIGNATURE, num_workers=2, chunk_size=4))]
    unordered = [int(i) for i, _ in as_python(parallel_python.parallel_map(
        slow_first_chunk, range(64), PID_SIGNATURE, num_workers=2, chunk_size=4,
        ordered=False))]
    assert ordered == list(range(64))
    assert sorted(unordered) == list(range(64)) and unordered != ordered


def test_fed_serialized_records_from_files(tmp_path):
    path = str(tmp_path / 'records.tfrecord')
    with tf.io.TFRecordWriter(path) as writer:
        for value in range(20):
            writer.write(tf.train.Example(features=tf.train.Features(feature={'x': tf.train.Feature(
                int64_list=tf.train.Int64List(value=[value * value]))})).SerializeToString())
    dataset = parallel_python.parallel_map(parse_record, parallel_python.records_from_files(path),
                                           PID_SIGNATURE, num_workers=2)
    assert [int(x) for x, _ in as_python(dataset)] == [v * v for v in range(20)]


def test_a_worker_exception_names_the_example_index():
    dataset = parallel_python.parallel_map(fails_on_37, range(100), PID_SIGNATURE, num_workers=2,
                                           chunk_size=8)
    with pytest.raises(tf.errors.OpError,
                       match='fails_on_37 failed on example 37: ValueError: cannot handle 37'):
        as_python(dataset)


def test_a_killed_worker_is_one_line_that_says_to_run_again():
    pool = python_workers.WorkerPool(killed_on_5, [], num_workers=2)
    try:
        with pytest.raises(python_workers.WorkerDied) as died:
            list(pool.map_items(range(1000)))
    finally:
        pool.close()
    assert str(died.value) == ('a worker process (killed_on_5) died: killed, or out of memory; '
                               'run the same command again')
    assert isinstance(died.value, errors.RunFailure)  # cli.run: one line, exit 1


def test_workers_are_gone_when_the_pass_ends_or_the_iterator_is_dropped():
    pids = {int(pid) for _, pid in as_python(parallel_python.parallel_map(
        with_pid, range(40), PID_SIGNATURE, num_workers=2, chunk_size=2))}
    assert pids and os.getpid() not in pids
    assert wait_until_gone(pids) == []

    iterator = iter(parallel_python.parallel_map(with_pid, range(10 ** 9), PID_SIGNATURE,
                                                 num_workers=2, chunk_size=2))
    pids = {int(next(iterator)[1]) for _ in range(20)}
    del iterator  # an endless input: only dropping the iterator ends it
    assert wait_until_gone(pids) == []


def test_workers_are_gone_after_estimator_training(tmp_path):
    seen_pids = set()

    def input_fn():
        dataset = parallel_python.parallel_map(with_pid, range(10 ** 9), PID_SIGNATURE,
                                               num_workers=2)
        return dataset.map(lambda index, pid: ({'x': tf.cast(index, tf.float32)[None]}, pid))

    def model_fn(features, labels, mode):
        weight = tf.compat.v1.get_variable('w', [1])
        loss = tf.reduce_mean(features['x'] * weight)
        record_pids = tf.compat.v1.py_func(lambda p: seen_pids.update(p.tolist()) or 0,
                                           [labels], tf.int64)
        with tf.control_dependencies([record_pids]):
            train_op = tf.compat.v1.train.GradientDescentOptimizer(0.0).minimize(
                loss, global_step=tf.compat.v1.train.get_or_create_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    estimator = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    estimator.train(lambda: input_fn().batch(8), steps=5)
    assert seen_pids and os.getpid() not in seen_pids
    assert wait_until_gone(seen_pids) == []


def test_functions_workers_cannot_import_are_refused():
    with pytest.raises(ValueError, match='cannot be sent to worker processes'):
        parallel_python.parallel_map(lambda i: i, range(3), tf.TensorSpec([], tf.int64))


def test_output_of_the_wrong_shape_names_the_example():
    dataset = parallel_python.parallel_map(with_pid, range(5), (
        tf.TensorSpec([2], tf.int64), tf.TensorSpec([], tf.int64)), num_workers=1)
    with pytest.raises(tf.errors.OpError, match=r'failed on example 0: ValueError: output 0 has '
                                                r'shape \(\), expected \(2,\)'):
        as_python(dataset)
