"""Faces: LFW folders -> shards -> random training pairs -> models -> LFW protocol -> export."""
import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from helpers import cmyk_jpeg, run_module, run_prepare
from image_tree import avif_bytes, bmp_bytes, encode, heic_bytes, pillow_bytes, tiff_bytes
from input_fns.faces import (face_images, face_pairs, face_records, face_sampler, lfw_files,
                             prepare_faces, synthetic_faces)
from models import face_diff, face_embedding, face_siamese
from trainer.input_kinds import pair_protocol, registry as input_kinds

GEOMETRY = face_images.FaceGeometry(image_size=64, channels=1, crop_fraction=0.5)


@pytest.fixture(scope='module')
def faces(tmp_path_factory):
    """40 synthetic people in LFW's layout, and their shards (30% of people held out)."""
    root = str(tmp_path_factory.mktemp('faces') / 'lfw')
    written = synthetic_faces.write_faces(root, num_people=40, size=64, seed=3)
    out = str(tmp_path_factory.mktemp('face_shards'))
    entries = run_prepare(prepare_faces.prepare_faces,
        source_dir=os.path.dirname(root), output_dir=out, validation_fraction=0.3, num_pairs=20)
    return root, written, out, entries


def read_photos(pattern):
    """Every photo of person shards: {'image', 'name', 'filename'}."""
    records = tf.data.TFRecordDataset(sorted(glob.glob(pattern)))
    people = [tf.io.parse_single_example(r, face_records.PERSON_SPEC) for r in records]
    return [{'image': image, 'name': person['name'], 'filename': filename}
            for person in people
            for image, filename in zip(person['images'], person['filenames'])]


def test_photo_shards_round_trip_split_by_people(faces):
    root, written, out, entries = faces
    names = {}
    for split in ('train', 'validation'):
        photos = read_photos(os.path.join(out, f'{split}-*'))
        names[split] = {p['name'].numpy().decode() for p in photos}
        for photo in photos:  # the JPEG bytes as on disk (none has an EXIF orientation)
            path = os.path.join(root, photo['filename'].numpy().decode())
            assert photo['image'].numpy() == open(path, 'rb').read()
        assert entries[split]['num_photos'] == len(photos)
        assert entries[split]['num_records'] == entries[split]['num_people'] == len(names[split])
        assert entries[split]['layout_version'] == face_records.PEOPLE_LAYOUT_VERSION
    assert not names['train'] & names['validation']
    assert names['train'] | names['validation'] == set(written)
    assert len(names['validation']) == 12
    manifest = json.load(open(os.path.join(out, 'manifest.json')))
    assert manifest['source_root'] == os.path.abspath(root)
    assert set(manifest['splits']) == {'train', 'validation', 'train_pairs', 'validation_pairs'}


def test_fixed_pairs_come_from_their_split(faces):
    _, _, out, entries = faces
    validation_people = {p['name'].numpy().decode()
                         for p in read_photos(os.path.join(out, 'validation-*'))}
    pairs = lfw_files.read_pairs_file(os.path.join(out, 'validation_pairs.txt'))
    assert {p.name_a for p in pairs} | {p.name_b for p in pairs} <= validation_people
    entry = entries['validation_pairs']
    assert (entry['num_same'], entry['num_different'], entry['num_records']) == (20, 20, 40)


def test_calibration_people_are_training_people_kept_out_of_training(faces, tmp_path):
    root, written, out, _ = faces
    calibrated = str(tmp_path / 'calibrated')
    entries = run_prepare(prepare_faces.prepare_faces, source_dir=os.path.dirname(root),
                          output_dir=calibrated, validation_fraction=0.3, num_pairs=20,
                          calibration_fraction=0.25)
    people = {split: {p['name'].numpy().decode() for p in read_photos(
        os.path.join(folder, f'{split}-*'))} for split, folder in (
        ('train', calibrated), ('calibration', calibrated), ('validation', calibrated))}
    before = {split: {p['name'].numpy().decode() for p in read_photos(os.path.join(out, f'{split}-*'))}
              for split in ('train', 'validation')}
    assert people['validation'] == before['validation']  # the test people do not change
    assert people['train'] | people['calibration'] == before['train']
    assert not people['train'] & people['calibration']
    assert len(people['calibration']) == round(0.25 * len(before['train']))
    pairs = lfw_files.read_pairs_file(os.path.join(calibrated, 'calibration_pairs.txt'))
    assert {p.name_a for p in pairs} | {p.name_b for p in pairs} <= people['calibration']
    assert entries['calibration_pairs']['num_records'] == len(pairs) > 0


