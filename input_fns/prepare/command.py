"""Writes datasets as sharded TFRecords with a manifest.json.

  python -m input_fns.prepare mnist --source_dir=DIR_OR_NPZ --output_dir=OUT \
      [--num_shards=10] [--validation_size=10000]
  python -m input_fns.prepare digits --output_dir=OUT     # offline: sklearn's bundled digits
  python -m input_fns.prepare faces --source_dir=LFW_ROOT --output_dir=OUT \
      [--train_people_file=peopleDevTrain.txt | --validation_fraction=0.2] [--num_pairs=300]
  python -m input_fns.prepare face_pairs --source_dir=LFW_ROOT --pairs_file=pairs.txt \
      --output_dir=OUT
  python -m input_fns.prepare csv --source=FILE_OR_GLOB --label=COLUMN --output_dir=OUT \
      [--validation_fraction=0.2] [--column_types=NAME:float,...] [--task=classification] \
      [--ignore_columns=id,name] [--delimiter=;] [--decimal=,] [--thousands=,] \
      [--encoding=cp1252] [--date_format=day/month/year]
  python -m input_fns.prepare examples --source=PATTERN --label=NAME [--output_dir=OUT]
  python -m input_fns.prepare csv_example --output_dir=OUT --num_shards=20   # generated, csv_mlp's
  python -m input_fns.prepare images --source_dir=ROOT --output_dir=OUT [--image_size=64x64] \
      [--channels=3] [--resize=pad|crop|stretch] [--validation_fraction=0.2] \
      [--labels_file=labels.csv [--label=COLUMN]]   # ROOT/<class>/*.png, or ROOT/* in labels.csv

Shards are named SPLIT-00000-of-00010.tfrecord; every split's records are written in a random
order over the whole split, --seed's (recorded in manifest.json; the same seed writes the same
shards), so reading the shards in shuffled order is enough.
"""
import inspect
import sys
from typing import Dict

import numpy as np
import tensorflow as tf
from absl import flags

from common import bucket_probe, files, paths, store_retries
from common.errors import UserError
from input_fns.faces import prepare_faces
from input_fns.images import digit_sources, image_records, prepare_images
from input_fns.records import stream_shards
from input_fns.tables import csv_records, example_tables, prepare_csv

DATASETS = ('mnist', 'digits', 'faces', 'face_pairs', 'csv', 'examples', 'images', 'csv_example')


def hold_out(images, labels, count, seed):
    """Splits off `count` examples, chosen with `seed`, as the held-out part."""
    order = np.random.RandomState(seed).permutation(len(labels))
    held, kept = order[:count], order[count:]
    return (images[kept], labels[kept]), (images[held], labels[held])


def write_digit_splits(output_dir: str, dataset: str, splits: Dict, num_shards: int,
                       num_eval_shards: int, seed: int) -> Dict:
    entries = {}
    for split, (images, labels, sources) in splits.items():
        entries[split] = stream_shards.write_split(
            output_dir, split, len(labels),
            lambda i, images=images, labels=labels: image_records.encode_example(images[i], labels[i]),
            num_shards=num_shards if split == 'train' else num_eval_shards,
            seed=seed, dataset=dataset, features=image_records.MANIFEST_FEATURES, sources=sources,
            extra={'image_shape': list(images.shape[1:]) + [1]})
    return entries


def prepare_mnist(*, source_dir: str, output_dir: str, validation_size: int, num_shards: int,
                  num_eval_shards: int, seed: int) -> Dict:
    if not source_dir:
        raise UserError('--source_dir is required for mnist: a folder of IDX files or mnist.npz')
    splits = digit_sources.load_mnist(source_dir)
    if validation_size:
        if 'train' not in splits:
            raise UserError('--validation_size needs a train split, and none was found')
        images, labels, sources = splits['train']
        if validation_size >= len(labels):
            raise UserError(f'--validation_size={validation_size} leaves no training data '
                            f'({len(labels)} training images)')
        (train_x, train_y), (val_x, val_y) = hold_out(images, labels, validation_size,
                                                      seed)
        splits['train'] = (train_x, train_y, sources)
        splits['validation'] = (val_x, val_y, sources)
    return write_digit_splits(output_dir, 'mnist', splits, num_shards,
                              num_eval_shards, seed)


