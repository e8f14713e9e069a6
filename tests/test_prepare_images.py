"""prepare images: class folders -> image shards with the schema, the split by path, the fitting of
each resize mode, and the one-line errors (nothing written)."""
import glob
import json
import os
import re

import numpy as np
import pytest
import scipy.optimize
import tensorflow as tf

from common.errors import UserError
from helpers import assert_one_line_error, run_module, run_prepare
from image_tree import (TINY_GIF, TINY_WEBP, avif_bytes, bmp_bytes, class_image, encode, heic_bytes,
                        tiff_bytes, tiny_webp_pixels, with_orientation, write_image_tree)
from input_fns.images import converted_images, image_records, prepare_images
from input_fns.records import split


def prepare(source, output, **overrides):
    values = dict(source_dir=str(source), output_dir=str(output), image_size='16x24',
                  channels='3', resize='pad', validation_fraction=0.25, skip_bad_images=False,
                  decode_workers=1, num_shards=2)
    values.update(overrides)
    return run_prepare(prepare_images.prepare_images, **values)


def split_pixels(output, split_name, shape):
    """The (pixel bytes, label) of every record of a split, sorted."""
    records = tf.data.TFRecordDataset(sorted(glob.glob(f'{output}/{split_name}-*.tfrecord')))
    parse = image_records.parse_batch_fn(shape)
    found = []
    for batch in records.batch(1000):
        features, labels = parse(batch)
        pixels = np.round(features['image'].numpy() * 255).astype(np.uint8)
        found += [(image.tobytes(), int(label)) for image, label in zip(pixels, labels.numpy())]
    return sorted(found)


def test_class_folders_become_shards_with_the_schema_and_the_split_by_path(tmp_path, capsys):
    written = write_image_tree(tmp_path / 'photos', per_class=12)
    (tmp_path / 'photos' / 'dog' / 'notes.txt').write_text('not an image')
    (tmp_path / 'photos' / 'fox' / 'more' / 'tiny.gif').write_bytes(TINY_GIF)
    entries = prepare(tmp_path / 'photos', tmp_path / 'out', decode_workers=2)
    manifest = json.loads((tmp_path / 'out' / 'manifest.json').read_text())
    schema = manifest['schema']
    assert schema['kind'] == 'images' and schema['classes'] == ['cat', 'dog', 'fox']
    assert schema['image_shape'] == [16, 24, 3] and schema['resize'] == 'pad'
    assert schema['not_images'] == {'.txt': 1} and schema['not_image_files'] == ['dog/notes.txt']
    relative = written + ['fox/more/tiny.gif']
    held_out = {path for path in relative if split.is_validation(path.encode(), 0.25)}
    expected = {name: {cls: sum(path.startswith(cls + '/') and ((path in held_out) == (name == 'validation'))
                                for path in relative) for cls in schema['classes']}
                for name in ('train', 'validation')}
    assert schema['class_counts'] == expected
    assert {name: entry['num_records'] for name, entry in entries.items()} == {
        name: sum(counts.values()) for name, counts in expected.items()}
    assert manifest['splits']['train']['image_shape'] == [16, 24, 3]
    pixels = split_pixels(tmp_path / 'out', 'train', [16, 24, 3])
    assert sorted({label for _, label in pixels}) == [0, 1, 2]
    out = capsys.readouterr().out
    assert 'images/s' in out and 'skipped 1 files that are not images (.txt 1;' in out
    assert re.search(rf'^fox +{expected["train"]["fox"]} +{expected["validation"]["fox"]}$', out, re.M)


