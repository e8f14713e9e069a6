"""Face photo and face pair records: their features, encoding, and reading pair labels.

Photo records keep the JPEG bytes exactly as on disk, with an integer identity, the
person's name and the file name; pair records hold two JPEGs, a same-person label and
the fold of LFW's pairs.txt they come from.
"""
from typing import Dict

import numpy as np
import tensorflow as tf

from input_fns import pipeline

PHOTO_SPEC = {
    'image': tf.io.FixedLenFeature([], tf.string),
    'identity': tf.io.FixedLenFeature([], tf.int64),
    'name': tf.io.FixedLenFeature([], tf.string),
    'filename': tf.io.FixedLenFeature([], tf.string),
}
PAIR_SPEC = {
    'image_a': tf.io.FixedLenFeature([], tf.string),
    'image_b': tf.io.FixedLenFeature([], tf.string),
    'label': tf.io.FixedLenFeature([], tf.int64),
    'fold': tf.io.FixedLenFeature([], tf.int64),
}
PHOTO_MANIFEST_FEATURES = {
    'image': 'bytes: the JPEG file exactly as on disk',
    'identity': 'int64: person index, unique across splits',
    'name': 'bytes: the person\'s name',
    'filename': 'bytes: path relative to source_root, e.g. Name/Name_0001.jpg',
}
PAIR_MANIFEST_FEATURES = {
    'image_a': 'bytes: JPEG', 'image_b': 'bytes: JPEG',
    'label': 'int64: 1 same person, 0 different', 'fold': 'int64: fold of pairs.txt (0 if one set)',
}


def _bytes(value: bytes) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _int64(value: int) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))


def encode_photo(jpeg: bytes, identity: int, name: str, filename: str) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature={
        'image': _bytes(jpeg), 'identity': _int64(identity), 'name': _bytes(name.encode()),
        'filename': _bytes(filename.encode())})).SerializeToString()


def encode_pair(jpeg_a: bytes, jpeg_b: bytes, same: bool, fold: int) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature={
        'image_a': _bytes(jpeg_a), 'image_b': _bytes(jpeg_b), 'label': _int64(same),
        'fold': _int64(fold)})).SerializeToString()


def read_pair_labels(file_pattern: str, flag_name: str = 'file pattern') -> Dict[str, np.ndarray]:
    """Labels and folds of pair shards, in the order fixed_pairs_dataset reads them."""
    files = pipeline.list_record_files(file_pattern, flag_name)
    spec = {key: PAIR_SPEC[key] for key in ('label', 'fold')}
    labels, folds = [], []
    for batch in tf.data.TFRecordDataset(files).batch(4096).map(
            lambda s: tf.io.parse_example(s, spec)):
        labels.append(batch['label'].numpy())
        folds.append(batch['fold'].numpy())
    return {'label': np.concatenate(labels), 'fold': np.concatenate(folds)}