def prepare_digits(*, output_dir: str, validation_fraction: float, num_shards: int,
                   num_eval_shards: int, seed: int) -> Dict:
    images, labels, sources = digit_sources.load_sklearn_digits()
    count = int(round(len(labels) * validation_fraction))
    (train_x, train_y), (val_x, val_y) = hold_out(images, labels, count, seed)
    splits = {'train': (train_x, train_y, sources)}
    if count:
        splits['validation'] = (val_x, val_y, sources)
    return write_digit_splits(output_dir, 'digits', splits, num_shards,
                              num_eval_shards, seed)


def prepare_csv_example(*, output_dir: str, rows_per_shard: int, num_features: int, num_shards: int,
                num_eval_shards: int, seed: int) -> Dict:
    """The source documents' example: --num_shards training files (and --num_eval_shards
    validation files) of --rows_per_shard rows of --num_features floats."""
    def write(split, num_shards, seed):
        return csv_records.write_example_split(output_dir, split, num_shards,
                                               rows_per_shard, num_features, seed)

    return {'train': write('train', num_shards, seed),
            'validation': write('validation', num_eval_shards, seed + 1)}


def call_with_flags(prepare_fn, flag_values):
    """prepare_fn(name=value...) with the value of the flag of each of its parameters."""
    return prepare_fn(**{name: getattr(flag_values, name)
                         for name in inspect.signature(prepare_fn).parameters})


def main(argv):
    if len(argv) != 2 or argv[1] not in DATASETS:
        print(f'usage: python -m input_fns.prepare {{{"|".join(DATASETS)}}} --output_dir=DIR ...',
              file=sys.stderr)
        return 2
    output_dir = flags.FLAGS.output_dir
    if not output_dir and argv[1] != 'examples':
        raise UserError(f'--output_dir is required for {argv[1]}: the folder for the shards')
    # A missing bucket or unreachable endpoint: one line now, not retries later.
    bucket_probe.check_buckets([output_dir, flags.FLAGS.source_dir, flags.FLAGS.source,
                         flags.FLAGS.pairs_file, flags.FLAGS.train_people_file])
    try:
        if output_dir:
            files.makedirs(output_dir)
    except tf.errors.OpError as e:
        raise UserError(f'--output_dir={output_dir}: cannot make that folder '
                        f'({e.message.strip().splitlines()[0]}); give a folder path')
    prepare_fn = {'mnist': prepare_mnist, 'digits': prepare_digits,
                  'faces': prepare_faces.prepare_faces,
                  'face_pairs': prepare_faces.prepare_face_pairs, 'csv': prepare_csv.prepare_csv,
                  'examples': example_tables.prepare_examples,
                  'images': prepare_images.prepare_images, 'csv_example': prepare_csv_example}[argv[1]]
    try:
        entries = call_with_flags(prepare_fn, flags.FLAGS)
    except (OSError, tf.errors.OpError) as e:  # e.g. a full disk; the split is left unlisted
        reason = getattr(e, 'strerror', None) or getattr(e, 'message', None) or str(e)
        where = output_dir or flags.FLAGS.source
        first_line = (reason.strip().splitlines() or [type(e).__name__])[0]
        advice = ('the store keeps failing: run prepare again once it answers'
                  if store_retries.is_transient(e) and paths.is_bucket(where)
                  else 'free space or fix the folder, then run prepare again')
        print(f'error: writing under {where} failed ({first_line}); {advice}',
              file=sys.stderr)
        return 1
    counts = ', '.join(f'{split}: {entry["num_records"]}' for split, entry in entries.items())
    print(f'wrote {counts} records to {output_dir}' if output_dir else
          f'described {counts} records in {example_tables.manifest_folder(flags.FLAGS.source)}')
    return 0

