"""The image shard input_fn: shapes, dtypes, full evaluation passes, worker shares, clear errors."""
import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from common import tf_config
from common.errors import UserError
from helpers import make_digit_arrays
from input_fns.images import image_records
from input_fns.records import pipeline

SHAPE = (28, 28, 1)


def collect(dataset, max_batches=None):
    images, labels = [], []
    for i, (features, label) in enumerate(dataset):
        if max_batches is not None and i >= max_batches:
            break
        images.append(features['image'].numpy())
        labels.append(label.numpy())
    return images, labels


def test_eval_pass_sees_every_record_once_in_a_fixed_order(digit_shards):
    input_fn = image_records.make_input_fn(digit_shards.validation_pattern, SHAPE, batch_size=10,
                                           training=False)
    images, labels = collect(input_fn())
    assert [len(batch) for batch in labels] == [10, 10, 10, 10, 7]  # remainder kept
    assert all(batch.dtype == np.float32 and batch.shape[1:] == SHAPE for batch in images)
    assert labels[0].dtype == np.int32
    got = sorted((np.round(image[..., 0] * 255).astype(np.uint8).tobytes(), int(label))
                 for batch_x, batch_y in zip(images, labels) for image, label in zip(batch_x, batch_y))
    want = sorted((x.tobytes(), int(y)) for x, y in zip(*digit_shards.validation))
    assert got == want
    assert min(b.min() for b in images) >= 0.0 and max(b.max() for b in images) <= 1.0
    _, labels_again = collect(input_fn())
    assert all((a == b).all() for a, b in zip(labels, labels_again))


def test_training_batches_are_full_shuffled_and_repeat(digit_shards):
    input_fn = image_records.make_input_fn(digit_shards.train_pattern, SHAPE, batch_size=32,
                                           training=True, seed=1, shuffle_buffer=100)
    images, labels = collect(input_fn(), max_batches=12)  # 384 examples > 230: repeats
    assert all(batch.shape == (32,) + SHAPE for batch in images)
    seen = np.concatenate(labels)
    assert set(seen.tolist()) == set(range(10))
    assert not (seen[:10] == np.arange(10)).all()


def test_estimator_input_runs_without_tf_data_autotuner(digit_shards):
    """Its thread made closing a session wait up to a minute (pipeline.without_autotuner)."""
    for pattern, training in ((digit_shards.train_pattern, True),
                              (digit_shards.validation_pattern, False)):
        input_fn = image_records.make_input_fn(pattern, SHAPE, batch_size=10, training=training)
        assert input_fn().options().autotune.enabled is False


def test_tf_config_worker_shares():
    cluster = {'chief': ['h:1'], 'worker': ['h:2', 'h:3'], 'ps': ['h:4']}

    def share(task_type, index):
        task = tf_config.role(
            json.dumps({'cluster': cluster, 'task': {'type': task_type, 'index': index}}))
        return task.readers, task.reader_index

    assert share('chief', 0) == (3, 0)
    assert share('worker', 0) == (3, 1)
    assert share('worker', 1) == (3, 2)
    assert share('evaluator', 0) == (1, 0)
    assert tf_config.role('').readers == 1


def test_each_worker_reads_its_own_files(tmp_path):
    # Four single-label files: what a worker sees tells which files it reads.
    for label in range(4):
        images, _ = make_digit_arrays(8)
        with tf.io.TFRecordWriter(str(tmp_path / f'part-{label}.tfrecord')) as writer:
            for image in images:
                writer.write(image_records.encode_example(image, label))
    files = pipeline.list_record_files(str(tmp_path / 'part-*'))
    seen = []
    for worker in range(2):
        dataset = pipeline.process_record_dataset(
            files, image_records.parse_batch_fn(SHAPE), batch_size=4, training=True, seed=0,
            num_workers=2, worker_index=worker)
        seen.append(set(np.concatenate(collect(dataset, max_batches=20)[1]).tolist()))
    assert seen == [{0, 2}, {1, 3}]


def test_missing_pattern_names_it(tmp_path):
    pattern = str(tmp_path / 'nothing-*')
    with pytest.raises(UserError, match='--train_files: no files match .*nothing-'):
        image_records.make_input_fn(pattern, SHAPE, 8, True, flag_name='--train_files')


def test_record_missing_a_feature_names_the_file(tmp_path):
    path = str(tmp_path / 'bad.tfrecord')
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            'image': tf.train.Feature(bytes_list=tf.train.BytesList(value=[bytes(784)]))
        })).SerializeToString())
    with pytest.raises(UserError, match=f'{path}: records do not match .*label'):
        image_records.make_input_fn(path, SHAPE, 8, True)


def test_wrong_image_size_names_the_file(tmp_path):
    path = str(tmp_path / 'small.tfrecord')
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(image_records.encode_example(np.zeros((8, 8), np.uint8), 3))
    with pytest.raises(UserError, match=f'{path}: images are 64 bytes, .* expects 28x28x1'):
        image_records.make_input_fn(path, SHAPE, 8, True)


def test_records_written_with_height_and_width_still_read(tmp_path):
    path = str(tmp_path / 'before.tfrecord')

    def int64(value):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    with tf.io.TFRecordWriter(path) as writer:
        for label in range(8):  # the layout before the shape moved to the manifest
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                'image': tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[np.full(784, label, np.uint8).tobytes()])),
                'label': int64(label), 'height': int64(28), 'width': int64(28)}))
                .SerializeToString())
    features, labels = next(iter(image_records.make_input_fn(path, SHAPE, 8, False)()))
    assert sorted(labels.numpy()) == list(range(8))
    assert [round(float(image[0, 0, 0]) * 255) for image in features['image']] == list(
        labels.numpy())


def test_shard_not_in_manifest_is_refused(digit_shards, tmp_path):
    folder = tmp_path / 'copy'
    shutil.copytree(digit_shards.dir, folder)
    shutil.copy(folder / 'train-00000-of-00004.tfrecord', folder / 'train-00000-of-00003.tfrecord')
    with pytest.raises(UserError, match='train-00000-of-00003.tfrecord: not listed in .*manifest'):
        image_records.make_input_fn(str(folder / 'train-*'), SHAPE, 8, True)


def test_not_a_tfrecord_file(tmp_path):
    path = tmp_path / 'junk.tfrecord'
    path.write_bytes(b'this is not a TFRecord file at all')
    with pytest.raises(UserError, match='junk.tfrecord: not a readable TFRecord file'):
        image_records.make_input_fn(str(path), SHAPE, 8, True)
