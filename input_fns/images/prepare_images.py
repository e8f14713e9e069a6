"""Folders of labelled images -> image shards (see input_fns.prepare):

  python -m input_fns.prepare images --source_dir=ROOT --output_dir=OUT [--image_size=64x64]
      [--channels=3] [--resize=pad|crop|stretch] [--stored_as=pixels|jpeg]
      [--validation_fraction=0.2] [--skip_bad_images]

ROOT holds one sub-folder per class, as tf.keras.utils.image_dataset_from_directory reads it:
the class names are the sub-folders' names, sorted (label i is the i-th name), and a class's
images may lie in nested folders; or --labels_file names each image below ROOT and its class
(input_fns/images/labels_file.py). The split goes by a hash of each file's path below ROOT
(input_fns/records/split.py), so adding photos moves none of the old ones.

It streams: worker processes decode, fit and encode the photos CHUNK_SIZE at a time (at most two
chunks a worker in flight), and each record goes into its split's stream_shards writer as it
comes, whose shuffle holds a bounded budget and spills past it: memory follows the chunks and
that budget, never the folder's size. The shards are written, and the manifest changed, only
once every photo is read and checked (a bad one, or a kill, leaves output_dir as it was).

Stored as image_records' raw pixels unless --stored_as=jpeg: training then decodes nothing. The
JPEG form's decode per record cut an epoch of the training input to 0.22x the examples/s of
pixels, for 0.41x the bytes (the bench's noise photos at 32x32x3, 2 loaded cores; docs/your-data.md
has the figures), which a GPU training thousands of photos a second would wait on: it is for a
folder whose pixels would not fit the disk.
"""
import itertools
import re
import time
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from common import files, paths, progress
from common.errors import op_error_summary, UserError
from input_fns.images import (class_folders, converted_images, image_records,
                              labels_file as labels_file_module)
from input_fns.records import (file_patterns, parallel_python, python_workers,
                               split as data_split, stream_shards)

DECODED, UNDECODABLE = 1, 0
# Photos a worker is handed at a time, cut here; with two a worker in flight, what memory holds
# of the photos at once, whatever the folder's size.
CHUNK_SIZE = 16


def parse_image_size(text: str) -> Tuple[int, int]:
    """--image_size: 'HxW' (e.g. '64x64') -> (height, width)."""
    parts = text.lower().split('x') if text else []
    if len(parts) != 2 or not all(part.strip().isdigit() and int(part) > 0 for part in parts):
        raise UserError(f'--image_size={text}: give HEIGHTxWIDTH in pixels, e.g. --image_size=64x64')
    return int(parts[0]), int(parts[1])


_fitters = {}  # a process's compiled decode-fit-store, by (image_shape, resize, stored_as)


def record_in_worker(item):
    """made_record in a worker process, on one thread: the workers are the parallelism."""
    if not _fitters:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    return made_record(item)


def made_record(item):
    """(path, label, image_shape, resize, stored_as) -> (its serialized record, DECODED), or
    (b'', UNDECODABLE) (the parent finds out why). One tf.function: 4x the images/s of eager
    ops."""
    path, label, image_shape, resize, stored_as = item
    key = image_shape, resize, stored_as
    if key not in _fitters:
        _fitters[key] = tf.function(
            lambda encoded: stored_image(encoded, image_shape, resize, stored_as),
            input_signature=[tf.TensorSpec([], tf.string)])
    try:
        encoded = converted_images.decodable(files.read_bytes(path))
        image = _fitters[key](encoded).numpy()
    except (tf.errors.OpError, OSError):
        return b'', UNDECODABLE
    if stored_as == image_records.JPEG:
        return image_records.encode_jpeg_example(image, label), DECODED
    return image_records.encode_example(image, label), DECODED


def stored_image(encoded, image_shape, resize: str, stored_as: str):
    fitted = fit_encoded(encoded, image_shape, resize)
    return image_records.stored_jpeg(fitted) if stored_as == image_records.JPEG else fitted


def fit_encoded(encoded, image_shape, resize: str):
    return image_records.fit_image(image_records.decode_any_image(encoded, image_shape[2]),
                                   image_shape, resize)


