"""Shared fixtures: tiny datasets the tests make themselves."""
import gzip
import os
import subprocess
import sys
import types

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')


def make_digit_arrays(count, seed=0):
    """Random 28x28 uint8 images whose label is drawn into them (a bright bar), so models can learn."""
    rng = np.random.RandomState(seed)
    labels = (np.arange(count) % 10).astype(np.uint8)
    images = rng.randint(0, 60, size=(count, 28, 28)).astype(np.uint8)
    for image, label in zip(images, labels):
        image[2 + 2 * label:4 + 2 * label, 4:24] = 255
    return images, labels


def write_idx(path, array, magic):
    header = magic.to_bytes(4, 'big') + b''.join(d.to_bytes(4, 'big') for d in array.shape)
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'wb') as f:
        f.write(header + array.astype(np.uint8).tobytes())


def prepare_flags(**overrides):
    """The flag values input_fns.prepare reads, as a plain object."""
    values = dict(source_dir=None, output_dir=None, num_shards=4, num_eval_shards=2,
                  validation_size=0, validation_fraction=0.2, seed=0, train_people_file=None,
                  num_pairs=300, pairs_file=None, split=None, strict=False, pair_folds=1,
                  rows_per_shard=100, num_features=1024)
    values.update(overrides)
    return types.SimpleNamespace(**values)


@pytest.fixture(scope='session')
def digit_shards(tmp_path_factory):
    """Shards of 230 training and 47 validation images (neither a multiple of common batch sizes)."""
    from input_fns import prepare
    out = str(tmp_path_factory.mktemp('digit_shards'))
    train_x, train_y = make_digit_arrays(230, seed=1)
    val_x, val_y = make_digit_arrays(47, seed=2)
    prepare.write_digit_splits(out, 'test_digits', {
        'train': (train_x, train_y, ['synthetic']),
        'validation': (val_x, val_y, ['synthetic']),
    }, num_shards=4, num_eval_shards=2, seed=0)
    return types.SimpleNamespace(dir=out, train=(train_x, train_y), validation=(val_x, val_y),
                                 train_pattern=os.path.join(out, 'train-*'),
                                 validation_pattern=os.path.join(out, 'validation-*'))


def run_module(module, *args, check=True, timeout=300):
    """Runs `python -m module args` from the repo root, as a user would; returns the CompletedProcess."""
    result = subprocess.run([sys.executable, '-m', module, *args], cwd=REPO, capture_output=True,
                            text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f'{module} {args} exited {result.returncode}:\n{result.stderr[-3000:]}')
    return result