def test_a_held_out_tree_keeps_the_training_classes_labels_with_schema_from(tmp_path):
    """Prepared on their own, dog and fox would be labels 0 and 1; with --schema_from they keep
    training's 1 and 2, fitted to training's shape, as the split test beside training's."""
    write_image_tree(tmp_path / 'photos', per_class=4)
    data = tmp_path / 'data'
    prepare(tmp_path / 'photos', data)
    schema = json.load(open(data / 'manifest.json'))['schema']
    write_image_tree(tmp_path / 'held_out', per_class=3, classes=('dog', 'fox'), seed=1)
    entries = prepare(tmp_path / 'held_out', data, schema_from=str(data), split='test',
                      image_size='8x8', resize='stretch')
    assert list(entries) == ['test'] and entries['test']['num_records'] == 6
    assert sorted(label for _, label in split_pixels(data, 'test', (16, 24, 3))) == [1, 1, 1, 2, 2, 2]
    manifest = json.load(open(data / 'manifest.json'))
    assert manifest['schema'] == schema and sorted(manifest['splits']) == [
        'test', 'train', 'validation']
    write_image_tree(tmp_path / 'owls', per_class=2, classes=('dog', 'owl'))
    with pytest.raises(UserError, match=r'owls/owl: a class the training data does not have '
                                        r'\(its classes: cat, dog, fox\); remove or rename'):
        prepare(tmp_path / 'owls', tmp_path / 'owl_data', schema_from=str(data), split='test')


def test_a_phone_photo_stored_sideways_is_prepared_upright(tmp_path):
    """A portrait JPEG as a phone writes it (pixels sideways, EXIF orientation 6) gives the
    record of the same photo stored upright."""
    for tree, turned in (('phone', True), ('upright', False)):
        for label, name in enumerate(('cat', 'dog')):
            os.makedirs(tmp_path / tree / name)
            portrait = class_image(label, 40, 24, np.random.RandomState(label))
            jpeg = encode(np.rot90(portrait, 1).copy(), 'jpg')  # as the phone's sensor saw it
            path = tmp_path / tree / name / ('1.jpg' if turned else '1.png')
            path.write_bytes(with_orientation(jpeg, 6) if turned else encode(
                np.rot90(tf.io.decode_jpeg(jpeg).numpy(), -1).copy(), 'png'))
        prepare(tmp_path / tree, tmp_path / f'{tree}_data', validation_fraction=0.0)
    assert (split_pixels(tmp_path / 'phone_data', 'train', [16, 24, 3])
            == split_pixels(tmp_path / 'upright_data', 'train', [16, 24, 3]))


def test_adding_photos_moves_none_of_the_old_ones(tmp_path):
    write_image_tree(tmp_path / 'photos', per_class=10)
    prepare(tmp_path / 'photos', tmp_path / 'before')
    write_image_tree(tmp_path / 'photos', per_class=6, seed=1, first=10)
    prepare(tmp_path / 'photos', tmp_path / 'after')
    for name in ('train', 'validation'):
        before = set(split_pixels(tmp_path / 'before', name, [16, 24, 3]))
        after = set(split_pixels(tmp_path / 'after', name, [16, 24, 3]))
        assert before < after


def fitted(pixels, shape, resize):
    return image_records.fit_image(tf.constant(pixels), shape, resize).numpy()


def test_pad_crop_and_stretch_fit_a_wide_image():
    wide = np.full([10, 40, 1], 200, np.uint8)
    wide[:, :10] = 50  # the left quarter darker
    padded = fitted(wide, [20, 20, 1], 'pad')  # scaled to 5x20, centred: black above and below
    assert (padded[:7] == 0).all() and (padded[-8:] == 0).all() and (padded[8:12, 10:] == 200).all()
    assert (padded[8:12, :4] == 50).all()
    cropped = fitted(wide, [20, 20, 1], 'crop')  # scaled to 20x80, the centre 20 columns kept
    assert (cropped == 200).all()
    stretched = fitted(wide, [20, 20, 1], 'stretch')
    assert (stretched[:, :4] == 50).all() and (stretched[:, 6:] == 200).all()


def test_bmp_and_gif_decode_as_the_other_formats(tmp_path):
    pixels = np.random.RandomState(0).randint(0, 255, [7, 5, 3]).astype(np.uint8)
    decoded = image_records.decode_any_image(bmp_bytes(pixels), 3).numpy()
    assert (decoded == pixels).all()
    assert image_records.decode_any_image(TINY_GIF, 1).numpy().shape == (1, 1, 1)


