"""Every prepare writes its records in a seeded random order over the whole split, in bounded
memory (issue 69, input_fns/records/record_shuffle.py): a table sorted by its label trains as well as the
same rows shuffled, the seed in the manifest gives the same shards again, and the buckets on
disk stay within the memory budget and are removed, whether the prepare ends or fails."""
import glob
import json
import os
import socket
import tempfile

import numpy as np
import pytest
import tensorflow as tf

from common import files
from common.errors import UserError
from helpers import make_digit_arrays, run_prepare
from input_fns.images import image_records
from input_fns.prepare import command as prepare
from input_fns.records import pipeline, record_shuffle, stream_shards
from input_fns.tables import batch_work, csv_batches, prepare_csv, table_records

LABELS = {b'neg': 0, b'pos': 1}


def write_table(path, order: str, rows=600):
    """x, y (standard normal) and label: pos when x + y > 0; rows sorted by label or shuffled."""
    rng = np.random.RandomState(0)
    values = rng.standard_normal((rows, 2))
    labels = np.where(values.sum(axis=1) > 0, 'pos', 'neg')
    rows_in = np.argsort(labels, kind='stable') if order == 'sorted' else rng.permutation(rows)
    with open(path, 'w') as f:
        f.write('x,y,label\n')
        f.writelines(f'{values[i, 0]:.4f},{values[i, 1]:.4f},{labels[i]}\n' for i in rows_in)
    return str(path)


def prepare_table(source, output_dir, **overrides):
    args = dict(source=source, output_dir=str(output_dir), label='label', column_types=None,
                task=None, max_vocabulary=100, na_values=[''], validation_fraction=0.25,
                num_shards=4, num_eval_shards=1, weight_column=None)
    args.update(overrides)
    return run_prepare(prepare_csv.prepare_csv, **args)


def schema_of(output_dir):
    return json.load(open(os.path.join(output_dir, 'manifest.json')))['schema']


def shard_labels(path):
    return [tf.train.Example.FromString(record).features.feature['label'].bytes_list.value[0]
            for record in tf.data.TFRecordDataset(path).as_numpy_iterator()]


def shard_bytes(output_dir):
    return {os.path.basename(path): open(path, 'rb').read()
            for path in sorted(glob.glob(os.path.join(output_dir, '*-of-*')))}


