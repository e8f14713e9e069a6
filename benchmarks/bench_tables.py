"""The bench's table rows (sections 12 and 13 of `./run.sh bench`); alone:
`python -m benchmarks.table_bench [--quick]` (benchmarks/table_bench.py).

On a generated CSV (--table_rows rows like a census table: 5 number and 4 text columns, a
few cells missing, a binary text label):
  12. `prepare csv` (counted once: rows/s), then an epoch of training input (examples/s):
      this service's input_fn over the prepared tf.Example shards against
      tf.data.experimental.make_csv_dataset reading the same CSV (header, label column,
      na_value), both batching --batch_size, shuffled and repeated, and against the same
      shards read as the other record kinds read theirs (records shuffled one at a time, each
      batch parsed), which the table input_fn's parsed windows replaced;
  13. dnn_classifier training (Estimator, float32) fed by that input_fn against the same batch
      held in memory: whether training a canned model from shards is input-bound.
`--table_csv_gb=1` instead measures prepare csv on a CSV of that size (benchmarks/large_csv.py).
"""
import os
import time

import numpy as np
import pyarrow.csv
import tensorflow as tf
from absl import flags

from benchmarks import precision_bench
from input_fns.records import file_patterns, pipeline
from input_fns.tables import prepare_csv, table_records

FLAGS = flags.FLAGS
# Targets from the runs in docs/bench.md#tables (2 cores beside other work). The shards parsed
# once and held in memory vs make_csv_dataset's text parsing every epoch: 9.2x and 12.2x (2.3x
# to 3.0x when the input_fn shuffled single records); 4x catches the lead lost.
INPUT_FN_VS_MAKE_CSV_DATASET = 4.0
# The same vs records shuffled one at a time: 3.3x and 3.7x; 2x catches per-record work back.
INPUT_FN_VS_RECORDS = 2.0
# dnn_classifier fed by the input_fn vs in memory: the bar (not input-bound). Medians of
# 0.82x to 1.42x in four runs, every 95% interval holding 1 (0.62x before the windows).
TRAINING_VS_IN_MEMORY = 0.95
HEADER = 'age,workclass,fnlwgt,education,hours per week,capital gain,score,occupation,city,income'
WORKCLASSES = np.array(['Private', 'Self-emp', 'State-gov', 'Local-gov', 'NA'])
EDUCATION = np.array(['HS-grad', 'Some-college', 'Bachelors', 'Masters', 'Doctorate'])
OCCUPATIONS = np.array([f'occupation-{i}' for i in range(14)])
CITIES = np.array([f'city-{i:03d}' for i in range(300)])


def define_flags():
    flags.DEFINE_integer('table_rows', 40_000, 'Table rows: rows of the generated CSV.',
                         lower_bound=100)
    # 1,000 steps (about a second): shorter turns measured the neighbours' load more than the step.
    flags.DEFINE_integer('table_train_steps', 1000, 'Training steps per timed repeat of a '
                         'dnn_classifier row.', lower_bound=1)
    flags.DEFINE_float('table_csv_gb', 0.0, 'Instead of the rows: prepare a generated CSV of '
                       'this many GB, reporting rows/s and peak RSS.', lower_bound=0.0)
    flags.DEFINE_enum('table_csv_kind', 'census', list(CSV_KINDS), 'The table --table_csv_gb '
                      'writes: census (10 columns) or wide (12 floats, 2 ints, 2 categories and '
                      'a label).')
    flags.DEFINE_string('table_csv_path', None, 'Where --table_csv_gb\'s CSV is: read if it is '
                        'there, else written there and kept (by default written under the '
                        'temporary folder and deleted after).')