def test_a_webp_tiff_or_heic_photo_is_prepared_as_the_same_photo_in_png(tmp_path):
    for name, encoded in (('webp', TINY_WEBP), ('tiff', tiff_bytes(tiny_webp_pixels())),
                          ('heic', heic_bytes(tiny_webp_pixels())),
                          ('png', encode(tiny_webp_pixels(), 'png'))):
        write_image_tree(tmp_path / name, per_class=2)
        (tmp_path / name / 'cat' / f'web.{name}').write_bytes(encoded)
        # Two workers: the WebP is read in a worker process, which loads Pillow itself.
        prepare(tmp_path / name, tmp_path / f'{name}_out', validation_fraction=0.0,
                decode_workers=2)
    png = split_pixels(tmp_path / 'png_out', 'train', [16, 24, 3])
    assert split_pixels(tmp_path / 'webp_out', 'train', [16, 24, 3]) == png
    assert split_pixels(tmp_path / 'tiff_out', 'train', [16, 24, 3]) == png
    assert split_pixels(tmp_path / 'heic_out', 'train', [16, 24, 3]) == png


def test_a_phones_heic_and_an_avif_are_read_by_their_brands():
    pixels = np.kron(tiny_webp_pixels(), np.ones([4, 4, 1], np.uint8))  # smooth: lossy keeps it
    lossy = heic_bytes(pixels, lossless=False)  # as an iPhone writes it: HEVC 4:2:0, 'heic'
    assert lossy[8:12] == b'heic' and converted_images.format_of(lossy) == 'heic'
    decoded = tf.io.decode_png(converted_images.decodable(lossy)).numpy()
    assert decoded.shape == pixels.shape and np.abs(decoded - pixels.astype(int)).mean() < 3
    grey = heic_bytes(np.repeat(pixels[..., :1], 3, -1))
    assert tf.io.decode_png(converted_images.decodable(grey)).numpy().shape == pixels.shape

    def ftyp(major, *compatible):
        brands = major + b'\0\0\0\0' + b''.join(compatible)
        return (8 + len(brands)).to_bytes(4, 'big') + b'ftyp' + brands + b'\0' * 16
    assert converted_images.format_of(ftyp(b'mif1', b'mif1', b'heic')) == 'heic'
    # AVIF is HEIF too, but AV1 inside: Pillow's libavif reads it, as libheif here cannot.
    for avif in (ftyp(b'avif', b'avif', b'mif1'), ftyp(b'mif1', b'mif1', b'avif')):
        assert converted_images.format_of(avif) == 'avif'
    assert converted_images.format_of(ftyp(b'isom', b'mp41')) is None  # an MP4
    avif = avif_bytes(pixels)
    decoded = tf.io.decode_png(converted_images.decodable(avif)).numpy()
    assert decoded.shape == pixels.shape and np.abs(decoded - pixels.astype(int)).max() <= 4
    grey = avif_bytes(np.repeat(pixels[..., :1], 3, -1))
    assert tf.io.decode_png(converted_images.decodable(grey)).numpy().shape[:2] == pixels.shape[:2]


def test_greyscale_and_skipped_bad_images_are_counted(tmp_path):
    write_image_tree(tmp_path / 'photos', per_class=6)
    (tmp_path / 'photos' / 'cat' / 'broken.jpg').write_bytes(b'\xff\xd8 not really a jpeg')
    prepare(tmp_path / 'photos', tmp_path / 'out', channels='1', skip_bad_images=True,
            validation_fraction=0.0)
    schema = json.loads((tmp_path / 'out' / 'manifest.json').read_text())['schema']
    assert schema['image_shape'] == [16, 24, 1] and list(schema['bad_images']) == ['cat/broken.jpg']
    assert schema['class_counts'] == {'train': {'cat': 6, 'dog': 6, 'fox': 6}}
    assert not glob.glob(str(tmp_path / 'out' / 'validation-*'))