def test_validation_pairs_in_folds(tmp_path):
    root = str(tmp_path / 'lfw')
    synthetic_faces.write_faces(root, num_people=12, min_photos=2, size=48, seed=4)
    out = str(tmp_path / 'out')
    entries = run_prepare(prepare_faces.prepare_faces,
        source_dir=root, output_dir=out, validation_fraction=0.5, num_pairs=6, pair_folds=3)
    assert open(os.path.join(out, 'validation_pairs.txt')).readline() == '3 2\n'
    assert entries['validation_pairs']['num_folds'] == 3
    folds = face_records.read_pair_labels(os.path.join(out, 'validation_pairs-*'))['fold']
    assert sorted(set(folds.tolist())) == [0, 1, 2] and len(folds) == 12
    with pytest.raises(UserError, match='--num_pairs=7 is not a multiple of --pair_folds=3'):
        run_prepare(prepare_faces.prepare_faces, source_dir=root, output_dir=out, num_pairs=7,
                                                  pair_folds=3)


def test_undecodable_photo_is_skipped_and_counted_or_fatal_when_strict(tmp_path):
    root = str(tmp_path / 'lfw')
    synthetic_faces.write_faces(root, num_people=6, min_photos=2, size=48, seed=1)
    bad = os.path.join(root, 'Synthetic_Person_0002', 'Synthetic_Person_0002_0001.jpg')
    open(bad, 'wb').write(b'not a jpeg')
    # A PNG named .jpg and a CMYK JPEG: training's decode_and_crop_jpeg reads neither (nor, for
    # grey, libjpeg a CMYK one), so they are stored as RGB JPEGs.
    png = os.path.join(root, 'Synthetic_Person_0003', 'Synthetic_Person_0003_0001.jpg')
    open(png, 'wb').write(tf.io.encode_png(np.full([48, 48, 1], 90, np.uint8)).numpy())
    cmyk = os.path.join(root, 'Synthetic_Person_0004', 'Synthetic_Person_0004_0001.jpg')
    open(cmyk, 'wb').write(cmyk_jpeg(48))
    entries = run_prepare(prepare_faces.prepare_faces,
        source_dir=root, output_dir=str(tmp_path / 'out'), validation_fraction=0.0, num_pairs=3)
    assert entries['train']['num_skipped_photos'] == 1 and entries['train']['num_skipped'] == 0
    assert entries['train']['skipped_files'] == {
        'Synthetic_Person_0002/Synthetic_Person_0002_0001.jpg':
            'not a decodable PNG, JPEG, GIF, BMP, WebP, TIFF, HEIC or AVIF photo'}
    stored = {p['filename'].numpy().decode(): p['image'].numpy()
              for p in read_photos(str(tmp_path / 'out' / 'train-*'))}
    cmyk_level = tf.io.decode_jpeg(cmyk_jpeg(48), channels=3).numpy().mean()  # flat grey
    for converted, level in ((png, 90), (cmyk, cmyk_level)):
        jpeg = stored[os.path.relpath(converted, root)]
        assert tf.io.extract_jpeg_shape(jpeg).numpy().tolist() == [48, 48, 3]
        grey = face_images.decode_face(jpeg, GEOMETRY).numpy()  # training's own decode
        assert np.abs(grey - level / 255).max() < 0.03
    with pytest.raises(UserError, match=r'Synthetic_Person_0002_0001.jpg: not a decodable PNG, '
                                        r'JPEG, .* photo \(Unknown image'):
        run_prepare(prepare_faces.prepare_faces,
            source_dir=root, output_dir=str(tmp_path / 'out2'), strict=True, num_pairs=3)


