"""prepare images --labels_file: photos in one folder with a CSV naming each one's class (as many
downloaded data sets come) prepare as the same photos in class folders do."""
import json
import os
import shutil

import pytest

from common.errors import UserError
from image_tree import write_image_tree
from test_prepare_images import prepare, split_pixels


def flatten(tmp_path, written):
    """The class folders' photos in one folder, renamed by number, and labels.csv's rows naming
    each (with its extension, with Windows' backslash, or as an id: its name without the
    extension, as Kaggle's ids are) and its class."""
    flat = tmp_path / 'flat'
    (flat / 'train').mkdir(parents=True)
    rows = []
    for number, relative in enumerate(written):
        extension = os.path.splitext(relative)[1]
        shutil.copy(tmp_path / 'photos' / relative, flat / 'train' / f'{number:04d}{extension}')
        name = (f'./train/{number:04d}{extension}', f'train\\{number:04d}', f'train/{number:04d}')[
            number % 3]  # with its extension, as written on Windows, or as an id
        rows.append(f'{name},{relative.split("/")[0]},{number % 5}\n')
    return flat, rows


def test_photos_named_in_a_labels_file_prepare_as_the_same_photos_in_class_folders(tmp_path,
                                                                                   capsys):
    written = write_image_tree(tmp_path / 'photos', per_class=8)
    prepare(tmp_path / 'photos', tmp_path / 'folders')
    flat, rows = flatten(tmp_path, written)
    (flat / 'train' / 'unlabelled.png').write_bytes((flat / 'train' / '0000.png').read_bytes())
    labels = flat / 'labels.csv'
    labels.write_text('id,breed,fold\n' + ''.join(rows))
    prepare(flat, tmp_path / 'labelled', labels_file=str(labels), label='breed')
    schemas = [json.load(open(tmp_path / name / 'manifest.json'))['schema']
               for name in ('folders', 'labelled')]
    assert schemas[1]['classes'] == schemas[0]['classes'] == ['cat', 'dog', 'fox']
    assert schemas[1]['labels_file'] == str(labels)
    assert schemas[1]['not_image_files'] == ['labels.csv', 'train/unlabelled.png']
    assert 'skipped 2 files that labels.csv does not name (.csv 1, .png 1;' in capsys.readouterr().out
    both = [sorted(split_pixels(tmp_path / name, 'train', [16, 24, 3]) +
                   split_pixels(tmp_path / name, 'validation', [16, 24, 3]))
            for name in ('folders', 'labelled')]
    assert both[0] == both[1] and len(both[0]) == 24
    # A held-out set's labels file keeps the training classes' labels (--schema_from).
    labels.write_text('id,breed,fold\n' + ''.join(row for row in rows if ',fox,' in row))
    prepare(flat, tmp_path / 'labelled', labels_file=str(labels), label='breed', split='test',
            schema_from=str(tmp_path / 'labelled'))
    assert {label for _, label in split_pixels(tmp_path / 'labelled', 'test', [16, 24, 3])} == {2}


@pytest.mark.parametrize('text, label, message', [
    ('file,class\ntrain/0000,cat\ntrain/0009,dog\n', None,
     "labels.csv line 3: no image 'train/0009' under FLAT (its path below that folder"),
    ('file,class\ntrain/0000.png,cat\ntrain/0000,dog\n', None,
     'labels.csv lines 2 and 3 both name train/0000.png; keep one'),
    ('file,class\ntrain/0000,cat\ntrain/0001,\n', None, 'labels.csv line 3: train/0001.jpg has no '
     'label'),
    ('file,class,fold\ntrain/0000,cat,1\n', None, 'labels.csv: 3 columns (file, class, fold); '
     'give the file\'s path first and the class second, or pass --label'),
    ('file,class\ntrain/0000,cat\n', 'breed', '--label=breed: FLAT/labels.csv has no such column'),
    ('file,class\ntrain/0000,cat\ntrain/0001,cat\n', None, 'labels.csv: 1 class; a classifier '
     'needs two or more'),
])
def test_a_bad_labels_file_is_one_line_naming_the_row(tmp_path, text, label, message):
    written = write_image_tree(tmp_path / 'photos', per_class=2, classes=('cat',))
    flat, _ = flatten(tmp_path, written)
    (flat / 'labels.csv').write_text(text)
    (tmp_path / 'out').mkdir()
    with pytest.raises(UserError) as error:
        prepare(flat, tmp_path / 'out', labels_file=str(flat / 'labels.csv'), label=label)
    assert message.replace('FLAT', str(flat)) in str(error.value)
    assert not os.listdir(tmp_path / 'out')