def why_bad(path: str, image_shape, resize: str) -> str:
    """What is wrong with a file the workers could not decode (tried again here, for its message)."""
    try:
        fit_encoded(converted_images.decodable(files.read_bytes(path)), image_shape, resize)
    except tf.errors.InvalidArgumentError as e:
        # Eager errors carry the op's wrapper: '{{function_node ...}} REASON [Op:DecodeImage]'.
        reason = re.sub(r'\{\{.*?\}\}\s*|\s*\[Op:\w+\]', '', op_error_summary(e))
        return f'not a decodable {converted_images.FORMATS} image ({reason})'
    except (tf.errors.OpError, OSError) as e:
        return f'cannot be read ({getattr(e, "message", None) or e})'.splitlines()[0]
    return 'could not be decoded in a worker process'


def record_chunks(items, num_workers: int):
    """made_record's outputs, as (records, statuses) by chunks of CHUNK_SIZE items, in order: in
    num_workers worker processes, or here for 1 (a worker pool costs seconds to start)."""
    items = iter(items)
    if num_workers == 1:
        while chunk := list(itertools.islice(items, CHUNK_SIZE)):
            yield tuple(zip(*map(made_record, chunk)))
        return
    pool = python_workers.WorkerPool(record_in_worker, [(object, ()), (np.int8, ())],
                                     num_workers)
    try:
        yield from pool.map_chunks(items, CHUNK_SIZE, ordered=True)
    finally:
        pool.close()


def write_records(tree, image_shape, resize: str, stored_as: str, num_workers: int,
                  writers: Dict, split_of: List[str]) -> np.ndarray:
    """Each photo's record into its split's writer as its chunk comes back, logging progress
    with the time left; returns which photos decoded (bool [N]) and prints the rate."""
    count, started = len(tree.images), time.time()
    decoded = np.zeros([count], bool)
    items = ((paths.join(tree.root, relative), label, tuple(image_shape), resize, stored_as)
             for relative, label in zip(tree.images, tree.labels))
    done, made = 0, None
    for records, statuses in record_chunks(items, num_workers):
        for index, record, status in zip(itertools.count(done), records, statuses):
            if status == DECODED:
                decoded[index] = True
                writers[split_of[index]].write(record)
        done += len(statuses)
        if made is None:  # the rate from the first chunk on, not from the workers' start
            made = progress.ProgressLog('decoded', count, 'photos', done=done)
        else:
            made.advance(len(statuses))
    seconds = time.time() - started
    print(f'decoded {count:,} images in {seconds:.1f}s ({count / max(seconds, 1e-9):,.0f} '
          f'images/s, {f"{num_workers} worker processes" if num_workers > 1 else "in this process"})',
          flush=True)
    return decoded


def prepare_images(*, source_dir: str, output_dir: str, image_size: str, channels: int,
                   resize: str, validation_fraction: float, skip_bad_images: bool,
                   decode_workers: int, num_shards: int, num_eval_shards: int, seed: int,
                   stored_as: str = image_records.PIXELS, schema_from: Optional[str] = None,
                   split: Optional[str] = None, labels_file: Optional[str] = None,
                   label: Optional[str] = None, encoding: Optional[str] = None) -> Dict:
    if not source_dir:
        raise UserError('--source_dir is required for images: the folder that holds one '
                        'sub-folder of images per class (or the images --labels_file names)')
    if stored_as not in image_records.STORED_FORMS:
        raise UserError(f'--stored_as={stored_as}: use one of '
                        f'{", ".join(image_records.STORED_FORMS)}')
    image_shape = [*parse_image_size(image_size), int(channels)]
    data_split.check_fraction(validation_fraction)
    trained = file_patterns.schema_at(schema_from, 'images') if schema_from else {}
    if trained:  # fitted and labelled as the training photos were
        image_shape, resize = trained['image_shape'], trained['resize']
    tree = (labels_file_module.LabelledFiles(source_dir, labels_file, label, trained.get('classes'),
                                             encoding)
            if labels_file else class_folders.ClassFolders(source_dir, trained.get('classes')))
    split_of = split_names(tree, validation_fraction, split)
    shard_counts = {name: num_shards if name == 'train' else num_eval_shards
                    for name in sorted(set(split_of))}
    num_workers = decode_workers or parallel_python.default_num_workers()
    with stream_shards.streamed_splits(output_dir, shard_counts, seed) as writers:
        decoded = write_records(tree, image_shape, resize, stored_as, num_workers, writers,
                                split_of)
        bad = checked_bad_images(tree, decoded, image_shape, resize, skip_bad_images)
        counts = class_counts(tree, decoded, split_of)
        entries = {name: dict(skipped=int(np.sum(~decoded & (np.array(split_of) == name))),
                              features=image_records.manifest_features(stored_as),
                              sources=[tree.root], seed=seed,
                              extra={'image_shape': image_shape, 'stored_as': stored_as,
                                     'class_counts': counts[name]})
                   for name in counts}
        schema = {'kind': 'images', 'image_shape': image_shape, 'classes': tree.classes,
                  'resize': resize, 'stored_as': stored_as,
                  'validation_fraction': validation_fraction, 'class_counts': counts,
                  'source_dir': tree.root, 'bad_images': bad,
                  **({'labels_file': labels_file} if labels_file else {}),
                  'not_images': tree.not_images_by_extension(), 'not_image_files': tree.not_images}
        entries = stream_shards.publish(output_dir, {name: writers[name] for name in counts},
                                        entries, 'images', schema)
    print_summary(tree, counts, bad)
    return entries