def test_your_own_folders_of_face_photos_any_naming_format_and_nesting(tmp_path):
    """A folder a person, as CASIA-WebFace, VGGFace2 or a phone's export name their photos, in
    every format a photo may come in: each stored as a JPEG training reads, a pair's photo
    numbers their place in name order, and a name with a space read back from the pair list."""
    rng = np.random.RandomState(0)
    layout = {'Jane Doe': ['IMG_0042.heic', '2023/beach.png', 'IMG_0050.avif'],
              '0000045': ['001.jpg', '002.webp', '003.tif'],
              'n000002': ['0001_01.jpg', '0002_01.bmp'],
              'Solo': ['me.gif']}
    writers = {'heic': heic_bytes, 'avif': avif_bytes, 'tif': tiff_bytes, 'bmp': bmp_bytes,
               'webp': lambda pixels: pillow_bytes(pixels, 'WEBP', lossless=True),
               'gif': lambda pixels: pillow_bytes(pixels, 'GIF'),
               'png': lambda pixels: encode(pixels, 'png'), 'jpg': lambda pixels: encode(pixels, 'jpg')}
    for person, photos in layout.items():
        face = synthetic_faces._identity(rng)
        for photo in photos:
            path = tmp_path / 'mine' / person / photo
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(writers[photo.rsplit('.', 1)[1]](
                synthetic_faces.render_face(face, rng, 40)))
    (tmp_path / 'mine' / 'Jane Doe' / 'notes.txt').write_text('not a photo')
    (tmp_path / 'mine' / 'README.txt').write_text('beside the folders')
    entries = run_prepare(prepare_faces.prepare_faces, source_dir=str(tmp_path / 'mine'),
                          output_dir=str(tmp_path / 'out'), validation_fraction=0.0, num_pairs=6)
    assert (entries['train']['num_people'], entries['train']['num_photos']) == (4, 9)
    assert 'skipped_files' not in entries['train']
    stored = {p['filename'].numpy().decode(): p['image'].numpy()
              for p in read_photos(str(tmp_path / 'out' / 'train-*'))}
    assert sorted(stored) == sorted(f'{person}/{photo}' for person, photos in layout.items()
                                    for photo in photos)
    for jpeg in stored.values():
        assert face_images.decode_face(jpeg, GEOMETRY).shape == (64, 64, 1)
    pairs = lfw_files.read_pairs_file(str(tmp_path / 'out' / 'train_pairs.txt'))
    assert 'Jane Doe' in {p.name_a for p in pairs} | {p.name_b for p in pairs}
    in_order = {person: sorted(photos) for person, photos in layout.items()}
    records = [tf.io.parse_single_example(r, face_records.PAIR_SPEC) for r in
               tf.data.TFRecordDataset(sorted(glob.glob(str(tmp_path / 'out' / 'train_pairs-*'))))]
    written = {(r['image_a'].numpy(), r['image_b'].numpy()) for r in records}
    assert written == {(stored[f'{p.name_a}/{in_order[p.name_a][p.number_a - 1]}'],
                        stored[f'{p.name_b}/{in_order[p.name_b][p.number_b - 1]}']) for p in pairs}


def test_photo_numbers_are_lfws_own_or_the_place_in_name_order():
    assert lfw_files.photo_numbers('Al_Bo', ['Al_Bo_0001.jpg', 'Al_Bo_0004.jpg']) == [1, 4]
    assert lfw_files.photo_numbers('Al_Bo', ['Al_Bo_0001.jpg', 'x.png', 'y.jpg']) == [1, 2, 3]
    assert lfw_files.photo_numbers('Cy', ['Al_Bo_0001.jpg']) == [1]  # another person's name


def test_a_folder_without_photo_folders_is_one_line(tmp_path):
    (tmp_path / 'empty' / 'Jane').mkdir(parents=True)
    (tmp_path / 'empty' / 'Jane' / 'notes.txt').write_text('no photos')
    with pytest.raises(UserError, match=r'empty: no folders of photos \(PNG, JPEG, .*\); put '
                                        r"each person's photos in a folder named after them"):
        run_prepare(prepare_faces.prepare_faces, source_dir=str(tmp_path / 'empty'),
                    output_dir=str(tmp_path / 'out'))


def test_people_file_splits_by_people(tmp_path):
    root = str(tmp_path / 'lfw')
    written = synthetic_faces.write_faces(root, num_people=5, size=48, seed=2)
    people_file = tmp_path / 'peopleDevTrain.txt'
    people_file.write_text('2\nSynthetic_Person_0000\t1\nSynthetic_Person_0003\t2\n')
    train, validation = prepare_faces.split_people(
        {n: p for n, p in written.items()}, str(people_file), 0.5, 0)
    assert train == ['Synthetic_Person_0000', 'Synthetic_Person_0003']
    assert validation == ['Synthetic_Person_0001', 'Synthetic_Person_0002', 'Synthetic_Person_0004']


