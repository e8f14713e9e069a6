"""Face photo folders and LFW pair lists -> TFRecord shards (see input_fns.prepare).

`faces`: one record per person (all their photos), people split into train and validation (from a
people file or a seeded fraction), plus fixed pair sets drawn from each split:
`train_pairs` (for choosing a decision threshold) and `validation_pairs` (people
never seen in training). `face_pairs`: an LFW pair list (pairsDevTrain.txt,
pairsDevTest.txt or the 10-fold pairs.txt) as pair shards, fold numbers kept.
"""
import os
import random
from typing import Callable, Dict, List, Tuple

from absl import logging

from common import atomic_writes, files, paths
from common.errors import UserError
from input_fns.faces import face_photos, face_records, lfw_files
from input_fns.faces.lfw_files import Pair
from input_fns.records import shards, stream_shards


def split_people(people: Dict[str, List[str]], people_file: str, fraction: float,
                 seed: int) -> Tuple[List[str], List[str]]:
    """(train names, validation names): never the same person in both."""
    names = sorted(people)
    if people_file:
        listed = set(lfw_files.read_people_file(people_file))
        missing = sorted(listed - set(names))
        if missing:
            logging.warning('%d people in %s have no photos here (first: %s)', len(missing),
                            people_file, missing[0])
        train = [n for n in names if n in listed]
        validation = [n for n in names if n not in listed]
    else:
        shuffled = list(names)
        random.Random(seed).shuffle(shuffled)
        count = int(round(len(names) * fraction))
        validation, train = sorted(shuffled[:count]), sorted(shuffled[count:])
    if not train:
        raise UserError('no training people: check --train_people_file or --validation_fraction')
    return train, validation


def hold_out_calibration(train: List[str], fraction: float, seed: int) -> Tuple[List[str], List[str]]:
    """(train names, calibration names): calibration people are training people (the same side
    of LFW's split) kept out of training, so a threshold chosen on their pairs is chosen on
    faces the model never fitted, as the test people's will be."""
    if not fraction:
        return train, []
    shuffled = list(train)
    random.Random(seed + 2).shuffle(shuffled)
    count = int(round(len(train) * fraction))
    if count >= len(train):
        raise UserError(f'--calibration_fraction={fraction} leaves no training people')
    return sorted(shuffled[count:]), sorted(shuffled[:count])


def draw_pairs(numbered: Dict[str, Dict[int, str]], names: List[str], count: int,
               seed: int) -> Tuple[List[Pair], List[Pair]]:
    """Up to `count` same and as many different pairs among `names` ({name: {photo number:
    photo}}: numbered_photos), with a fixed seed."""
    rng = random.Random(seed)
    repeat = [n for n in names if len(numbered[n]) >= 2]
    if not repeat or len(names) < 2:
        return [], []
    same, different = [], []
    for _ in range(count):
        name = rng.choice(repeat)
        a, b = rng.sample(sorted(numbered[name]), 2)
        same.append(Pair(name, a, name, b, 0, 0))
        name_a, name_b = rng.sample(names, 2)
        different.append(Pair(name_a, rng.choice(sorted(numbered[name_a])), name_b,
                              rng.choice(sorted(numbered[name_b])), 0, 0))
    return same, different


def numbered_photos(people: Dict[str, List[str]]) -> Dict[str, Dict[int, str]]:
    """{name: {number: the photo's path below ROOT}}, numbered as lfw_files.photo_numbers says."""
    return {name: {number: os.path.join(name, photo) for number, photo in
                   zip(lfw_files.photo_numbers(name, photos), photos)}
            for name, photos in people.items()}


def photo_path_in(numbered: Dict[str, Dict[int, str]]) -> Callable[[str, int], str]:
    """(name, number) -> the photo's path below ROOT; for a number no photo has, the LFW name
    it would have (which write_pair_split reports missing)."""
    return lambda name, number: (numbered.get(name, {}).get(number) or
                                 lfw_files.photo_relpath(name, number))


def write_pair_split(output_dir: str, split: str, pairs: List[Pair],
                     reader: face_photos.PhotoReader, num_shards: int, seed: int,
                     sources: List[str], photo_path: Callable[[str, int], str]) -> Dict:
    """Pair shards; a pair naming a missing or bad photo is reported and counted, or fatal if
    strict. photo_path: (name, number) -> the photo's path below ROOT."""
    missing = []

    def make_record(i):
        pair = pairs[i]
        jpegs = []
        for name, number in ((pair.name_a, pair.number_a), (pair.name_b, pair.number_b)):
            path = photo_path(name, number)
            exists = files.exists(paths.join(reader.root, path))
            if not exists and reader.strict:
                raise UserError(f'{sources[0]}:{pair.line}: {os.path.join(reader.root, path)} '
                                'does not exist')
            jpegs.append(reader.read(path) if exists else None)
        if None in jpegs:
            logging.warning('%s:%d: pair %s %d / %s %d names a missing or unreadable photo; '
                            'not written', sources[0], pair.line, pair.name_a, pair.number_a,
                            pair.name_b, pair.number_b)
            missing.append(f'{pair.name_a} {pair.number_a} {pair.name_b} {pair.number_b}')
            return None
        return face_records.encode_pair(jpegs[0], jpegs[1], pair.same, pair.fold)

    num_same = sum(p.same for p in pairs)
    entry = stream_shards.write_split(
        output_dir, split, len(pairs), make_record, num_shards, seed, dataset='face_pairs',
        features=face_records.PAIR_MANIFEST_FEATURES, sources=sources,
        extra={'kind': 'pairs', 'num_same': num_same, 'num_different': len(pairs) - num_same,
               'num_folds': len({p.fold for p in pairs})})
    if missing:
        entry['missing_pairs'] = missing
        logging.warning('%s: %d of %d pairs name missing or unreadable photos and were not '
                        'written (listed in manifest.json)', split, len(missing), len(pairs))
        shards.update_split(output_dir, split, entry)
    return entry


