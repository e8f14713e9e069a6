"""Where handwritten-digit images come from: MNIST IDX files, mnist.npz, or sklearn's digits.

Each loader returns {split: (images uint8 [N, 28, 28], labels uint8 [N], sources)}.
"""
import gzip
import io
import struct
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from common import files, paths
from common.errors import UserError

IMAGES_MAGIC = 2051  # IDX: unsigned bytes, 3 dimensions
LABELS_MAGIC = 2049  # IDX: unsigned bytes, 1 dimension
IDX_PREFIX = {'train': 'train', 'test': 't10k'}

Split = Tuple[np.ndarray, np.ndarray, List[str]]


def read_idx(path: str, expected_magic: int) -> np.ndarray:
    """Reads one IDX file (gzipped or not) of unsigned bytes."""
    try:
        data = files.read_bytes(path)
        if path.endswith('.gz'):
            data = gzip.decompress(data)
    except (OSError, EOFError, tf.errors.OpError) as e:
        raise UserError(f'{path}: cannot be read ({e}); the file is damaged or truncated: '
                        'download it again')
    if len(data) < 8:
        raise UserError(f'{path}: truncated ({len(data)} bytes, shorter than an IDX header)')
    magic = int.from_bytes(data[:4], 'big')
    if magic != expected_magic:
        kind = 'images' if expected_magic == IMAGES_MAGIC else 'labels'
        raise UserError(f'{path}: magic number {magic}, expected {expected_magic} for an MNIST '
                        f'{kind} file; is this the right file?')
    num_dims = magic & 0xFF
    header_size = 4 + 4 * num_dims
    if len(data) < header_size:
        raise UserError(f'{path}: truncated inside its header')
    dims = struct.unpack(f'>{num_dims}I', data[4:header_size])
    expected_bytes = int(np.prod(dims))
    body_bytes = len(data) - header_size
    if body_bytes != expected_bytes:
        problem = 'truncated' if body_bytes < expected_bytes else 'longer than its header says'
        raise UserError(f'{path}: {problem}: header says {"x".join(map(str, dims))} '
                        f'({expected_bytes} bytes) but {body_bytes} bytes follow; download it again')
    return np.frombuffer(data, np.uint8, offset=header_size).reshape(dims)


def _find(source_dir: str, names: List[str]) -> Optional[str]:
    for name in names:
        for candidate in (name, name + '.gz'):
            path = paths.join(source_dir, candidate)
            if files.exists(path):
                return path
    return None


def load_idx_dir(source_dir: str) -> Dict[str, Split]:
    """The train and test splits found in a folder of IDX files; absent splits are skipped."""
    splits = {}
    for split, prefix in IDX_PREFIX.items():
        images_path = _find(source_dir, [f'{prefix}-images-idx3-ubyte', f'{prefix}-images.idx3-ubyte'])
        labels_path = _find(source_dir, [f'{prefix}-labels-idx1-ubyte', f'{prefix}-labels.idx1-ubyte'])
        if images_path is None and labels_path is None:
            logging.info('%s split: no %s-images/labels IDX files in %s; skipping it',
                         split, prefix, source_dir)
            continue
        if images_path is None or labels_path is None:
            missing, dims = ('images', 3) if images_path is None else ('labels', 1)
            raise UserError(f'{source_dir}: the {split} split has no {missing} file '
                            f'({prefix}-{missing}-idx{dims}-ubyte[.gz]); add it or remove its partner')
        images = read_idx(images_path, IMAGES_MAGIC)
        labels = read_idx(labels_path, LABELS_MAGIC)
        _check_pair(images, labels, images_path, labels_path)
        splits[split] = (images, labels, [images_path, labels_path])
    return splits


def load_npz(path: str) -> Dict[str, Split]:
    """Keras' mnist.npz layout: x_train, y_train, x_test, y_test."""
    try:
        with np.load(io.BytesIO(files.read_bytes(path))) as data:
            arrays = {key: data[key] for key in data.files}
    except (OSError, ValueError, tf.errors.OpError) as e:
        raise UserError(f'{path}: not a readable .npz file ({e})')
    splits = {}
    for split in ('train', 'test'):
        if f'x_{split}' not in arrays:
            logging.info('%s split: no x_%s in %s; skipping it', split, split, path)
            continue
        if f'y_{split}' not in arrays:
            raise UserError(f'{path}: has x_{split} but no y_{split}')
        images, labels = arrays[f'x_{split}'], arrays[f'y_{split}']
        if images.dtype != np.uint8 or images.ndim != 3:
            raise UserError(f'{path}: x_{split} must be uint8 [N, H, W], got {images.dtype} '
                            f'{list(images.shape)}')
        _check_pair(images, labels.astype(np.uint8), path, path)
        splits[split] = (images, labels.astype(np.uint8), [path])
    return splits


def load_mnist(source: str) -> Dict[str, Split]:
    """MNIST from a folder of IDX files or mnist.npz, or from an .npz path."""
    if source.endswith('.npz') and files.exists(source) and not files.isdir(source):
        splits = load_npz(source)
    elif files.isdir(source):
        npz = paths.join(source, 'mnist.npz')
        splits = load_npz(npz) if files.exists(npz) else load_idx_dir(source)
    else:
        raise UserError(f'--source_dir={source}: no such folder or .npz file')
    if not splits:
        raise UserError(f'--source_dir={source}: no MNIST files found (expected '
                        'train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz], '
                        'the t10k-* pair, or mnist.npz)')
    return splits


def _check_pair(images, labels, images_path, labels_path):
    if len(images) != len(labels):
        raise UserError(f'{images_path}: {len(images)} images but {labels_path} has '
                        f'{len(labels)} labels; the files do not belong together')
    if len(labels) and labels.max() > 9:
        raise UserError(f'{labels_path}: label {int(labels.max())} is not a digit 0-9')


def load_sklearn_digits() -> Split:
    """sklearn's bundled digits (1,797 real 8x8 scans), upsampled to MNIST's 28x28 layout.

    As in MNIST, each digit fills a 20x20 box centred in a 28x28 frame, white on
    black, pixel values 0..255.
    """
    import tensorflow as tf
    try:
        from sklearn.datasets import load_digits
    except ImportError:  # the runtime set and the image leave the demo's data out
        raise UserError('prepare digits needs scikit-learn, the offline demo\'s data source: '
                        'pip install -r requirements-demo.txt (./run.sh installs it)') from None

    digits = load_digits()
    scans = digits.images.astype(np.float32) * (255.0 / 16.0)
    box = tf.image.resize(scans[..., None], [20, 20], method='bicubic', antialias=True)
    frame = tf.pad(box, [[0, 0], [4, 4], [4, 4], [0, 0]])
    images = np.clip(np.round(frame.numpy()[..., 0]), 0, 255).astype(np.uint8)
    return images, digits.target.astype(np.uint8), ['sklearn.datasets.load_digits']