def test_read_dev_pairs_file(tmp_path):
    path = tmp_path / 'pairsDevTest.txt'
    path.write_text('2\nAl\t1\t2\nBo\t3\t1\nAl\t1\tBo\t2\nCy\t4\tAl\t2\n')
    pairs = lfw_files.read_pairs_file(str(path))
    assert [p.same for p in pairs] == [True, True, False, False]
    assert pairs[1] == lfw_files.Pair('Bo', 3, 'Bo', 1, 0, 3)
    assert pairs[3].name_b == 'Al' and pairs[3].number_b == 2


def test_read_ten_fold_pairs_file(tmp_path):
    lines = ['10 1']
    for fold in range(10):
        lines += [f'P{fold}\t1\t2', f'P{fold}\t1\tQ{fold}\t1']
    path = tmp_path / 'pairs.txt'
    path.write_text('\n'.join(lines) + '\n')
    pairs = lfw_files.read_pairs_file(str(path))
    assert [p.fold for p in pairs] == [f for f in range(10) for _ in range(2)]
    assert [p.same for p in pairs[:2]] == [True, False]


@pytest.mark.parametrize('text, message', [
    ('2\nAl\t1\t2\nBo\t3\nAl\t1\tBo\t2\nCy\t4\tAl\t2\n', r'pairs.txt:3: expected a same-person pair'),
    ('2\nAl\t1\t2\nBo\t1\t2\nAl\t1\tBo\t2\n', r'header says 1 fold.*\(4 lines\), but 3 lines follow'),
    ('two\nAl\t1\t2\n', r'pairs.txt:1: expected a header'),
    ('1\nAl\t1\t2\nAl\tx\tBo\t2\n', r'pairs.txt:3: expected a different-person pair'),
])
def test_malformed_pairs_file(tmp_path, text, message):
    path = tmp_path / 'pairs.txt'
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        lfw_files.read_pairs_file(str(path))


def test_pair_naming_a_missing_photo_is_reported(faces, tmp_path):
    root = faces[0]
    path = tmp_path / 'pairsDevTest.txt'
    path.write_text('1\nSynthetic_Person_0001\t1\t99\n'
                    'Synthetic_Person_0001\t1\tSynthetic_Person_0005\t1\n')
    entries = run_prepare(prepare_faces.prepare_face_pairs,
        source_dir=root, pairs_file=str(path), output_dir=str(tmp_path / 'out'))
    entry = entries['pairsDevTest']
    assert entry['num_records'] == 1 and entry['num_skipped'] == 1
    assert entry['missing_pairs'] == ['Synthetic_Person_0001 1 Synthetic_Person_0001 99']
    with pytest.raises(UserError, match=r'pairsDevTest.txt:2: .*Synthetic_Person_0001_0099.jpg '
                                        'does not exist'):
        run_prepare(prepare_faces.prepare_face_pairs,
            source_dir=root, pairs_file=str(path), output_dir=str(tmp_path / 'o2'), strict=True)


@pytest.mark.parametrize('same_fraction', [0.5, 0.2])
def test_window_pairs_ratio_and_same_pairs_share_identity(same_fraction):
    # Photos stand in as their person's number, so a pair shows whose photos it drew.
    counts = [3, 1, 2, 1, 4, 1, 2, 1]
    photos = tf.RaggedTensor.from_row_lengths(
        [str(person).encode() for person, count in enumerate(counts) for _ in range(count)],
        counts)
    # A window this small gives MIN_WINDOW_PAIRS pairs, its people taken again in new orders.
    mix = face_sampler.PairMix(same_fraction)
    drawn = [face_sampler.draw_window_pairs(photos, mix, tf.constant([5, w], tf.int64),
                                            w * face_sampler.MIN_WINDOW_PAIRS) for w in range(12)]
    a, b, same, steps = (np.concatenate([d[i].numpy() for d in drawn]) for i in range(4))
    assert abs(same.mean() - same_fraction) < 0.03
    assert ((a == b) == (same == 1)).all()  # same-person pairs share a person; others never do
    assert {int(person) for person in a[same == 1]} == {0, 2, 4, 6}  # people with 2+ photos
    assert len(set(zip(a, b))) > 10 and len(set(steps)) == len(steps)


