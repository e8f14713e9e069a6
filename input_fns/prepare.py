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
      [--date_format=day/month/year]
  python -m input_fns.prepare examples --source=PATTERN --label=NAME [--output_dir=OUT]
  python -m input_fns.prepare csv_example --output_dir=OUT --num_shards=20   # generated, csv_mlp's
  python -m input_fns.prepare images --source_dir=ROOT --output_dir=OUT [--image_size=64x64] \
      [--channels=3] [--resize=pad|crop|stretch] [--validation_fraction=0.2]   # ROOT/<class>/*.png

Shards are named SPLIT-00000-of-00010.tfrecord; records are shuffled with --seed
before writing, so reading the shards in shuffled order is enough.
"""
import inspect
import sys
from typing import Dict

import numpy as np
import tensorflow as tf
from absl import flags

from common import bucket_probe, cli, files, paths, store_retries
from common.errors import UserError
from input_fns import (csv_records, csv_tables, digit_sources, example_tables, image_records,
                       prepare_faces, prepare_images, shards, table_schema)

DATASETS = ('mnist', 'digits', 'faces', 'face_pairs', 'csv', 'examples', 'images', 'csv_example')


def define_flags():
    flags.DEFINE_string('source_dir', None, 'mnist: folder with IDX files (gzipped or not) or '
                        'mnist.npz, or the path of an .npz file. faces, face_pairs: the photo '
                        'folder ROOT/<Name>/<Name>_0001.jpg (or the folder holding lfw/). '
                        'images: ROOT/<class>/<image>, one sub-folder per class.')
    flags.DEFINE_string('output_dir', None, 'Folder for the shards and manifest.json (examples: '
                        'give it to reshard the records; without it, the manifest is written '
                        'beside them).')
    define_table_flags()
    flags.DEFINE_integer('num_shards', 10, 'Shards for the training split.', lower_bound=1)
    flags.DEFINE_integer('num_eval_shards', 2, 'Shards for each held-out split (validation, test).',
                         lower_bound=1)
    flags.DEFINE_integer('validation_size', 0, 'mnist: hold out this many training images as a '
                         '"validation" split.', lower_bound=0)
    flags.DEFINE_float('validation_fraction', 0.2, 'digits: fraction of images, faces: fraction '
                       'of people, csv and examples (resharded): fraction of rows (by a hash of '
                       'the row), held out as the "validation" split; images: each file\'s '
                       'chance, by a hash of its path below --source_dir.', lower_bound=0.0,
                       upper_bound=0.9)
    flags.DEFINE_float('calibration_fraction', 0.0, 'faces: fraction of the training people kept '
                       'out of training, written as `calibration` photos and `calibration_pairs`: '
                       'choose the decision threshold on those pairs (--threshold_files), people '
                       'the model never fitted.', lower_bound=0.0, upper_bound=0.9)
    flags.DEFINE_string('train_people_file', None, 'faces: people file (peopleDevTrain.txt '
                        'format) naming the training people; everyone else is validation.')
    flags.DEFINE_integer('num_pairs', 300, 'faces: fixed same-person pairs (and as many '
                         'different-person pairs) drawn for each split.', lower_bound=0)
    flags.DEFINE_integer('pair_folds', 1, 'faces: write validation pairs as this many folds, '
                         'like LFW\'s 10-fold pairs.txt (evaluate then cross-validates the '
                         'threshold); --num_pairs must be a multiple of it.', lower_bound=1)
    flags.DEFINE_string('pairs_file', None, 'face_pairs: an LFW pair list (pairsDevTrain.txt, '
                        'pairsDevTest.txt or the 10-fold pairs.txt).')
    flags.DEFINE_string('split', None, 'face_pairs: split name for the shards; default: the '
                        'pairs file\'s name. csv: write every row to this split (such as '
                        'test), none held out; images, examples with --output_dir: the same. '
                        'examples without it: the split the records are; default: train.')
    flags.DEFINE_bool('strict', False, 'faces, face_pairs: stop at an undecodable or missing '
                      'photo instead of skipping it (skips are counted in manifest.json).')
    flags.DEFINE_integer('rows_per_shard', 100, 'csv_example: rows in each generated shard.',
                         lower_bound=1)
    flags.DEFINE_integer('num_features', csv_records.EXAMPLE_NUM_FEATURES,
                         'csv_example: floats per generated row (the csv_mlp model takes 1024).',
                         lower_bound=1)
    flags.DEFINE_string('image_size', '64x64', 'images: HEIGHTxWIDTH the images are fitted to.')
    flags.DEFINE_enum('channels', '3', ['1', '3'], 'images: 1 (greyscale) or 3 (RGB).')
    flags.DEFINE_enum('resize', 'pad', list(image_records.RESIZE_MODES), 'images: how an image '
                      'of another shape is fitted: pad (scaled to fit, centred, black around), '
                      'crop (scaled to cover, centre kept) or stretch. Serving fits the same way.')
    flags.DEFINE_bool('skip_bad_images', False, 'images: skip and count files that do not decode '
                      '(listed in manifest.json) instead of stopping at the first.')
    flags.DEFINE_integer('decode_workers', 0, 'images: worker processes decoding the images; 0: '
                         'one per CPU core; 1: none, decoded in the prepare process.', lower_bound=0)
    flags.DEFINE_integer('seed', 0, 'Seed for the hold-out split and the record order.')


def define_table_flags():
    """The flags of csv and examples (a user's table)."""
    flags.DEFINE_string('source', None, 'csv: a CSV file with a header (.csv or .csv.gz) or a '
                        'glob of them; examples: a glob of TFRecord files of tf.Example.')
    flags.DEFINE_string('label', None, 'csv, examples: the column to predict.')
    flags.DEFINE_string('column_types', None, 'csv: NAME:TYPE,... (TYPE int, float, date, string or text) '
                        'for columns whose type read from the first rows is not the right one.')
    flags.DEFINE_enum('task', None, table_schema.TASKS, 'csv, examples: default: classification '
                      'for a text label or an int label with few values, else regression.')
    flags.DEFINE_string('weight_column', None, 'csv, examples: a number column weighing each row '
                        'in the loss and the metrics (e.g. larger for a rare class); not a '
                        'feature, not a serving input.')
    flags.DEFINE_list('ignore_columns', None, 'csv, examples: columns left out of the model: an '
                      'id, a name, a free-text note (prepare warns of a column that looks like '
                      'an id); with --schema_from, those the training data left out.')
    flags.DEFINE_string('delimiter', None, 'csv: the character between fields: , ; tab or | '
                        '(default: the one that splits the first lines into the most columns, '
                        'as many on each line).')
    flags.DEFINE_enum('decimal', None, ['.', ','], 'csv: the mark before a number\'s fraction '
                      '(default: , in a ;-separated file, as spreadsheets in such locales write '
                      'it, else .).')
    flags.DEFINE_enum('thousands', None, ['.', ','], 'csv: the mark grouping a number\'s '
                      'thousands, where it could be a decimal mark too (1,234 in a file of '
                      'decimal points); other groupings ("1,234.50", "$1,234", 1 234,50) are '
                      'read without it.')
    flags.DEFINE_enum('date_format', None, ['day/month/year', 'month/day/year'], 'csv: how '
                      'dates like 01/02/2024 read where the first rows do not tell (no day '
                      'above 12); ISO and 15.01.2024 dates need no flag.')
    flags.DEFINE_list('na_values', list(table_schema.DEFAULT_NA_VALUES), 'csv: the field values '
                      'that mark a missing value (an empty field always does).')
    flags.DEFINE_string('schema_from', None, 'csv, examples, images: prepared shards (their '
                        'folder or manifest.json) a model was trained on; this data is written '
                        'as that model reads it (with --split=test: a held-out set). csv: their '
                        'column types, --label, --task, --weight_column and --ignore_columns; '
                        'examples: the '
                        'same, a feature of another type refused; images: their classes\' '
                        'labels (a class folder they lack is refused), --image_size, --channels '
                        'and --resize.')
    flags.DEFINE_integer('max_vocabulary', 1000, 'csv, examples: a text column\'s most frequent '
                         'values kept as its vocabulary; the rest are out of vocabulary.',
                         lower_bound=1)


def hold_out(images, labels, count, seed):
    """Splits off `count` examples, chosen with `seed`, as the held-out part."""
    order = np.random.RandomState(seed).permutation(len(labels))
    held, kept = order[:count], order[count:]
    return (images[kept], labels[kept]), (images[held], labels[held])


def write_digit_splits(output_dir: str, dataset: str, splits: Dict, num_shards: int,
                       num_eval_shards: int, seed: int) -> Dict:
    entries = {}
    for split, (images, labels, sources) in splits.items():
        entries[split] = shards.write_split(
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
                  'face_pairs': prepare_faces.prepare_face_pairs, 'csv': csv_tables.prepare_csv,
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


if __name__ == '__main__':
    define_flags()
    cli.run(main, own_modules=[], user_errors=(UserError,),
            stopped_message='no half-written shard is left (each is renamed when complete, or '
                            'removed); run the same command again')