def checked_bad_images(tree, decoded: np.ndarray, image_shape, resize: str,
                       skip_bad_images: bool) -> Dict[str, str]:
    """{image: why it does not decode}, refused unless --skip_bad_images; so is a class none
    of whose images decodes."""
    bad = {tree.images[i]: why_bad(paths.join(tree.root, tree.images[i]), image_shape, resize)
           for i in np.flatnonzero(~decoded)}
    if bad and not skip_bad_images:
        path, reason = next(iter(bad.items()))
        more = f' (and {len(bad) - 1} more)' if len(bad) > 1 else ''
        raise UserError(f'{paths.join(tree.root, path)}: {reason}{more}; remove or replace it, or '
                        'pass --skip_bad_images to skip and count such files')
    labels = np.array(tree.labels, np.int64)
    for label, name in enumerate(tree.classes):
        if name in tree.folders and not np.any(decoded & (labels == label)):
            raise UserError(f'{tree.place_of(name)}: none of its images decodes (all skipped as '
                            'bad); fix them, or remove the class')
    return bad


def class_counts(tree, decoded: np.ndarray, split_of: List[str]) -> Dict[str, Dict[str, int]]:
    """{split: {class: its decoded photos}}, for the splits with any."""
    split_of, labels = np.array(split_of), np.array(tree.labels, np.int64)
    counts = {name: {cls: int(np.sum(decoded & (split_of == name) & (labels == label)))
                     for label, cls in enumerate(tree.classes)}
              for name in sorted(set(split_of))}
    return {name: by_class for name, by_class in counts.items() if sum(by_class.values())}


def split_names(tree, validation_fraction: float, split: Optional[str]) -> List[str]:
    """Each photo's split, known before it is decoded: held out by a hash of its path, or the
    one split given."""
    if split:
        return [split] * len(tree.images)
    return ['validation' if data_split.is_validation(path.encode(), validation_fraction)
            else 'train' for path in tree.images]


def print_summary(tree, counts: Dict, bad: Dict) -> None:
    """The per-class counts of each split, and what was skipped."""
    splits = list(counts)
    width = max(len(name) for name in tree.classes + ['class'])
    print(f'{"class":<{width}}  ' + '  '.join(f'{name:>10}' for name in splits))
    for name in tree.classes:
        print(f'{name:<{width}}  ' + '  '.join(f'{counts[s][name]:>10,}' for s in splits))
    if bad:
        print(f'skipped {len(bad)} images that do not decode (--skip_bad_images; listed in '
              'manifest.json under schema.bad_images)')
    if tree.not_images:
        by_extension = ', '.join(f'{ext} {n}' for ext, n in tree.not_images_by_extension().items())
        print(f'skipped {len(tree.not_images)} files that {tree.skipped_because} ({by_extension}; '
              'listed in manifest.json under schema.not_image_files)', flush=True)