def test_self_pairs_draw_one_photo_people_against_their_own_photo():
    counts = [3, 1, 2, 1, 4, 1, 2, 1]
    photos = tf.RaggedTensor.from_row_lengths(
        [f'{person}/{k}'.encode() for person, count in enumerate(counts) for k in range(count)],
        counts)

    def same_pairs(self_pair_fraction):
        """a, b of the same-person pairs, which are of one-photo people, and the same share."""
        mix = face_sampler.PairMix(0.5, self_pair_fraction)
        drawn = [face_sampler.draw_window_pairs(photos, mix, tf.constant([5, w], tf.int64), 0)
                 for w in range(12)]
        a, b, same = (np.concatenate([d[i].numpy() for d in drawn]) for i in range(3))
        a, b = a[same == 1], b[same == 1]
        one_photo = np.array([counts[int(name.split(b'/')[0])] == 1 for name in a])
        return a, b, one_photo, same.mean()

    a, b, one_photo, same_share = same_pairs(1.0)
    assert (a[one_photo] == b[one_photo]).all() and (a[~one_photo] != b[~one_photo]).all()
    # Every person now takes their turn: the four one-photo people give half the same pairs.
    assert abs(one_photo.mean() - 0.5) < 0.05 and abs(same_share - 0.5) < 0.03
    a, _, one_photo, _ = same_pairs(0.5)  # a fresh half of them each window: all in turn, fewer
    assert {name.split(b'/')[0] for name in a[one_photo]} == {b'1', b'3', b'5', b'7'}
    assert 0.15 < one_photo.mean() < 0.45
    a, b, one_photo, _ = same_pairs(0.0)
    assert (a != b).all() and not one_photo.any()


def test_people_with_one_photo_each_train_on_self_pairs_only(tmp_path):
    root = str(tmp_path / 'lfw')
    for paths in synthetic_faces.write_faces(root, num_people=6, size=64, seed=3).values():
        for extra in paths[1:]:
            os.remove(extra)
    out = str(tmp_path / 'shards')
    run_prepare(prepare_faces.prepare_faces, source_dir=os.path.dirname(root), output_dir=out,
                validation_fraction=0.0, num_pairs=0)
    pattern = os.path.join(out, 'train-*')
    with pytest.raises(UserError, match=r'train-.*no one of its 6 people has 2 or more photos.*'
                                        r'--self_pair_fraction'):
        face_pairs.make_train_input_fn(pattern, GEOMETRY, batch_size=8)
    input_fn = face_pairs.make_train_input_fn(
        pattern, GEOMETRY, batch_size=8, mix=face_sampler.PairMix(0.5, 1.0), augment=True)
    labels = np.concatenate([labels.numpy() for _, labels in input_fn().take(10)])
    assert 0.3 < labels.mean() < 0.7  # half of them same-person: each photo against itself


def test_window_pairs_take_people_without_replacement():
    """In one window no person is in two same-person pairs while others wait their turn: the
    first `people` same-person pairs are all different people."""
    people = 512
    photos = tf.RaggedTensor.from_row_lengths(
        [f'{p}/{k}'.encode() for p in range(people) for k in range(2)], [2] * people)
    a, _, same, _ = face_sampler.draw_window_pairs(photos, face_sampler.PairMix(),
                                                   tf.constant([1, 2], tf.int64), 0)
    same_people = [name.split(b'/')[0] for name in a.numpy()[same.numpy() == 1]]
    assert len(same_people) > people and len(set(same_people[:people])) == people


def test_streamed_pairs_from_shards(faces):
    _, _, out, entries = faces
    files = sorted(glob.glob(os.path.join(out, 'train-*')))
    people = entries['train']['num_people']
    pairs = face_sampler.streamed_pairs(files, people, seed=3, mix=face_sampler.PairMix(0.5),
                                        photo_feature='filenames')
    drawn = list(pairs.take(1000).as_numpy_iterator())
    for a, b, same, _ in drawn:
        assert (a.split(b'/')[0] == b.split(b'/')[0]) == bool(same) and a != b
    assert abs(np.mean([same for *_, same, _ in drawn]) - 0.5) < 0.06
    assert len({name.split(b'/')[0] for a, b, *_ in drawn for name in (a, b)}) == people


def test_people_counted_from_the_manifest_or_the_records(faces, tmp_path):
    _, _, out, entries = faces
    expected = (entries['train']['num_people'], entries['train']['num_people_with_2_or_more'])
    files = sorted(glob.glob(os.path.join(out, 'train-*')))
    assert face_sampler.count_people(files) == expected
    for path in files:  # the same shards without a manifest
        tf.io.gfile.copy(path, str(tmp_path / os.path.basename(path)))
    assert face_sampler.count_people(sorted(glob.glob(str(tmp_path / 'train-*')))) == expected


