"""Folders of labelled images -> image shards (see input_fns.prepare):

  python -m input_fns.prepare images --source_dir=ROOT --output_dir=OUT [--image_size=64x64]
      [--channels=3] [--resize=pad|crop|stretch] [--validation_fraction=0.2] [--skip_bad_images]

ROOT holds one sub-folder per class, as tf.keras.utils.image_dataset_from_directory reads it:
the class names are the sub-folders' names, sorted (label i is the i-th name), and a class's
images may lie in nested folders; or --labels_file names each image below ROOT and its class
(input_fns/images/labels_file.py). Every file is decoded (PNG, JPEG, GIF, BMP, WebP, TIFF, HEIC) and
fitted to --image_size in worker processes, then stored as image_records' raw pixels. The split
goes by a hash of each file's path below ROOT (input_fns/records/split.py), so adding photos moves none
of the old ones. Everything is checked before anything is written: a bad tree writes nothing.
"""
import re
import time
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from common import files, paths, progress
from common.errors import op_error_summary, UserError
from input_fns.images import (class_folders, converted_images, image_records,
                              labels_file as labels_file_module)
from input_fns.records import (file_patterns, parallel_python, python_workers, shards,
                               split as data_split, stream_shards)

DECODED, UNDECODABLE = 1, 0
CHUNK_SIZE = 16


def parse_image_size(text: str) -> Tuple[int, int]:
    """--image_size: 'HxW' (e.g. '64x64') -> (height, width)."""
    parts = text.lower().split('x') if text else []
    if len(parts) != 2 or not all(part.strip().isdigit() and int(part) > 0 for part in parts):
        raise UserError(f'--image_size={text}: give HEIGHTxWIDTH in pixels, e.g. --image_size=64x64')
    return int(parts[0]), int(parts[1])


_fitters = {}  # a process's compiled decode-and-fit, by (image_shape, resize)


def decode_in_worker(item):
    """decode_and_fit in a worker process, on one thread: the workers are the parallelism."""
    if not _fitters:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    return decode_and_fit(item)


def decode_and_fit(item):
    """(path, image_shape, resize) -> (uint8 pixels image_shape, DECODED), or zeros and
    UNDECODABLE (the parent finds out why). One tf.function: 4x the images/s of eager ops."""
    path, image_shape, resize = item
    if (image_shape, resize) not in _fitters:
        _fitters[image_shape, resize] = tf.function(
            lambda encoded: fit_encoded(encoded, image_shape, resize),
            input_signature=[tf.TensorSpec([], tf.string)])
    try:
        encoded = converted_images.decodable(files.read_bytes(path))
        return _fitters[image_shape, resize](encoded).numpy(), DECODED
    except (tf.errors.OpError, OSError):
        return np.zeros(image_shape, np.uint8), UNDECODABLE


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


def decoded_chunks(items, num_workers: int):
    """decode_and_fit's outputs, stacked by chunks of CHUNK_SIZE items, in order: in num_workers
    worker processes, or here for 1 (a worker pool costs seconds to start)."""
    if num_workers == 1:
        for start in range(0, len(items), CHUNK_SIZE):
            outputs = [decode_and_fit(item) for item in items[start:start + CHUNK_SIZE]]
            yield [np.stack(column) for column in zip(*outputs)]
        return
    pool = python_workers.WorkerPool(decode_in_worker, [(np.uint8, items[0][1]), (np.int8, ())],
                                     num_workers)
    try:
        yield from pool.map_chunks(items, CHUNK_SIZE, ordered=True)
    finally:
        pool.close()


