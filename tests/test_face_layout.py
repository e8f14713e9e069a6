"""Face shards of the wrong layout: one line naming the file and what to do, exit 2.

Layout 1 (before manifest.json's layout_version) held one record per photo; training now
streams one record per person (layout 2) and refuses the old shards rather than misreading them.
"""
import glob
import os

import pytest
import tensorflow as tf

from common.errors import UserError
from helpers import assert_fragments, run_prepare, trainer_user_error
from input_fns.faces import face_images, face_pairs, prepare_faces, synthetic_faces
from input_fns.records import stream_shards

GEOMETRY = face_images.FaceGeometry(image_size=32)


def encode_layout_1_photo(jpeg: bytes, identity: int, name: str) -> bytes:
    """A photo record as prepare wrote them before layout 2: one photo each."""
    def feature(value):
        if isinstance(value, int):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
    return tf.train.Example(features=tf.train.Features(feature={
        'image': feature(jpeg), 'identity': feature(identity), 'name': feature(name.encode()),
        'filename': feature(f'{name}/{name}_0001.jpg'.encode())})).SerializeToString()


@pytest.fixture(scope='module')
def shard_dirs(tmp_path_factory):
    """(layout 1 photo shards with their manifest, layout 2 shards of the same people)."""
    root = str(tmp_path_factory.mktemp('faces') / 'lfw')
    written = synthetic_faces.write_faces(root, num_people=6, min_photos=2, size=48, seed=1)
    photos = [(name, path) for name, paths in sorted(written.items()) for path in paths]
    old = str(tmp_path_factory.mktemp('layout_1'))
    stream_shards.write_split(old, 'train', len(photos), lambda i: encode_layout_1_photo(
        open(photos[i][1], 'rb').read(), i % 6, photos[i][0]), num_shards=2, seed=0,
        dataset='faces', features={}, sources=[root], extra={'kind': 'photos'})
    new = str(tmp_path_factory.mktemp('layout_2'))
    run_prepare(prepare_faces.prepare_faces, source_dir=root, output_dir=new,
                validation_fraction=0.0, num_pairs=4)
    return old, new


def test_training_on_layout_1_shards_says_to_prepare_again(shard_dirs, tmp_path):
    old, _ = shard_dirs
    line = trainer_user_error('--model=face_siamese', '--mode=train', f'--model_dir={tmp_path}/model',
                              f'--train_files={old}/train-*', '--train_steps=1', '--batch_size=4')
    assert_fragments(line, '--train_files', f'{old}/train-00000-of-00002.tfrecord', 'old layout',
                     'python -m input_fns.prepare faces')


def test_layout_1_shards_without_a_manifest_are_told_by_their_records(shard_dirs, tmp_path):
    old, _ = shard_dirs
    copied = str(tmp_path / 'train-0.tfrecord')
    tf.io.gfile.copy(sorted(glob.glob(f'{old}/train-*'))[0], copied)
    with pytest.raises(UserError, match=r'train-0.tfrecord holds face photos in the old layout'):
        face_pairs.make_train_input_fn(copied, GEOMETRY, 4)


def test_person_shards_given_as_evaluation_pairs_name_the_file(shard_dirs):
    _, new = shard_dirs
    with pytest.raises(UserError, match=r'--eval_files: .*train-00000-of-00004.tfrecord holds face '
                                        r'photos grouped by person .* not pairs'):
        face_pairs.make_eval_input_fn(f'{new}/train-*', GEOMETRY, 4, '--eval_files')


def test_pair_shards_given_for_training_name_the_file(shard_dirs):
    _, new = shard_dirs
    with pytest.raises(UserError, match=r'train_pairs-00000-of-00002.tfrecord holds face pairs, '
                                        r'not photos'):
        face_pairs.make_train_input_fn(os.path.join(new, 'train_pairs-*'), GEOMETRY, 4)