@pytest.mark.parametrize('channels', [1, 3])
def test_serving_decodes_a_jpeg_as_training_and_evaluation_do(faces, channels):
    """The export's threshold was chosen on evaluation's pixels: serving's must be the same (a
    JPEG decoded to RGB and then made grey differs by up to 7/255)."""
    root, _, _, _ = faces
    geometry = face_images.FaceGeometry(image_size=64, channels=channels, crop_fraction=0.5)
    for path in sorted(glob.glob(os.path.join(root, '*', '*.jpg')))[:10]:
        jpeg = tf.constant(open(path, 'rb').read())
        np.testing.assert_array_equal(face_images.decode_any_face(jpeg, geometry),
                                      face_images.decode_face(jpeg, geometry))
    # A CMYK JPEG, which libjpeg cannot make grey, is still served (through RGB).
    assert face_images.decode_any_face(tf.constant(cmyk_jpeg(48)), geometry).shape == (
        64, 64, channels)


def test_training_input_fn_shapes_for_both_samplers(faces):
    _, _, out, _ = faces
    for sampler in ('graph', 'generator'):
        input_fn = face_pairs.make_train_input_fn(
            os.path.join(out, 'train-*'), GEOMETRY, batch_size=8, seed=1,
            pairs_dataset=input_kinds.get('face_pairs').pair_samplers[sampler])
        assert input_fn().options().autotune.enabled is False  # pipeline.without_autotuner
        features, labels = next(iter(input_fn()))
        assert features['image_a'].shape == (8, 64, 64, 1) == features['image_b'].shape
        assert features['image_a'].dtype == tf.float32 and labels.shape == (8,)
        assert 0.0 <= float(tf.reduce_min(features['image_a'])) <= float(
            tf.reduce_max(features['image_a'])) <= 1.0


def test_eval_pairs_one_pass_in_order(faces):
    _, _, out, _ = faces
    pattern = os.path.join(out, 'validation_pairs-*')
    input_fn = face_pairs.make_eval_input_fn(pattern, GEOMETRY, batch_size=16)
    assert input_fn().options().autotune.enabled is False
    labels = np.concatenate([label.numpy() for _, label in input_fn()])
    np.testing.assert_array_equal(labels, face_records.read_pair_labels(pattern)['label'])
    assert len(labels) == 40


@pytest.mark.parametrize('module', [face_diff, face_siamese, face_embedding])
def test_face_model_fns_in_all_modes(module):
    def spec_for(mode):
        with tf.Graph().as_default():
            features = {'image_a': tf.random.uniform([4, 64, 64, 1]),
                        'image_b': tf.random.uniform([4, 64, 64, 1])}
            labels = None if mode == 'infer' else tf.constant([1., 0., 1., 0.])
            return module.model_fn(features, labels, mode, dict(module.DEFAULT_PARAMS))
    train = spec_for(tf.estimator.ModeKeys.TRAIN)
    assert train.train_op is not None and train.loss.shape == ()
    evaluate = spec_for(tf.estimator.ModeKeys.EVAL)
    assert set(evaluate.eval_metric_ops) == {'accuracy', 'auc', 'precision', 'recall', 'pr_curve',
                                             'hardest_pairs'}
    predict = spec_for(tf.estimator.ModeKeys.PREDICT)
    assert predict.predictions['probability'].shape.as_list() == [4]
    if module is not face_diff:
        assert predict.predictions['embedding_a'].shape.as_list() == [4, 128]
        assert set(predict.export_outputs) == {'serving_default', 'embed'}


@pytest.mark.parametrize('module', [face_diff, face_siamese, face_embedding])
def test_face_model_fns_take_any_image_size_their_pooling_allows(module):
    def train_loss(side):
        with tf.Graph().as_default():
            features = {name: tf.random.uniform([4, side, side, 1]) for name in ('image_a', 'image_b')}
            return module.model_fn(features, tf.constant([1., 0., 1., 0.]),
                                   tf.estimator.ModeKeys.TRAIN, dict(module.DEFAULT_PARAMS)).loss
    assert train_loss(48).shape == ()  # not the model's own 64 or 96
    with pytest.raises(UserError, match=r'--face_image_size=8: 4 pooling blocks need photos of '
                                        r'at least 16 pixels; give --face_image_size=16 or more'):
        train_loss(8)