def targets():
    """The table rows' targets, in bench_targets.fixed_targets' form."""
    return [
        ('tables: an epoch, input_fn vs make_csv_dataset', 'tables.input_fn',
         'tables.make_csv_dataset', INPUT_FN_VS_MAKE_CSV_DATASET, True),
        ('tables: an epoch, windows vs records one at a time', 'tables.input_fn',
         'tables.input_fn_records', INPUT_FN_VS_RECORDS, True),
        ('dnn_classifier: input_fn vs in-memory input', 'tables.train_input_fn',
         'tables.train_in_memory', TRAINING_VS_IN_MEMORY, True),
    ]


def csv_lines(rows: int, seed: int) -> str:
    """rows lines of the generated table (no header): the label depends on age, education and
    hours, with noise; about 100 bytes a row."""
    rng = np.random.RandomState(seed)
    age = rng.randint(17, 90, rows)
    education = rng.randint(0, len(EDUCATION), rows)
    hours = rng.choice([20, 35, 40, 40, 40, 45, 50, 60], rows)
    gain = np.where(rng.random_sample(rows) < 0.1, rng.randint(1000, 99999, rows), 0)
    label = (age / 40 + education / 2 + hours / 40 + rng.random_sample(rows)) > 3.0
    hours_text = np.where(rng.random_sample(rows) < 0.03, '', hours.astype(str))
    columns = [age.astype(str), rng.choice(WORKCLASSES, rows),
               rng.randint(10_000, 1_000_000, rows).astype(str), EDUCATION[education],
               hours_text, gain.astype(str), np.char.mod('%.5f', rng.random_sample(rows)),
               rng.choice(OCCUPATIONS, rows), rng.choice(CITIES, rows),
               np.where(label, '>50K', '<=50K')]
    return '\n'.join(','.join(row) for row in zip(*columns)) + '\n'


# The wide table (--table_csv_kind=wide): numbers and short text, as a sensor log or a feature
# export writes them; about 150 bytes a row.
WIDE_HEADER = ','.join([f'x{i}' for i in range(12)] + ['count', 'size', 'colour', 'shape',
                                                        'label'])
COLOURS = np.array(['red', 'green', 'blue', 'cyan', 'magenta', 'yellow', 'black', 'white'])
SHAPES = np.array([f'shape-{i}' for i in range(40)])


def wide_csv_lines(rows: int, seed: int) -> str:
    """rows lines of the wide table (no header): 12 floats (1% of x0 empty), 2 ints, 2
    categories and a class label of 3."""
    rng = np.random.RandomState(seed)
    numbers = rng.standard_normal((rows, 12)) * 10.0 ** rng.randint(-2, 4, 12)
    floats = [np.char.mod('%.6g', numbers[:, i]) for i in range(12)]
    floats[0] = np.where(rng.random_sample(rows) < 0.01, '', floats[0])
    label = np.digitize(numbers[:, 1] / numbers[:, 1].std() + rng.standard_normal(rows), [-1, 1])
    columns = floats + [rng.randint(0, 1000, rows).astype(str),
                        rng.randint(-50_000, 2_000_000, rows).astype(str),
                        rng.choice(COLOURS, rows), rng.choice(SHAPES, rows),
                        np.array(['low', 'mid', 'high'])[label]]
    return '\n'.join(','.join(row) for row in zip(*columns)) + '\n'


CSV_KINDS = {'census': (HEADER, csv_lines, 'income'), 'wide': (WIDE_HEADER, wide_csv_lines, 'label')}


def write_csv(path: str, rows: int = 0, gigabytes: float = 0.0, kind: str = 'census') -> int:
    """Writes the generated table of `kind` (CSV_KINDS) with its header: `rows` rows, or
    `gigabytes` GB of them; returns the rows written."""
    written, chunk = 0, 100_000
    header, lines, _ = CSV_KINDS[kind]
    with open(path, 'w') as f:
        f.write(header + '\n')
        while (written < rows) if rows else (f.tell() < gigabytes * 1e9):
            count = min(chunk, rows - written) if rows else chunk
            f.write(lines(count, seed=written))
            written += count
    return written