def write_people_split(output_dir: str, split: str, names: List[str],
                       people: Dict[str, List[str]], identity: Dict[str, int],
                       reader: face_photos.PhotoReader, num_shards: int, seed: int,
                       people_file: str) -> Dict:
    """One record per person, holding all their photos that decode (layout 2), so training
    can stream people through a buffer instead of holding every photo."""
    photos_written = []

    def make_record(i):
        name = names[i]
        readable = [(photo, reader.read(os.path.join(name, photo))) for photo in people[name]]
        readable = [(photo, jpeg) for photo, jpeg in readable if jpeg is not None]
        if not readable:
            return None
        photos_written.append(len(readable))
        return face_records.encode_person([jpeg for _, jpeg in readable],
                                          [f'{name}/{photo}' for photo, _ in readable],
                                          identity[name], name)

    entry = stream_shards.write_split(
        output_dir, split, len(names), make_record, num_shards, seed, dataset='faces',
        features=face_records.PERSON_MANIFEST_FEATURES, sources=[reader.root],
        extra={'kind': 'people', 'layout_version': face_records.PEOPLE_LAYOUT_VERSION,
               'people_file': people_file or None})
    # Counted as the records were made: what was written, bad photos left out.
    entry.update(num_people=len(photos_written), num_photos=sum(photos_written),
                 num_people_with_2_or_more=sum(count >= 2 for count in photos_written))
    skipped = {p: r for p, r in reader.bad.items() if p.split('/')[0] in set(names)}
    if skipped:
        entry.update(skipped_files=skipped, num_skipped_photos=len(skipped))
    shards.update_split(output_dir, split, entry)
    return entry


def prepare_faces(*, source_dir: str, output_dir: str, train_people_file: str,
                  validation_fraction: float, num_pairs: int, pair_folds: int, strict: bool,
                  num_shards: int, num_eval_shards: int, seed: int,
                  calibration_fraction: float = 0.0) -> Dict:
    if not source_dir:
        raise UserError('--source_dir is required for faces: ROOT/<person>/<photo>, a folder of '
                        'photos a person')
    if num_pairs % pair_folds:
        raise UserError(f'--num_pairs={num_pairs} is not a multiple of '
                        f'--pair_folds={pair_folds}')
    root = lfw_files.resolve_root(source_dir)
    people = lfw_files.scan_people(root)
    numbered = numbered_photos(people)
    identity = {name: i for i, name in enumerate(sorted(people))}
    train, validation = split_people(people, train_people_file, validation_fraction,
                                     seed)
    train, calibration = hold_out_calibration(train, calibration_fraction, seed)
    reader = face_photos.PhotoReader(root, strict)
    entries = {}
    for split, names in (('train', train), ('calibration', calibration),
                         ('validation', validation)):
        if not names:
            continue
        entries[split] = write_people_split(output_dir, split, names, people, identity, reader,
                                            num_shards if split == 'train' else num_eval_shards,
                                            seed, train_people_file)

        same, different = draw_pairs(numbered, names, num_pairs, seed + 1)
        folds = pair_folds if split == 'validation' else 1
        if same:
            pairs_txt = os.path.join(output_dir, f'{split}_pairs.txt')
            atomic_writes.write_text_atomic(pairs_txt, lfw_files.write_pairs_file(
                pairs_txt, same, different, folds))
            pairs = lfw_files.read_pairs_file(pairs_txt)  # line numbers for messages
            entries[f'{split}_pairs'] = write_pair_split(
                output_dir, f'{split}_pairs', pairs, reader, num_eval_shards,
                seed, [pairs_txt], photo_path_in(numbered))
    shards.set_source_root(output_dir, root)
    return entries


def prepare_face_pairs(*, source_dir: str, pairs_file: str, output_dir: str, split: str,
                       strict: bool, num_eval_shards: int, seed: int) -> Dict:
    if not (source_dir and pairs_file):
        raise UserError('face_pairs needs --source_dir (the photo folder) and --pairs_file')
    root = lfw_files.resolve_root(source_dir)
    pairs = lfw_files.read_pairs_file(pairs_file)
    split = split or os.path.splitext(os.path.basename(pairs_file))[0]
    numbered = numbered_photos(lfw_files.scan_people(root))
    entry = write_pair_split(output_dir, split, pairs, face_photos.PhotoReader(root, strict),
                             num_eval_shards, seed, [pairs_file], photo_path_in(numbered))
    shards.set_source_root(output_dir, root)
    return {split: entry}