@pytest.mark.parametrize('layout, message', [
    ({}, 'no class folders'),
    ({'cat/1.png': 'png'}, 'one class folder (cat); a classifier needs two or more'),
    ({'cat/1.png': 'png', 'dog/readme.txt': 'text'}, '/dog: no images in this class folder'),
    ({'cat/1.png': 'png', 'dog/2.bmp': 'bmp', 'dog/3.png': 'garbage'},
     '/dog/3.png: not a decodable PNG, JPEG, GIF, BMP, WebP, TIFF, HEIC or AVIF image'),
    ({'train/cat/1.png': 'png', 'test/cat/2.png': 'png'},
     'photos: its folders (test, train) are splits, not classes; give the training split\'s folder '
     'of class folders (--source_dir=ROOT/train)'),
    ({'cat/1.png': 'png', 'dog/2.webp': 'cut_webp'},
     '/dog/2.webp: not a decodable PNG, JPEG, GIF, BMP, WebP, TIFF, HEIC or AVIF image (WebP: '),
    ({'cat/1.png': 'png', 'dog/2.heic': 'cut_heic'},
     '/dog/2.heic: not a decodable PNG, JPEG, GIF, BMP, WebP, TIFF, HEIC or AVIF image (HEIC: '),
    ({'cat/1.png': 'png', 'dog/2.avif': 'cut_avif'},
     '/dog/2.avif: not a decodable PNG, JPEG, GIF, BMP, WebP, TIFF, HEIC or AVIF image (AVIF: '),
])
def test_bad_trees_are_refused_before_anything_is_written(tmp_path, layout, message):
    contents = {'png': tf.io.encode_png(np.zeros([4, 4, 3], np.uint8)).numpy(),
                'bmp': bmp_bytes(np.zeros([4, 4, 3], np.uint8)), 'text': b'hello',
                'garbage': b'\x89PNG but not', 'cut_webp': TINY_WEBP[:30],
                'cut_heic': heic_bytes(tiny_webp_pixels())[:200],
                'cut_avif': avif_bytes(tiny_webp_pixels())[:200]}
    (tmp_path / 'photos').mkdir()
    for relative, kind in layout.items():
        (tmp_path / 'photos' / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / 'photos' / relative).write_bytes(contents[kind])
    (tmp_path / 'out').mkdir()
    with pytest.raises(UserError, match=re.escape(message.replace('ROOT', f'{tmp_path}/photos'))):
        prepare(tmp_path / 'photos', tmp_path / 'out')
    assert not os.listdir(tmp_path / 'out')


def test_command_line_errors_are_one_line(tmp_path):
    write_image_tree(tmp_path / 'photos', per_class=2)
    (tmp_path / 'photos' / 'fox' / 'bad.png').write_bytes(b'nope')
    # A bad flag value, here (the command below shows how a UserError reaches the user).
    with pytest.raises(UserError, match='--image_size=64: give HEIGHTxWIDTH'):
        prepare(tmp_path / 'photos', tmp_path / 'out', image_size='64')
    common = ['images', f'--source_dir={tmp_path}/photos', f'--output_dir={tmp_path}/out']
    result = run_module('input_fns.prepare', *common, check=False)
    assert_one_line_error(result, 2, f'{tmp_path}/photos/fox/bad.png: not a decodable',
                          '--skip_bad_images')
    assert os.listdir(tmp_path / 'out') == []


def test_a_bucket_tree_prepared_into_a_bucket(s3_bucket, tmp_path):
    from common import file_trees, files
    write_image_tree(tmp_path / 'photos', per_class=4)
    file_trees.copy_tree(str(tmp_path / 'photos'), f'{s3_bucket}/photos')
    result = run_module('input_fns.prepare', 'images', f'--source_dir={s3_bucket}/photos',
                        f'--output_dir={s3_bucket}/data', '--image_size=8x8', '--decode_workers=2',
                        '--validation_fraction=0')
    assert result.stdout.splitlines()[-1] == f'wrote train: 12 records to {s3_bucket}/data'
    schema = files.read_json(f'{s3_bucket}/data/manifest.json')['schema']
    assert schema['classes'] == ['cat', 'dog', 'fox']
    assert schema['class_counts'] == {'train': {'cat': 4, 'dog': 4, 'fox': 4}}


