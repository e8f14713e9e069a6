"""Face photo folders, in LFW's layout or any other, and LFW's text files: people lists and pair
lists.

Folder: ROOT/<person>/<photo>, a folder a person (ROOT may also be the folder that holds lfw/):
LFW's <Name>/<Name>_0001.jpg, CASIA-WebFace's 0000045/001.jpg, VGGFace2's n000002/0001_01.jpg,
or a phone's IMG_0042.HEIC, in nested folders too. A photo's number in a pair list is LFW's own
where all of a person's photos have LFW's names, else its place in name order, 1 first.
People files (peopleDevTrain.txt): a count line, then `Name  number_of_images` lines.
Pair files: pairsDevTrain.txt / pairsDevTest.txt have a count line N, then N
same-person lines `name i j` and N different-person lines `name1 i name2 j`;
the 10-fold pairs.txt has a header `10 300`, then per fold 300 same and 300
different lines.
"""
import dataclasses
import os
import re
from typing import Dict, List

import tensorflow as tf
from absl import logging

from common import file_trees, files, paths
from common.errors import UserError
from input_fns.images import class_folders, converted_images

PHOTO_NAME = re.compile(r'^(?P<name>.+)_(?P<number>\d{4})\.jpe?g$', re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class Pair:
    name_a: str
    number_a: int
    name_b: str
    number_b: int
    fold: int  # 0 for single-set files
    line: int  # where it came from, for messages

    @property
    def same(self) -> bool:
        return self.name_a == self.name_b


def resolve_root(source_dir: str) -> str:
    if not files.isdir(source_dir):
        raise UserError(f'--source_dir={source_dir}: no such folder')
    nested = paths.join(source_dir, 'lfw')
    return nested if files.isdir(nested) else source_dir


def photo_relpath(name: str, number: int) -> str:
    return os.path.join(name, f'{name}_{number:04d}.jpg')


def scan_people(root: str) -> Dict[str, List[str]]:
    """{person: the paths of their photos below their folder, in name order} for every folder of
    ROOT that holds photos (by extension, as `prepare images` takes them); other files are
    counted in the log."""
    people, not_photos = {}, []
    for name in files.listdir(root):
        folder = paths.join(root, name)
        if not files.isdir(folder):
            continue  # LFW's README.txt and pair lists beside its folders
        found = file_trees.list_tree(folder)
        photos = [path for path in found if path.lower().endswith(class_folders.IMAGE_EXTENSIONS)]
        not_photos += sorted(set(found) - set(photos))
        if photos:
            people[name] = photos
    if not_photos:
        logging.warning('%s: skipped %d files that are not photos (%s)', root, len(not_photos),
                        class_folders.count_by_extension(not_photos))
    if not people:
        raise UserError(f'{root}: no folders of photos ({converted_images.FORMATS}); put each '
                        'person\'s photos in a folder named after them: ROOT/<person>/<photo>')
    return people


def photo_numbers(name: str, photos: List[str]) -> List[int]:
    """Each of a person's photos' number in a pair list: LFW's own (Name/Name_0007.jpg is 7)
    where all their photos are so named, else its place in name order, 1 first."""
    matches = [PHOTO_NAME.match(photo) for photo in photos]
    if all(match and match['name'] == name for match in matches):
        return [int(match['number']) for match in matches]
    return list(range(1, len(photos) + 1))


def _lines(path: str) -> List[List[str]]:
    """The fields of each line: split at tabs where the line has any (as LFW's are, and as
    write_pairs_file writes them, so a person's name may hold spaces), else at spaces."""
    try:
        return [[field.strip() for field in line.split('\t') if field.strip()] if '\t' in line
                else line.split() for line in files.read_text(path).splitlines()]
    except tf.errors.OpError as e:
        raise UserError(f'{path}: cannot read it ({e.message})')
    except UnicodeDecodeError as e:
        raise UserError(f'{path}: not a text file (byte {e.start} is not UTF-8); give an LFW '
                        'list such as pairsDevTest.txt or peopleDevTrain.txt')


def read_people_file(path: str) -> List[str]:
    """Names from a people file (peopleDevTrain.txt, or the 10-set people.txt)."""
    rows = _lines(path)
    names = []
    for number, fields in enumerate(rows[1:], start=2):
        if len(fields) == 2 and fields[1].isdigit():
            names.append(fields[0])
        elif not (len(fields) == 1 and fields[0].isdigit()) and fields:  # per-set count lines
            raise UserError(f'{path}:{number}: expected "Name count", got {" ".join(fields)!r}')
    if not names:
        raise UserError(f'{path}: no people listed')
    return names


def read_pairs_file(path: str) -> List[Pair]:
    """Pairs from pairsDevTrain.txt / pairsDevTest.txt (fold 0) or the 10-fold pairs.txt."""
    rows = _lines(path)
    if not rows or not rows[0] or not all(field.isdigit() for field in rows[0]):
        raise UserError(f'{path}:1: expected a header "N" or "FOLDS N", got {rows[:1]}')
    if len(rows[0]) == 1:
        folds, per_kind = 1, int(rows[0][0])
    else:
        folds, per_kind = int(rows[0][0]), int(rows[0][1])
    expected = folds * 2 * per_kind
    body = [(number, fields) for number, fields in enumerate(rows[1:], start=2) if fields]
    if len(body) != expected:
        raise UserError(f'{path}: header says {folds} fold(s) of {per_kind} same and {per_kind} '
                        f'different pairs ({expected} lines), but {len(body)} lines follow')
    pairs = []
    for index, (number, fields) in enumerate(body):
        fold, same = index // (2 * per_kind), (index % (2 * per_kind)) < per_kind
        try:
            if same and len(fields) == 3:
                pairs.append(Pair(fields[0], int(fields[1]), fields[0], int(fields[2]), fold, number))
                continue
            if not same and len(fields) == 4:
                pairs.append(Pair(fields[0], int(fields[1]), fields[2], int(fields[3]), fold, number))
                continue
        except ValueError:
            pass
        shape = '"name i j"' if same else '"name1 i name2 j"'
        raise UserError(f'{path}:{number}: expected a {"same" if same else "different"}-person '
                        f'pair {shape}, got {" ".join(fields)!r}')
    return pairs


def write_pairs_file(path: str, same: List[Pair], different: List[Pair], folds: int = 1) -> str:
    """LFW's format: 'N' then N same and N different lines (pairsDevTest.txt), or for several
    folds 'FOLDS N' then each fold's N same and N different lines (pairs.txt)."""
    per_fold = len(same) // folds
    if len(same) != len(different) or per_fold * folds != len(same):
        raise ValueError(f'{path}: need as many same as different pairs, a multiple of {folds}')
    lines = [f'{per_fold}' if folds == 1 else f'{folds} {per_fold}']
    for fold in range(folds):
        chunk = slice(fold * per_fold, (fold + 1) * per_fold)
        lines += [f'{p.name_a}\t{p.number_a}\t{p.number_b}' for p in same[chunk]]
        lines += [f'{p.name_a}\t{p.number_a}\t{p.name_b}\t{p.number_b}' for p in different[chunk]]
    return '\n'.join(lines) + '\n'