def make_csv_dataset(path: str, batch_size: int):
    """tf.data.experimental.make_csv_dataset as its users feed a CSV: header, label column,
    the missing marker, shuffled and repeated, parsing in parallel."""
    return tf.data.experimental.make_csv_dataset(
        path, batch_size, label_name='income', na_value='NA', num_epochs=None, shuffle=True,
        shuffle_buffer_size=10_000, shuffle_seed=0, num_parallel_reads=tf.data.AUTOTUNE)


def make_csv_pass(path: str, batch_size: int, label: str = 'income') -> int:
    """One pass of make_csv_dataset over the CSV, unshuffled: its parse; the rows read."""
    dataset = tf.data.experimental.make_csv_dataset(
        path, batch_size, label_name=label, na_value='NA', num_epochs=1, shuffle=False,
        num_parallel_reads=tf.data.AUTOTUNE)
    return sum(int(tf.shape(labels)[0]) for _, labels in dataset)


def table_rows(work_dir: str, results, measure, dataset_turn, training_turn) -> str:
    """Sections 12 and 13 into results (bench_report's Results, bench_sections' measure and
    dataset_turn, and a training_turn(spec, input_fn, batch_size)); returns what the data was."""
    source, data = os.path.join(work_dir, 'table.csv'), os.path.join(work_dir, 'table_shards')
    write_csv(source, rows=FLAGS.table_rows)
    started = time.perf_counter()
    prepare_csv.prepare_csv(source=source, label='income', output_dir=data, column_types=None,
                           task=None, na_values=['', 'NA'], max_vocabulary=1000,
                           weight_column=None, validation_fraction=0.0, num_shards=10,
                           num_eval_shards=1, seed=0)
    seconds = time.perf_counter() - started
    section, batch_size, megabytes = '12 tables', FLAGS.batch_size, os.path.getsize(source) / 1e6
    results.add('tables.prepare', section, 'prepare csv (one process): rows/s',
                [FLAGS.table_rows / seconds], 'rows/s',
                f'{megabytes / seconds:.1f} MB/s, {seconds:.1f} s with writing')
    for key, name, read in (('tables.arrow_parse', "pyarrow's read_csv, the parse alone",
                             lambda: pyarrow.csv.read_csv(source)),
                            ('tables.make_csv_dataset_pass', 'make_csv_dataset, one pass',
                             lambda: make_csv_pass(source, batch_size))):
        started = time.perf_counter()
        read()
        parse = time.perf_counter() - started
        results.add(key, section, f'{name}: rows/s', [FLAGS.table_rows / parse], 'rows/s',
                    f'{megabytes / parse:.1f} MB/s; prepare csv at {parse / seconds:.2f}x it')
    pattern = os.path.join(data, 'train-*')
    schema = file_patterns.read_schema(pattern, 'the bench')
    input_fn = table_records.make_input_fn(pattern, schema, batch_size, True)
    records_input_fn = pipeline.record_input_fn(
        pipeline.list_record_files(pattern), table_records.parse_batch_fn(schema), batch_size,
        True, windows=False)
    epoch = dict(repetitions=1, steps=FLAGS.table_rows // batch_size, warmup_steps=5)
    measure(results, section, [
        ('tables.input_fn', "an epoch: this service's input_fn on the table shards",
         dataset_turn(input_fn, batch_size, epoch), ''),
        ('tables.make_csv_dataset', 'an epoch: make_csv_dataset on the CSV',
         dataset_turn(lambda: make_csv_dataset(source, batch_size), batch_size, epoch),
         'parses the text every epoch'),
        ('tables.input_fn_records', 'an epoch: the shards, records shuffled one at a time',
         dataset_turn(records_input_fn, batch_size, epoch), "the other record kinds' way"),
    ], 'examples/s')
    measure(results, '13 canned DNN training', precision_bench.schema_model_rows(
        'tables', 'dnn_classifier', schema, input_fn, batch_size, training_turn), 'examples/s')
    return (f'generated: {FLAGS.table_rows:,} rows, 5 number and 4 text columns, binary label; '
            f'batch {batch_size}')
