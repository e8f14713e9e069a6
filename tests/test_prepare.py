"""MNIST / digits -> TFRecord shards: round trip, manifest, hold-out, and clear errors."""
import glob
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from helpers import make_digit_arrays, run_module, run_prepare, write_idx
from input_fns.images import digit_sources, image_records
from input_fns.prepare import command as prepare
from input_fns.records import shards


def read_split(output_dir, split):
    """All (image bytes, label) pairs in a split's shards, and the records per file."""
    files = sorted(glob.glob(os.path.join(output_dir, f'{split}-*.tfrecord')))
    pairs, per_file = [], {}
    for path in files:
        records = list(tf.data.TFRecordDataset(path).as_numpy_iterator())
        per_file[os.path.basename(path)] = len(records)
        for record in records:
            example = tf.io.parse_single_example(record, image_records.FEATURE_SPEC)
            assert set(tf.train.Example.FromString(record).features.feature) == {'image', 'label'}
            pairs.append((example['image'].numpy(), int(example['label'])))
    return sorted(pairs), per_file


def as_pairs(images, labels):
    return sorted((image.tobytes(), int(label)) for image, label in zip(images, labels))


@pytest.fixture
def idx_dir(tmp_path):
    """A folder of MNIST IDX files: gzipped training set, uncompressed test set."""
    train, test = make_digit_arrays(120, seed=3), make_digit_arrays(30, seed=4)
    write_idx(str(tmp_path / 'train-images-idx3-ubyte.gz'), train[0], 2051)
    write_idx(str(tmp_path / 'train-labels-idx1-ubyte.gz'), train[1], 2049)
    write_idx(str(tmp_path / 't10k-images-idx3-ubyte'), test[0], 2051)
    write_idx(str(tmp_path / 't10k-labels-idx1-ubyte'), test[1], 2049)
    return tmp_path, train, test


def test_idx_round_trip_and_manifest(idx_dir, tmp_path):
    source, train, test = idx_dir
    out = str(tmp_path / 'out')
    run_prepare(prepare.prepare_mnist, source_dir=str(source), output_dir=out, num_shards=3)
    manifest = json.load(open(os.path.join(out, 'manifest.json')))
    assert set(manifest['splits']) == {'train', 'test'}
    for split, (images, labels) in (('train', train), ('test', test)):
        pairs, per_file = read_split(out, split)
        assert pairs == as_pairs(images, labels)  # what goes in comes out, each record once
        entry = manifest['splits'][split]
        assert entry['num_records'] == len(labels)
        assert {s['file']: s['records'] for s in entry['shards']} == per_file
        assert entry['seed'] == 0 and entry['features']['image'].startswith('bytes')
    assert len(manifest['splits']['train']['shards']) == 3
    assert len(manifest['splits']['test']['shards']) == 2


def test_records_are_shuffled_with_fixed_seed(idx_dir, tmp_path):
    source, train, _ = idx_dir
    orders = []
    for run in range(2):
        out = str(tmp_path / f'out{run}')
        run_prepare(prepare.prepare_mnist, source_dir=str(source), output_dir=out, num_shards=1)
        records = list(tf.data.TFRecordDataset(
            os.path.join(out, shards.shard_name('train', 0, 1))).as_numpy_iterator())
        orders.append([tf.io.parse_single_example(r, image_records.FEATURE_SPEC)['label'].numpy()
                       for r in records])
    assert orders[0] == orders[1]
    assert orders[0] != [int(label) for label in train[1]]  # not the source order


def test_validation_hold_out_is_disjoint_and_complete(idx_dir, tmp_path):
    source, train, _ = idx_dir
    out = str(tmp_path / 'out')
    run_prepare(prepare.prepare_mnist, source_dir=str(source), output_dir=out, validation_size=20)
    train_pairs, _ = read_split(out, 'train')
    validation_pairs, _ = read_split(out, 'validation')
    assert len(validation_pairs) == 20 and len(train_pairs) == 100
    assert sorted(train_pairs + validation_pairs) == as_pairs(*train)


def test_npz_source_and_missing_split_is_skipped(tmp_path):
    images, labels = make_digit_arrays(40)
    np.savez(tmp_path / 'mnist.npz', x_train=images, y_train=labels)
    out = str(tmp_path / 'out')
    run_prepare(prepare.prepare_mnist, source_dir=str(tmp_path), output_dir=out, num_shards=2)
    manifest = json.load(open(os.path.join(out, 'manifest.json')))
    assert list(manifest['splits']) == ['train']
    assert read_split(out, 'train')[0] == as_pairs(images, labels)


def test_rewrite_with_fewer_shards_removes_stale_ones(idx_dir, tmp_path):
    source, _, _ = idx_dir
    out = str(tmp_path / 'out')
    run_prepare(prepare.prepare_mnist, source_dir=str(source), output_dir=out, num_shards=4)
    run_prepare(prepare.prepare_mnist, source_dir=str(source), output_dir=out, num_shards=2)
    assert sorted(os.path.basename(p) for p in glob.glob(os.path.join(out, 'train-*'))) == [
        'train-00000-of-00002.tfrecord', 'train-00001-of-00002.tfrecord']
    assert not glob.glob(os.path.join(out, '*.tmp-*'))


def test_digits_are_upsampled_real_scans():
    images, labels, _ = digit_sources.load_sklearn_digits()
    assert images.shape == (1797, 28, 28) and images.dtype == np.uint8
    assert set(labels.tolist()) == set(range(10))
    assert images[:, :4, :].max() == 0 and images[:, :, -4:].max() == 0  # MNIST-style margin
    assert images.max() == 255


def test_digits_without_scikit_learn_say_which_set_to_install(monkeypatch):
    # As in the image and a run-time-only venv: scikit-learn is the demo's set, not the service's.
    for module in ('sklearn', 'sklearn.datasets'):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(UserError, match='needs scikit-learn.*requirements-demo.txt'):
        digit_sources.load_sklearn_digits()


@pytest.mark.parametrize('damage, message', [
    ('truncate', 'truncated'),
    ('truncate_gzip', 'damaged or truncated'),
    ('magic', 'magic number 2049, expected 2051'),
])
def test_damaged_idx_file_names_the_file(idx_dir, damage, message):
    source, _, _ = idx_dir
    if damage == 'truncate_gzip':
        path = source / 'train-images-idx3-ubyte.gz'
        path.write_bytes(path.read_bytes()[:-200])
    else:
        path = source / 't10k-images-idx3-ubyte'
        data = path.read_bytes()
        data = data[:-100] if damage == 'truncate' else (2049).to_bytes(4, 'big') + data[4:]
        path.write_bytes(data)
    with pytest.raises(UserError, match=message) as error:
        digit_sources.load_mnist(str(source))
    assert str(path) in str(error.value)


def test_label_count_mismatch(idx_dir):
    source, train, _ = idx_dir
    write_idx(str(source / 'train-labels-idx1-ubyte.gz'), train[1][:-5], 2049)
    with pytest.raises(UserError, match='120 images but .* has 115 labels'):
        digit_sources.load_mnist(str(source))


def test_cli_truncated_file_is_one_line_error(idx_dir, tmp_path):
    source, _, _ = idx_dir
    path = source / 't10k-labels-idx1-ubyte'
    path.write_bytes(path.read_bytes()[:20])
    result = run_module('input_fns.prepare', 'mnist', f'--source_dir={source}',
                        f'--output_dir={tmp_path / "out"}', check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith(f'error: {path}: truncated')
    assert 'Traceback' not in result.stderr
