"""Face person and face pair records: their features, encoding, layout, and reading pair labels.

A person record holds all of one person's photos, the JPEG bytes as on disk (one with an
EXIF orientation turned upright, another format or a CMYK JPEG as an RGB JPEG:
face_photos.stored_photo), with their file names, an
integer identity and the person's name (layout 2; layout 1, before it, was one record per
photo). Pair records hold two JPEGs, a same-person label
and the fold of LFW's pairs.txt they come from.
"""
import os
from typing import Dict, List

import numpy as np
import tensorflow as tf

from common.errors import UserError
from input_fns.records import pipeline, shards

# manifest.json's layout_version of photo splits: 2 is one record per person. Layout 1 (no
# layout_version, kind 'photos') was one record per photo, which training had to hold whole.
PEOPLE_LAYOUT_VERSION = 2
PERSON_SPEC = {
    'images': tf.io.RaggedFeature(tf.string),
    'filenames': tf.io.RaggedFeature(tf.string),
    'identity': tf.io.FixedLenFeature([], tf.int64),
    'name': tf.io.FixedLenFeature([], tf.string),
    'num_photos': tf.io.FixedLenFeature([], tf.int64),
}
PAIR_SPEC = {
    'image_a': tf.io.FixedLenFeature([], tf.string),
    'image_b': tf.io.FixedLenFeature([], tf.string),
    'label': tf.io.FixedLenFeature([], tf.int64),
    'fold': tf.io.FixedLenFeature([], tf.int64),
}
PERSON_MANIFEST_FEATURES = {
    'images': 'bytes list: the person\'s JPEG files as on disk, or turned upright, or '
              're-encoded from another format',
    'filenames': 'bytes list: their paths relative to source_root, e.g. Name/Name_0001.jpg',
    'identity': 'int64: person index, unique across splits',
    'name': 'bytes: the person\'s name',
    'num_photos': 'int64: how many photos the lists hold',
}
PAIR_MANIFEST_FEATURES = {
    'image_a': 'bytes: JPEG', 'image_b': 'bytes: JPEG',
    'label': 'int64: 1 same person, 0 different', 'fold': 'int64: fold of pairs.txt (0 if one set)',
}


def _bytes(value: bytes) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _int64(value: int) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))


def encode_person(jpegs: List[bytes], filenames: List[str], identity: int, name: str) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature={
        'images': tf.train.Feature(bytes_list=tf.train.BytesList(value=jpegs)),
        'filenames': tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[f.encode() for f in filenames])),
        'identity': _int64(identity), 'name': _bytes(name.encode()),
        'num_photos': _int64(len(jpegs))})).SerializeToString()


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


def _layout_from_manifest(path: str):
    """'people', 'photos' (layout 1) or 'pairs', as the folder's manifest.json lists the file."""
    name = os.path.basename(path)
    for entry in shards.read_manifest(os.path.dirname(path)).get('splits', {}).values():
        if any(shard.get('file') == name for shard in entry.get('shards', [])):
            if entry.get('kind') == 'pairs':
                return 'pairs'
            return 'people' if entry.get('layout_version') == PEOPLE_LAYOUT_VERSION else 'photos'
    return None


def _layout_from_record(path: str):
    """The same, from the first record's features, for shards without a manifest."""
    try:
        first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        features = set(tf.train.Example.FromString(first.numpy()).features.feature)
    except (tf.errors.OpError, AttributeError, ValueError):
        return None  # empty or unreadable: the record check says so
    return next((layout for layout, feature in (('people', 'images'), ('photos', 'image'),
                                                ('pairs', 'image_a')) if feature in features), None)


WRONG_LAYOUT = {
    ('photos', 'people'): 'face photos in the old layout, one record per photo (manifest.json '
                          'layout 1); training reads one record per person (layout 2): write the '
                          'shards again with `python -m input_fns.prepare faces`',
    ('pairs', 'people'): 'face pairs, not photos: training takes the photo shards (train-*) '
                         'of `python -m input_fns.prepare faces`',
    ('people', 'pairs'): 'face photos grouped by person (training shards), not pairs: give the '
                         'pair shards (*_pairs-*) of `python -m input_fns.prepare faces`',
    ('photos', 'pairs'): 'face photos (old layout), not pairs: give the pair shards (*_pairs-*) '
                         'of `python -m input_fns.prepare faces`',
}


def check_layout(files: List[str], wanted: str, flag_name: str) -> None:
    """One line naming the first file whose records are not `wanted` ('people' or 'pairs')."""
    for path in files:
        found = _layout_from_manifest(path) or _layout_from_record(path)
        if (found, wanted) in WRONG_LAYOUT:
            raise UserError(f'{flag_name}: {path} holds {WRONG_LAYOUT[found, wanted]}')
