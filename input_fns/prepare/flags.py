"""The flags of `python -m input_fns.prepare` (its docstring shows them at work), in two groups:
those of every data set, and those of tables (csv, examples; images read --label and
--schema_from too)."""
from absl import flags

from input_fns.images import image_records
from input_fns.tables import csv_records, table_reading, table_schema


def define_flags():
    flags.DEFINE_string('source_dir', None, 'mnist: folder with IDX files (gzipped or not) or '
                        'mnist.npz, or the path of an .npz file. faces, face_pairs: a folder of '
                        'photos a person, ROOT/<person>/<photo> (LFW: ROOT/<Name>/<Name>_0001.jpg, '
                        'or the folder holding lfw/). '
                        'images: ROOT/<class>/<image>, one sub-folder per class (or the images '
                        '--labels_file names).')
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
    flags.DEFINE_enum('stored_as', image_records.PIXELS, list(image_records.STORED_FORMS),
                      'images: the shards hold raw pixels (training decodes nothing) or each photo '
                      'as a JPEG again, quality 95 (fewer bytes, decoded every epoch).')
    flags.DEFINE_bool('skip_bad_images', False, 'images: skip and count files that do not decode '
                      '(listed in manifest.json) instead of stopping at the first.')
    flags.DEFINE_integer('decode_workers', 0, 'images: worker processes decoding the images; 0: '
                         'one per CPU core; 1: none, decoded in the prepare process.', lower_bound=0)
    flags.DEFINE_integer('seed', 0, 'Seed for the hold-out split and the record order: every '
                         'split is written in a random order over all its records, the same for '
                         'the same seed and records (manifest.json records it).')


def define_table_flags():
    """The flags of csv and examples (a user's table)."""
    flags.DEFINE_string('source', None, 'csv: a CSV file with a header (.csv or .csv.gz) or a '
                        'glob of them; examples: a glob of TFRecord files of tf.Example.')
    flags.DEFINE_string('label', None, 'csv, examples: the column to predict; images with '
                        '--labels_file: its class column (default: the second of two).')
    flags.DEFINE_string('labels_file', None, 'images: a CSV naming each image (its path below '
                        '--source_dir, with or without its extension) in its first column and '
                        'its class in another, in place of class folders.')
    flags.DEFINE_string('column_types', None, 'csv: NAME:TYPE,... (TYPE int, float, date, string '
                        'or text) '
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
    flags.DEFINE_string('encoding', None, 'csv and --labels_file: the text encoding the file was '
                        'saved in where it is not UTF-8 (default; a byte-order mark is dropped) '
                        'or UTF-16 with its byte-order mark (read as such): e.g. cp1252, which '
                        'Excel on Windows writes as "CSV (Comma delimited)".')
    flags.DEFINE_enum('thousands', None, ['.', ','], 'csv: the mark grouping a number\'s '
                      'thousands, where it could be a decimal mark too (1,234 in a file of '
                      'decimal points); other groupings ("1,234.50", "$1,234", 1 234,50) are '
                      'read without it.')
    flags.DEFINE_string('sheet', None, 'csv: the sheet of an Excel workbook (.xlsx) to read, by '
                        'its name (default: the first).')
    flags.DEFINE_enum('date_format', None, ['day/month/year', 'month/day/year'], 'csv: how '
                      'dates like 01/02/2024 or 01/02/24 read where the first rows do not tell '
                      '(no day above 12); ISO and 15.01.2024 dates need no flag.')
    flags.DEFINE_list('na_values', None, 'csv: the field values that mark a missing value (an '
                      'empty field always does; default: '
                      f'{",".join(filter(None, table_schema.DEFAULT_NA_VALUES))}, or with '
                      '--schema_from the training data\'s); kept in the schema, so predict reads '
                      'them as missing too.')
    flags.DEFINE_enum('float_overflow', None, list(table_reading.FLOAT_OVERFLOWS), 'csv: a value '
                      'of a float column beyond float32\'s range (±3.4e38), which the records '
                      'hold: error (default; or with --schema_from the training data\'s) stops '
                      'prepare naming its row; inf stores it as inf of its sign (the statistics '
                      'are of the finite values).')
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