def test_tower_has_a_block_per_entry_of_tower_filters():
    params = {**face_siamese.DEFAULT_PARAMS, 'embedding_size': 16, 'dropout_rate': 0.0,
              'tower_filters': (4, 8, 8)}
    tower = face_siamese.build_tower(params)
    assert tower(tf.zeros([2, 32, 32, 1])).shape == (2, 16)
    assert [layer.filters for layer in tower.layers if isinstance(layer, tf.keras.layers.Conv2D)] == [4, 8, 8]
    flatten = next(layer for layer in tower.layers if isinstance(layer, tf.keras.layers.Flatten))
    assert flatten.output_shape == (2, 4 * 4 * 8)  # three 2x2 pools: 32 -> 4
    # Two convolutions in the last block: one more 3x3 conv of 8 filters, and still three pools.
    deeper = face_siamese.build_tower({**params, 'tower_convs_per_block': (1, 1, 2)})
    assert deeper(tf.zeros([2, 32, 32, 1])).shape == (2, 16)
    kernels = [layer.kernel.shape.as_list() for layer in deeper.layers
               if isinstance(layer, tf.keras.layers.Conv2D)]
    assert kernels[1:] == [[3, 3, 4, 8], [3, 3, 8, 8], [3, 3, 8, 8]]
    assert sum(isinstance(layer, tf.keras.layers.MaxPooling2D) for layer in deeper.layers) == 3
    with pytest.raises(UserError, match=r'tower_convs_per_block=\[1,2\] must give a whole number, '
                                        r'1 or more, for each of the 3 blocks of tower_filters'):
        face_siamese.build_tower({**params, 'tower_convs_per_block': (1, 2)})


def contrastive_loss(a, b, labels, same_side=False, smoothing=0.0):
    own_sides = (tf.matmul(a, a, transpose_b=True), tf.matmul(b, b, transpose_b=True))
    return float(face_embedding.batch_contrastive_loss(
        tf.matmul(a, b, transpose_b=True), labels, 10.0, smoothing,
        own_sides if same_side else None))


@pytest.mark.parametrize('same_side', [False, True])
def test_batch_contrastive_loss_rewards_finding_the_partner(same_side):
    rng = np.random.RandomState(0)
    a = tf.math.l2_normalize(rng.randn(6, 16).astype(np.float32), axis=1)
    noise = tf.math.l2_normalize(rng.randn(6, 16).astype(np.float32), axis=1)
    same = tf.ones([6])
    # A photo is not its own negative: a perfect match scores near 0 either way.
    matched, unmatched = (contrastive_loss(a, b, same, same_side) for b in (a, noise))
    assert matched < 0.1 < unmatched
    # Different-person rows are no anchors: their loss does not count.
    assert contrastive_loss(a, noise, tf.zeros([6]), same_side) == 0.0


def test_same_side_negatives_count_photos_of_the_own_side():
    # a_0 and a_1 point the same way: only a softmax that also holds a_1 is hurt by it.
    a = tf.constant([[1.0, 0.0], [1.0, 0.0]])
    b = tf.constant([[1.0, 0.0], [0.0, 1.0]])
    first_only = tf.constant([1.0, 0.0])
    assert contrastive_loss(a, b, first_only, True) > contrastive_loss(a, b, first_only) + 0.3
    # A photo is left out of its own softmax, not given a logit of minus infinity that label
    # smoothing would then put weight on.
    assert contrastive_loss(b, b, first_only, True, smoothing=0.1) < 2.0


def test_calibration_loss_weighs_same_and_different_pairs_equally():
    cosines = tf.eye(4) * 2 - 1  # diagonal 1 (same), the rest -1
    labels = tf.ones([4])
    right = face_embedding.balanced_calibration_loss(cosines, labels, lambda c: 10 * c)
    wrong_same = face_embedding.balanced_calibration_loss(cosines, labels, lambda c: 10 * c - 20)
    # Every same pair wrong (12 different pairs right) costs as much as the 4 same pairs weigh.
    assert float(right) < 1e-3 and abs(float(wrong_same) - 10.0 / 2) < 0.01