def decode_all(tree, image_shape, resize: str, num_workers: int):
    """(uint8 [N, *image_shape], decoded [N] bool), logging progress and printing the rate."""
    count, started = len(tree.images), time.time()
    pixels = np.zeros([count, *image_shape], np.uint8)
    decoded = np.zeros([count], bool)
    items = [(paths.join(tree.root, relative), tuple(image_shape), resize)
             for relative in tree.images]
    rate, done, last_log = progress.RecentRate(), 0, time.time()
    rate.add(0)
    for chunk_pixels, chunk_status in decoded_chunks(items, num_workers):
        pixels[done:done + len(chunk_status)] = chunk_pixels
        decoded[done:done + len(chunk_status)] = chunk_status == DECODED
        done += len(chunk_status)
        if time.time() - last_log > 5:
            last_log = time.time()
            rate.add(done, last_log)
            logging.info('decoded %s, %s', progress.fraction_text(done, count, 'images'),
                         progress.eta_text(done, count, rate.per_sec()) or '')
    seconds = time.time() - started
    print(f'decoded {count:,} images in {seconds:.1f}s ({count / max(seconds, 1e-9):,.0f} '
          f'images/s, {f"{num_workers} worker processes" if num_workers > 1 else "in this process"})',
          flush=True)
    return pixels, decoded


def prepare_images(*, source_dir: str, output_dir: str, image_size: str, channels: int,
                   resize: str, validation_fraction: float, skip_bad_images: bool,
                   decode_workers: int, num_shards: int, num_eval_shards: int, seed: int,
                   schema_from: Optional[str] = None, split: Optional[str] = None,
                   labels_file: Optional[str] = None, label: Optional[str] = None,
                   encoding: Optional[str] = None) -> Dict:
    if not source_dir:
        raise UserError('--source_dir is required for images: the folder that holds one '
                        'sub-folder of images per class (or the images --labels_file names)')
    image_shape = [*parse_image_size(image_size), int(channels)]
    data_split.check_fraction(validation_fraction)
    trained = file_patterns.schema_at(schema_from, 'images') if schema_from else {}
    if trained:  # fitted and labelled as the training photos were
        image_shape, resize = trained['image_shape'], trained['resize']
    tree = (labels_file_module.LabelledFiles(source_dir, labels_file, label, trained.get('classes'),
                                             encoding)
            if labels_file else class_folders.ClassFolders(source_dir, trained.get('classes')))
    num_workers = decode_workers or parallel_python.default_num_workers()
    pixels, decoded = decode_all(tree, image_shape, resize, num_workers)
    bad = checked_bad_images(tree, decoded, image_shape, resize, skip_bad_images)
    labels = np.array(tree.labels, np.int64)
    members = split_members(tree, decoded, validation_fraction, split)
    counts = {name: {cls: int(np.sum(labels[indices] == label))
                     for label, cls in enumerate(tree.classes)}
              for name, indices in members.items() if len(indices)}
    entries = {}
    for name, indices in members.items():
        if not len(indices):
            continue
        entries[name] = stream_shards.write_split(
            output_dir, name, len(indices),
            lambda i, indices=indices: image_records.encode_example(pixels[indices[i]],
                                                                    labels[indices[i]]),
            num_shards=num_shards if name == 'train' else num_eval_shards, seed=seed,
            dataset='images', features=image_records.MANIFEST_FEATURES,
            sources=[tree.root], extra={'image_shape': image_shape, 'class_counts': counts[name]})
    if shards.takes_schema(shards.read_manifest(output_dir), members):
        shards.set_schema(output_dir, {
            'kind': 'images', 'image_shape': image_shape, 'classes': tree.classes,
            'resize': resize, 'validation_fraction': validation_fraction, 'class_counts': counts,
            'source_dir': tree.root, 'bad_images': bad,
            **({'labels_file': labels_file} if labels_file else {}),
            'not_images': tree.not_images_by_extension(), 'not_image_files': tree.not_images})
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


def split_members(tree, decoded: np.ndarray,
                  validation_fraction: float,
                  split: Optional[str]) -> Dict[str, np.ndarray]:
    """{split: the indices of its decoded images}: held out by a hash of each path, or all in
    the one split given."""
    if split:
        return {split: np.flatnonzero(decoded)}
    in_validation = np.array([data_split.is_validation(path.encode(), validation_fraction)
                              for path in tree.images], bool)
    return {'train': np.flatnonzero(decoded & ~in_validation),
            'validation': np.flatnonzero(decoded & in_validation)}


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