def validation_accuracy(output_dir, model_dir):
    """A canned DNN classifier on the training input_fn for half an epoch (what a sorted
    table's first half is: one class), in batches of 16 from windows of 32 rows."""
    schema = schema_of(output_dir)
    train = table_records.make_input_fn(os.path.join(output_dir, 'train-*'), schema, 16,
                                        training=True, seed=1, shuffle_buffer=32)
    evaluate = table_records.make_input_fn(os.path.join(output_dir, 'validation-*'), schema, 64,
                                           training=False)
    model = tf.estimator.DNNClassifier(
        [16], [tf.feature_column.numeric_column(name) for name in ('x', 'y')],
        model_dir=str(model_dir), label_vocabulary=['neg', 'pos'],
        optimizer=lambda: tf.keras.optimizers.legacy.Adam(0.03),
        config=tf.estimator.RunConfig(tf_random_seed=1))
    rows = json.load(open(os.path.join(output_dir, 'manifest.json')))['splits']['train'][
        'num_records']
    model.train(train, steps=rows // 32)
    return model.evaluate(evaluate)['accuracy']


def test_a_table_sorted_by_its_label_is_written_mixed_and_trains_as_the_shuffled_one(
        tmp_path, monkeypatch):
    # The table streams in windows of rows (above the in-memory cut-off, lowered here), so what
    # the shard holds first is what training sees first.
    monkeypatch.setattr(pipeline, 'IN_MEMORY_BYTES', 0)
    accuracy = {}
    for order in ('sorted', 'shuffled'):
        out = tmp_path / order / 'data'
        prepare_table(write_table(tmp_path / f'{order}.csv', order), out, num_shards=1)
        first = shard_labels(str(out / 'train-00000-of-00001.tfrecord'))[:40]
        assert 10 <= first.count(b'pos') <= 30, first  # not one class
        input_fn = table_records.make_input_fn(str(out / 'train-*'), schema_of(str(out)), 64,
                                               training=True, seed=1, shuffle_buffer=32)
        _, labels = next(iter(input_fn()))
        assert 16 <= sum(LABELS[label] for label in labels.numpy()) <= 48
        accuracy[order] = validation_accuracy(str(out), tmp_path / order / 'model')
    # Before: sorted 0.45, shuffled 0.95 (the sorted table's first half is all 'neg'). Now the
    # same rows make the same shards, in whatever order they come.
    assert accuracy['sorted'] > 0.9 and accuracy['shuffled'] > 0.9, accuracy
    assert shard_bytes(tmp_path / 'sorted' / 'data') == shard_bytes(tmp_path / 'shuffled' / 'data')


def test_the_seed_in_the_manifest_orders_the_records(tmp_path, monkeypatch):
    source = write_table(tmp_path / 'table.csv', 'sorted')
    prepare_table(source, tmp_path / 'a', seed=3)
    prepare_table(source, tmp_path / 'again', seed=3)
    prepare_table(source, tmp_path / 'other', seed=4)
    monkeypatch.setattr(record_shuffle, 'MEMORY_BYTES', 2000)  # through buckets on disk
    prepare_table(source, tmp_path / 'bucketed', seed=3)
    first = shard_bytes(tmp_path / 'a')
    assert shard_bytes(tmp_path / 'again') == first == shard_bytes(tmp_path / 'bucketed')
    assert json.load(open(tmp_path / 'a' / 'manifest.json'))['splits']['train']['seed'] == 3
    other = shard_bytes(tmp_path / 'other')
    assert all(other[name] != first[name] for name in first)  # each shard in another order
    assert all_records(tmp_path / 'other') == all_records(tmp_path / 'a')  # of the same rows


def all_records(output_dir):
    return sorted(record for path in glob.glob(os.path.join(output_dir, '*-of-*'))
                  for record in tf.data.TFRecordDataset(path).as_numpy_iterator())


class RecordedShuffler(record_shuffle.RecordShuffler):
    """The shufflers a prepare made, and the bucket folders they wrote."""
    made = []

    def __init__(self, *args):
        super().__init__(*args)
        self.folders = []
        RecordedShuffler.made.append(self)

    def _spill(self):
        super()._spill()
        self.folders.append(self.folder)


@pytest.fixture
def small_budget(monkeypatch):
    """A 4 KiB budget: the shufflers' buckets on disk, recorded."""
    monkeypatch.setattr(record_shuffle, 'MEMORY_BYTES', 4096)
    monkeypatch.setattr(stream_shards.record_shuffle, 'RecordShuffler', RecordedShuffler)
    RecordedShuffler.made = []
    return RecordedShuffler.made


def test_buckets_fit_the_budget_and_are_removed(tmp_path, small_budget):
    source = write_table(tmp_path / 'table.csv', 'sorted', rows=3000)
    out = tmp_path / 'data'
    out.mkdir()
    (out / f'{record_shuffle.FOLDER_PREFIX}0000{record_shuffle.WRITER_MARK}'
           f'{socket.gethostname()}-999999999').mkdir()  # a killed prepare's
    prepare_table(source, out)
    train = small_budget[0]
    assert [s.count for s in small_budget] == [
        json.load(open(out / 'manifest.json'))['splits'][split]['num_records']
        for split in ('train', 'validation')]
    record_bytes = sum(len(record) for path in glob.glob(str(out / 'train-*'))
                       for record in tf.data.TFRecordDataset(path).as_numpy_iterator())
    # Enough buckets for the data, none of them over the budget (64 first, some split again).
    needs = record_bytes + train.count * record_shuffle.INDEX_BYTES_PER_RECORD
    assert train.buckets_read >= needs / record_shuffle.MEMORY_BYTES
    assert train.buckets_read > 1 << record_shuffle.TOP_BUCKET_BITS
    assert 0 < train.largest_bucket_bytes <= record_shuffle.MEMORY_BYTES
    assert train.folders and not any(os.path.exists(f) for s in small_budget for f in s.folders)
    assert sorted(os.listdir(out)) == ['manifest.json', 'train-00000-of-00004.tfrecord',
                                       'train-00001-of-00004.tfrecord',
                                       'train-00002-of-00004.tfrecord',
                                       'train-00003-of-00004.tfrecord',
                                       'validation-00000-of-00001.tfrecord']


def in_workers(monkeypatch):
    """prepare csv's batches and shards worked by two worker processes (batch_work), whatever
    the source's size and the machine's cores."""
    monkeypatch.setattr(batch_work, 'worker_count', lambda paths: 2)


def test_worker_processes_write_the_shards_one_process_writes(tmp_path, small_budget,
                                                              monkeypatch):
    monkeypatch.setattr(csv_batches, 'BLOCK_BYTES', 4096)  # many batches, to the workers
    source = write_table(tmp_path / 'table.csv', 'sorted', rows=3000)
    prepare_table(source, tmp_path / 'one')
    in_workers(monkeypatch)
    # Buckets that each fit the budget: the workers read them back (none here), a shard each.
    monkeypatch.setattr(record_shuffle, 'MEMORY_BYTES', 64 << 10)
    prepare_table(source, tmp_path / 'workers')
    assert shard_bytes(tmp_path / 'workers') == shard_bytes(tmp_path / 'one')
    assert schema_of(tmp_path / 'workers') == schema_of(tmp_path / 'one')
    workers = small_budget[-2:]
    assert all(s.folders and s.buckets_read == 0 for s in workers)
    assert not any(os.path.exists(f) for s in workers for f in s.folders)
    assert sorted(os.listdir(tmp_path / 'workers')) == sorted(os.listdir(tmp_path / 'one'))


def test_a_field_the_workers_cannot_type_is_refused_in_one_line_naming_its_row(tmp_path,
                                                                               monkeypatch):
    """A worker's batch with a field only the rows path reads goes back to the reading process,
    whose rows path refuses it as it does without workers."""
    monkeypatch.setattr(csv_batches, 'BLOCK_BYTES', 4096)
    source = write_table(tmp_path / 'table.csv', 'shuffled', rows=3000)
    lines = open(source).read().splitlines()
    lines[2500] = 'x1,' + lines[2500].split(',', 1)[1]
    open(source, 'w').write('\n'.join(lines) + '\n')
    errors = []
    for name in ('one', 'workers'):
        if name == 'workers':
            in_workers(monkeypatch)
        with pytest.raises(UserError) as error:
            prepare_table(source, tmp_path / name, column_types='x:float')
        errors.append(str(error.value))
        assert os.listdir(tmp_path / name) == []
    assert errors[0] == errors[1] and "line 2501, column 'x': 'x1' is not" in errors[0]


@pytest.mark.parametrize('workers', [False, True])
def test_a_bad_row_after_the_buckets_leaves_neither_them_nor_a_shard(tmp_path, small_budget,
                                                                    monkeypatch, workers):
    monkeypatch.setattr(csv_batches, 'BLOCK_BYTES', 4096)  # batches before the bad row's
    if workers:
        in_workers(monkeypatch)
    source = write_table(tmp_path / 'table.csv', 'sorted', rows=3000)
    with open(source, 'a') as f:
        f.write('1.0,2.0,pos,extra\n')
    with pytest.raises(UserError, match=r'line 3002: 4 fields'):
        prepare_table(source, tmp_path / 'data')
    assert small_budget[0].folders and not os.path.exists(small_budget[0].folders[0])
    assert os.listdir(tmp_path / 'data') == []


def test_records_made_by_index_are_shuffled_through_the_same_buckets(tmp_path, small_budget,
                                                                    monkeypatch):
    """Digits, images, faces (stream_shards.write_split): the same order whatever the budget."""
    images, labels = make_digit_arrays(200)
    in_label_order = np.argsort(labels, kind='stable')
    splits = {'train': (images[in_label_order], labels[in_label_order], ['synthetic'])}
    prepare.write_digit_splits(str(tmp_path / 'small'), 'digits', splits, 2, 1, seed=0)
    assert small_budget[0].buckets_read > 1 << record_shuffle.TOP_BUCKET_BITS
    monkeypatch.setattr(record_shuffle, 'MEMORY_BYTES', 256 << 20)
    prepare.write_digit_splits(str(tmp_path / 'in_memory'), 'digits', splits, 2, 1, seed=0)
    assert small_budget[1].buckets_read == 0 and not small_budget[1].folders
    assert shard_bytes(tmp_path / 'small') == shard_bytes(tmp_path / 'in_memory')
    first_shard = tf.data.TFRecordDataset(str(tmp_path / 'small' / 'train-00000-of-00002.tfrecord'))
    written = [tf.io.parse_single_example(record, image_records.FEATURE_SPEC)['label'].numpy()
               for record in first_shard.as_numpy_iterator()]
    assert len(set(written[:20])) > 3  # not the first classes alone


def test_an_output_in_a_bucket_has_its_buckets_in_tmpdir(tmp_path, small_budget, monkeypatch):
    tmpdir = tmp_path / 'tmpdir'
    tmpdir.mkdir()
    monkeypatch.setattr(tempfile, 'tempdir', str(tmpdir))
    out = f'ram://{tmp_path.name}/data'  # TF's in-memory filesystem: no rename, as a bucket
    prepare_table(write_table(tmp_path / 'table.csv', 'sorted', rows=1000), out, num_shards=2)
    assert small_budget[0].folders[0].startswith(f'{tmpdir}/{record_shuffle.FOLDER_PREFIX}')
    assert os.listdir(tmpdir) == []
    assert files.listdir(out) == ['manifest.json', 'train-00000-of-00002.tfrecord',
                                  'train-00001-of-00002.tfrecord',
                                  'validation-00000-of-00001.tfrecord']