def shard_bytes(output):
    return {os.path.basename(path): open(path, 'rb').read()
            for path in sorted(glob.glob(f'{output}/*.tfrecord'))}


def test_small_chunks_and_a_small_shuffle_budget_write_the_same_shards(tmp_path, monkeypatch):
    """The default (chunks of 16 in two workers, every record held in memory) and chunks of 3 in
    this process through the shuffle's buckets on disk write byte-identical shards."""
    from input_fns.records import record_shuffle
    write_image_tree(tmp_path / 'photos', per_class=10)
    prepare(tmp_path / 'photos', tmp_path / 'default', decode_workers=2)
    spills = []
    real_spill = record_shuffle.RecordShuffler._spill
    monkeypatch.setattr(record_shuffle.RecordShuffler, '_spill',
                        lambda self: spills.append(self) or real_spill(self))
    monkeypatch.setattr(prepare_images, 'CHUNK_SIZE', 3)
    monkeypatch.setattr(record_shuffle, 'MEMORY_BYTES', 4096)  # a few records: the rest spill
    prepare(tmp_path / 'photos', tmp_path / 'lowered', decode_workers=1)
    assert len(spills) == 2  # train and validation both went through buckets
    default = shard_bytes(tmp_path / 'default')
    assert len(default) == 4 and shard_bytes(tmp_path / 'lowered') == default
    assert sorted(os.listdir(tmp_path / 'lowered')) == sorted([*default, 'manifest.json'])


def test_the_workers_get_a_chunk_at_a_time_and_each_is_written_before_the_next(tmp_path,
                                                                              monkeypatch):
    """What the parent hands the two workers: chunks of CHUNK_SIZE photos, at most two a worker
    ahead of what it has written; every record of a chunk is in its split's writer before the
    next chunk comes."""
    from input_fns.records import stream_shards
    write_image_tree(tmp_path / 'photos', per_class=7)  # 21 photos: 5 chunks of 4, then 1
    monkeypatch.setattr(prepare_images, 'CHUNK_SIZE', 4)
    written, chunks, drawn = [0], [], [0]
    real_write = stream_shards.SplitWriter.write
    monkeypatch.setattr(stream_shards.SplitWriter, 'write',
                        lambda self, record: written.__setitem__(0, written[0] + 1)
                        or real_write(self, record))
    real_chunks = prepare_images.record_chunks

    def counted(items):
        for item in items:
            drawn[0] += 1
            yield item

    def watched(items, num_workers):
        for records, statuses in real_chunks(counted(items), num_workers):
            assert written[0] == sum(chunks)  # the chunks before, all written
            assert drawn[0] - sum(chunks) <= 2 * num_workers * 4
            chunks.append(len(statuses))
            yield records, statuses

    monkeypatch.setattr(prepare_images, 'record_chunks', watched)
    entries = prepare(tmp_path / 'photos', tmp_path / 'out', decode_workers=2)
    assert chunks == [4, 4, 4, 4, 4, 1] and written[0] == 21
    assert sum(entry['num_records'] for entry in entries.values()) == 21


def test_a_bad_photo_after_the_records_spilled_leaves_the_output_as_it_was(tmp_path, monkeypatch):
    from input_fns.records import record_shuffle
    write_image_tree(tmp_path / 'photos', per_class=6)
    (tmp_path / 'photos' / 'fox' / 'z_broken.png').write_bytes(b'\x89PNG but not')
    monkeypatch.setattr(record_shuffle, 'MEMORY_BYTES', 2048)
    (tmp_path / 'out').mkdir()
    with pytest.raises(UserError, match='fox/z_broken.png: not a decodable'):
        prepare(tmp_path / 'photos', tmp_path / 'out', decode_workers=1)
    assert os.listdir(tmp_path / 'out') == []  # no shard, no bucket folder, no manifest


def read_split(pattern, shape):
    """Every (uint8 image, label) of the shards, through the training input_fn's parse."""
    input_fn = image_records.make_input_fn(pattern, shape, 64, training=False)
    found = []
    for features, labels in input_fn():
        pixels = np.round(features['image'].numpy() * 255).astype(np.uint8)
        found += list(zip(pixels, labels.numpy().tolist()))
    return found