def test_threshold_and_auc():
    scores = np.array([0.1, 0.2, 0.3, 0.6, 0.7, 0.9])
    labels = np.array([0, 0, 0, 1, 1, 1])
    threshold = pair_protocol.best_threshold(scores, labels)
    assert 0.3 < threshold <= 0.6
    assert pair_protocol.accuracy_at(scores, labels, threshold) == 1.0
    assert pair_protocol.roc_auc(scores, labels) == 1.0
    rng = np.random.RandomState(0)
    scores, labels = rng.rand(200), rng.rand(200) < 0.5
    brute = np.mean([(p > n) + 0.5 * (p == n) for p in scores[labels] for n in scores[~labels]])
    assert abs(pair_protocol.roc_auc(scores, labels) - brute) < 1e-12


def test_ten_fold_thresholds_come_from_the_other_folds():
    # Fold 0 alone is separable at 0.85; the other nine at 0.45. A fold's own pairs
    # must not set its threshold, so fold 0 is scored at ~0.45 and gets half wrong.
    folds = np.repeat(np.arange(10), 4)
    labels = np.tile([1, 1, 0, 0], 10)
    scores = np.tile([0.6, 0.7, 0.2, 0.3], 10).astype(float)
    scores[:4] = [0.95, 0.9, 0.8, 0.7]
    report = pair_protocol.evaluate(scores, labels, folds)
    assert report['fold_accuracies'][0] == 0.5
    assert report['fold_accuracies'][1:] == [1.0] * 9
    assert abs(report['accuracy_mean'] - 0.95) < 1e-9


@pytest.mark.slow  # trains, exports and predicts as CLI processes: ./run.sh test-slow
def test_export_and_predict_two_photos(faces, tmp_path):
    root, written, out, _ = faces
    model_dir, export_dir = str(tmp_path / 'model'), str(tmp_path / 'export')
    run_module('trainer.main', '--model=face_siamese', '--mode=train', f'--model_dir={model_dir}',
               f'--train_files={out}/train-*', '--train_steps=2', '--batch_size=4',
               '--face_image_size=48')  # evaluate and export read it from flags.txt
    evaluated = json.loads(run_module(
        'trainer.main', '--model=face_siamese', '--mode=evaluate', f'--model_dir={model_dir}',
        f'--eval_files={out}/validation_pairs-*', f'--threshold_files={out}/train_pairs-*').stdout)
    assert set(evaluated['lfw_protocol']) >= {'accuracy', 'auc', 'threshold'}
    saved_model = json.loads(run_module(
        'trainer.main', '--model=face_siamese', '--mode=export', f'--model_dir={model_dir}',
        f'--export_dir={export_dir}').stdout)['saved_model']
    loaded = tf.saved_model.load(saved_model)
    assert set(loaded.signatures) == {'serving_default', 'embed'}
    photos = sorted(p for paths in written.values() for p in paths)[:2]
    result = run_module('trainer.main', '--mode=predict', f'--saved_model={saved_model}', *photos)
    row = json.loads(result.stdout)
    assert row['image_a'] == photos[0] and row['image_b'] == photos[1]
    assert 0.0 <= row['probability'] <= 1.0
    embedding = loaded.signatures['embed'](image_bytes=tf.constant([open(photos[0], 'rb').read()]))
    assert embedding['embedding'].shape == (1, 128)


@pytest.mark.parametrize('zoom_views', [(), (1.2,)])
def test_embedding_views_are_centred_and_mirror_averaged(zoom_views):
    """Evaluation embeds each photo as the mean of its views (zoomed on the centre, mirrored):
    a photo and its mirror image then embed alike; without mirroring they do not."""
    photo = np.random.RandomState(0).rand(1, 64, 64, 1).astype(np.float32)
    pictures = np.concatenate([photo, photo[:, :, ::-1]])

    def embeddings(flip_average):
        with tf.Graph().as_default():
            tf.compat.v1.set_random_seed(1)
            images = tf.constant(pictures)
            spec = face_embedding.model_fn(
                {'image_a': images, 'image_b': images}, None, tf.estimator.ModeKeys.PREDICT,
                {**face_embedding.DEFAULT_PARAMS, 'zoom_views': zoom_views,
                 'flip_average': flip_average})
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                return session.run(spec.predictions['embedding_a'])

    mirrored = embeddings(flip_average=True)
    np.testing.assert_allclose(mirrored[0], mirrored[1], atol=1e-5)
    plain = embeddings(flip_average=False)
    assert np.abs(plain[0] - plain[1]).max() > 1e-3