def test_the_stored_forms_round_trip_and_the_manifest_says_which(tmp_path):
    """Pixels: exactly the fitted photos; JPEG: each within JPEG's error of its fitted photo.
    The schema and the split say the form; a pattern over both forms reads both."""
    written = write_image_tree(tmp_path / 'photos', per_class=5)
    shape = [16, 24, 3]
    for stored_as in ('pixels', 'jpeg'):
        prepare(tmp_path / 'photos', tmp_path / stored_as, validation_fraction=0.0,
                stored_as=stored_as)
        manifest = json.loads((tmp_path / stored_as / 'manifest.json').read_text())
        assert manifest['schema']['stored_as'] == stored_as
        assert manifest['splits']['train']['stored_as'] == stored_as
    fitted = sorted(
        (prepare_images.fit_encoded(open(tmp_path / 'photos' / path, 'rb').read(), shape,
                                    'pad').numpy().tobytes(), path.split('/')[0])
        for path in written)
    pixels = read_split(str(tmp_path / 'pixels' / 'train-*'), shape)
    assert sorted(image.tobytes() for image, _ in pixels) == [image for image, _ in fitted]
    first = next(iter(tf.data.TFRecordDataset(glob.glob(f'{tmp_path}/pixels/train-*'))))
    assert 'stored_as' not in tf.train.Example.FromString(first.numpy()).features.feature  # as before
    jpegs = read_split(str(tmp_path / 'jpeg' / 'train-*'), shape)
    originals = np.stack([image for image, _ in pixels]).astype(int)
    # Each JPEG paired with a photo of its class, one to one, the pairs closest in all:
    errors = np.abs(originals[None] - np.stack([image for image, _ in jpegs])[:, None].astype(int))
    errors = errors.mean(axis=(2, 3, 4)) + 1000 * (np.array([label for _, label in jpegs])[:, None]
                                                  != np.array([label for _, label in pixels]))
    rows, columns = scipy.optimize.linear_sum_assignment(errors)
    # Within JPEG's error on noise (its worst case: 1.3 to 3.4 here), where two photos of a
    # class differ by more (5 to 14).
    assert errors[rows, columns].max() < 4 < np.median(errors[errors < 1000])
    both = read_split(f'{tmp_path}/pixels/train-*,{tmp_path}/jpeg/train-*', shape)
    assert len(both) == len(written) * 2
    jpeg_bytes = json.loads((tmp_path / 'jpeg' / 'manifest.json').read_text())
    assert jpeg_bytes['splits']['train']['features']['stored_as'].startswith("bytes: 'jpeg'")


def test_jpeg_shards_of_another_size_or_an_unknown_form_are_refused_naming_the_file(tmp_path):
    write_image_tree(tmp_path / 'photos', per_class=2)
    prepare(tmp_path / 'photos', tmp_path / 'jpeg', validation_fraction=0.0, stored_as='jpeg')
    with pytest.raises(UserError, match=r'train-00000-of-00002.tfrecord: images are 16x24 JPEGs, '
                                        r'but the model expects 8x8x3; use shards prepared'):
        image_records.make_input_fn(str(tmp_path / 'jpeg' / 'train-*'), [8, 8, 3], 4, True)
    with tf.io.TFRecordWriter(str(tmp_path / 'future.tfrecord')) as writer:
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            'image': tf.train.Feature(bytes_list=tf.train.BytesList(value=[b'...'])),
            'stored_as': tf.train.Feature(bytes_list=tf.train.BytesList(value=[b'png'])),
            'label': tf.train.Feature(int64_list=tf.train.Int64List(value=[0]))}))
                     .SerializeToString())
    with pytest.raises(UserError, match=r"future.tfrecord: images stored as 'png', which this "
                                        r'version cannot read \(it reads pixels and jpeg\)'):
        image_records.make_input_fn(str(tmp_path / 'future.tfrecord'), [8, 8, 3], 4, True)
