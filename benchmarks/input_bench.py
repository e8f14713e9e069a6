"""The input-pipeline benchmark: `./run.sh bench` (python -m benchmarks.input_bench).

First the machine: CPU, TensorFlow build, threads, and the ceiling, dense matmul GFLOP/s
per precision (benchmarks/machine.py). Then, in one run, on the same data, in graph mode
as the Estimator runs it, the rows of each section interleaved (A B C, C B A, ...,
--repetitions rounds, each turn warmed up; benchmarks/repeats.py):
  1. MNIST feeding: feed_dict, queue runners, FloatList one record at a time,
     this service's input_fn, and in-memory tensors (the upper bound);
  2. Estimator training of the MNIST CNN: this service's input_fn, in-memory
     input, feed_dict feeding;
  3. face pairs: the Python-generator way, the in-graph sampler that held every photo
     in memory, this service's streaming sampler, and the decode-only ceiling
     (tf.io.decode_jpeg on all cores); then each sampler's peak RSS on the face data
     and on --face_memory_scale times its people;
  4. a CPU-heavy plain-Python function: tf.py_function vs worker processes;
  5. MNIST conversion: seconds and bytes, FloatList vs raw uint8 bytes;
  6. Estimator training of the MNIST CNN in float32, mixed_bfloat16, with XLA, and both
     (float32 and mixed_bfloat16 again at --larger_batch_size), and 7. the same for
     face_embedding on pairs held in memory (benchmarks/precision_bench.py), each among
     turns of the matmul ceiling;
  8. training against the ceiling: GFLOP/s of every 6. and 7. row, from the training FLOPs
     per example (benchmarks/flops.py), as a fraction of the same round's ceiling;
  9. the MNIST CNN at each intra-op and inter-op thread setting;
  10. and 11. image folders: prepare images, an epoch from its shards vs
     tf.keras.utils.image_dataset_from_directory on the same tree, and image_classifier
     training from them vs in memory (benchmarks/bench_images.py; alone:
     python -m benchmarks.image_bench);
  12. and 13. tables: prepare csv, an epoch from its shards vs
     tf.data.experimental.make_csv_dataset on the same CSV, and dnn_classifier training from
     them vs in memory (benchmarks/bench_tables.py; alone: python -m benchmarks.table_bench).
Prints a table and the targets (met, SHORT, or not resolved when the 95% interval of the
median ratio holds the target), and writes everything, every repeat, to --output_json. Uses
--data_dir/mnist and --data_dir/lfw-devtrain/lfw when they are there, synthetic
data of the same shapes when not, and says which.
"""
import os
import shutil
import tempfile
import time

import tensorflow as tf
from absl import flags, logging

from benchmarks import bench_images, bench_sections, bench_tables, flops, machine, precision_bench
from benchmarks.bench_data import load_mnist
from benchmarks.bench_report import Results, progress, report
from benchmarks.bench_sections import FACE_GEOMETRY
from benchmarks.bench_targets import check_targets
from common import atomic_writes, cli

FLAGS = flags.FLAGS
SECTIONS = ('mnist', 'faces', 'python', 'images', 'tables')


def define_flags():
    flags.DEFINE_string('data_dir', '../shared/data', 'Real data: mnist/ (IDX files) and '
                        'lfw-devtrain/lfw/; synthetic data of the same shapes when absent.')
    flags.DEFINE_string('output_json', 'runs/bench/input_bench.json', 'Where the results go.')
    flags.DEFINE_integer('mnist_examples', 60_000, 'MNIST images to use (the subset size).',
                         lower_bound=100)
    flags.DEFINE_integer('face_people', 1000, 'LFW people to use (about 2.4 photos each).',
                         lower_bound=4)
    flags.DEFINE_integer('face_memory_scale', 10, 'The face memory rows: peak RSS on the face '
                         'data and on this many times its people (copies under new names); '
                         '0: no memory rows.', lower_bound=0)
    flags.DEFINE_bool('emulated_bfloat16', False, 'Time the mixed_bfloat16 training rows on '
                      'a CPU without AVX512-BF16 or AMX too, where bfloat16 is emulated (about '
                      '13x slower than float32: most of the run). Always timed on a GPU or a '
                      'CPU with bfloat16 units.')
    flags.DEFINE_integer('batch_size', 100, 'MNIST batch size.', lower_bound=1)
    flags.DEFINE_integer('pair_batch_size', 64, 'Face pairs and Python examples per batch.',
                         lower_bound=1)
    flags.DEFINE_integer('repetitions', 9, 'Interleaved rounds: timed repeats per row (the '
                         'median is reported, with its 95% interval; 9 is the fewest rounds '
                         'whose interval is narrower than their whole range).', lower_bound=1)
    flags.DEFINE_float('seconds', 2.0, 'Length of each timed repeat of a feeding row.',
                       lower_bound=0.01)
    flags.DEFINE_float('warmup_seconds', 1.0, 'Warm-up in each turn of a feeding row.',
                       lower_bound=0.0)
    flags.DEFINE_integer('train_steps', 40, 'Training steps per timed repeat of an MNIST '
                         'Estimator row (about 1 to 2 s on 2 cores).', lower_bound=1)
    flags.DEFINE_integer('pair_train_steps', 10, 'Training steps per timed repeat of a '
                         'face_embedding row (about 3 to 5 s on 2 cores).', lower_bound=1)
    flags.DEFINE_integer('larger_batch_size', 200, 'The MNIST CNN in float32 and '
                         'mixed_bfloat16 again at this batch size: what the batch buys '
                         '(0: leave out).', lower_bound=0)
    flags.DEFINE_integer('warmup_steps', 5, 'Training steps before each timed repeat '
                         '(Estimator rows).', lower_bound=1)
    for name in ('intra_op_threads', 'inter_op_threads'):
        flags.DEFINE_integer(name, 0, "The trainer's flag, for the training rows and the "
                             'ceiling; 0: TensorFlow decides.', lower_bound=0)
    flags.DEFINE_integer('ceiling_size', 2048, 'The ceiling: side of the square matmul.',
                         lower_bound=16)
    flags.DEFINE_integer('ceiling_runs', 5, 'The ceiling: timed runs per precision (the best '
                         'is reported).', lower_bound=1)
    flags.DEFINE_float('ceiling_seconds', 1.0, 'The ceiling: length of each run.',
                       lower_bound=0.001)
    flags.DEFINE_bool('quick', False, 'A short run for development: ' + ', '.join(
        f'--{name}={value}' for name, value in QUICK.items()) + ' (flags given win).')
    bench_images.define_flags()
    bench_tables.define_flags()


# --quick: fewer rounds than a figure to report needs.
QUICK = {'mnist_examples': 5000, 'face_people': 200, 'repetitions': 3, 'seconds': 0.3,
         'warmup_seconds': 0.2, 'train_steps': 5, 'pair_train_steps': 3, 'warmup_steps': 3,
         'ceiling_size': 1024, 'ceiling_runs': 2, 'ceiling_seconds': 0.3, 'image_photos': 300,
         'image_train_steps': 3, 'table_rows': 5000, 'table_train_steps': 20}


def apply_quick():
    for name, value in QUICK.items():
        if not FLAGS[name].present:
            FLAGS[name].value = value


def measure_machine():
    """The machine, and its ceiling at the bench's thread settings."""
    described = machine.describe(FLAGS.intra_op_threads, FLAGS.inter_op_threads)
    progress(f'ceiling: {FLAGS.ceiling_size}x{FLAGS.ceiling_size} matmuls')
    ceiling = machine.ceiling(FLAGS.ceiling_size, FLAGS.ceiling_runs, FLAGS.ceiling_seconds,
                              FLAGS.intra_op_threads, FLAGS.inter_op_threads)
    return described, ceiling


def count_flops():
    """Training FLOPs per example of each model with precision rows: the profiler's, and
    the layer shapes' (which tests/test_flops.py checks are the same for the convolutions
    and matmuls). A face_embedding example is a pair."""
    counted = {}
    for model, batch_size, larger in (
            (precision_bench.MNIST, FLAGS.batch_size, FLAGS.larger_batch_size),
            (precision_bench.FACES, FLAGS.pair_batch_size, 0)):
        by_type = flops.graph_float_ops(model.name, batch_size)
        per_example = sum(by_type.values()) / batch_size
        by_batch = {batch_size: per_example}
        if larger and larger != batch_size:  # counted again at that batch, not assumed
            by_batch[larger] = sum(flops.graph_float_ops(model.name, larger).values()) / larger
        counted[model.name] = {
            'batch_size': batch_size, 'profiler_per_example': per_example,
            'layer_shapes_per_example': flops.exact_training_flops(model.name, batch_size),
            'profiler_by_op_type': by_type, 'profiler_per_example_by_batch': by_batch}
    return counted


def training_turns(work_dir, steps):
    """training_turn(spec, input_fn, batch_size) for a section's rows: float32, `steps` a turn."""
    return lambda spec, input_fn, batch_size: precision_bench.training_turn(
        spec, input_fn, batch_size, bench_sections.thread_plan(), work_dir, steps,
        FLAGS.warmup_steps)


def run_sections(work_dir, results, sections):
    data = {}
    if 'mnist' in sections:
        images, labels, data['mnist'] = load_mnist()
        progress(f'MNIST: {data["mnist"]}')
        raw_files, float_files = bench_sections.convert_mnist(images, labels, work_dir, results)
        bench_sections.mnist_feeding(images, labels, raw_files, float_files, results)
        bench_sections.estimator_training(images, labels, raw_files, work_dir, results)
    if 'faces' in sections:
        data['faces'] = bench_sections.face_pair_rows(work_dir, results)
    if 'python' in sections:
        bench_sections.python_preprocessing(results)
    if 'images' in sections:
        data['images'] = bench_images.image_rows(
            work_dir, results, bench_sections.measure, bench_sections.dataset_turn,
            training_turns(work_dir, FLAGS.image_train_steps))
    if 'tables' in sections:
        data['tables'] = bench_tables.table_rows(
            work_dir, results, bench_sections.measure, bench_sections.dataset_turn,
            training_turns(work_dir, FLAGS.table_train_steps))
    return data


def main(argv, sections=SECTIONS):
    """sections: all of SECTIONS (`./run.sh bench`), or some (python -m benchmarks.image_bench,
    python -m benchmarks.table_bench)."""
    del argv
    if FLAGS.quick:
        apply_quick()
    logging.set_verbosity(logging.WARNING)
    tf.get_logger().setLevel('ERROR')
    started = time.time()
    described, ceiling = measure_machine()
    counted = count_flops() if 'mnist' in sections else {}
    work_dir = tempfile.mkdtemp(prefix='input_bench-')
    results = Results()
    try:
        data = run_sections(work_dir, results, sections)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    precision_bench.against_ceiling(
        results, {name: count['profiler_per_example_by_batch'] for name, count in counted.items()},
        {name: count['batch_size'] for name, count in counted.items()})
    elapsed = time.time() - started
    settings = {name: getattr(FLAGS, name) for name in (
        'mnist_examples', 'face_people', 'batch_size', 'pair_batch_size', 'repetitions',
        'seconds', 'warmup_seconds', 'train_steps', 'pair_train_steps',
        'larger_batch_size', 'warmup_steps', 'intra_op_threads', 'inter_op_threads',
        'ceiling_size', 'ceiling_runs', 'ceiling_seconds', 'face_memory_scale',
        'emulated_bfloat16', 'quick')}
    bfloat16_left_out = ('mnist' in sections and not precision_bench.bfloat16_rows_wanted(
        machine.has_gpu(), FLAGS.emulated_bfloat16))
    header = machine.report_lines(described, ceiling) + [
        f'training FLOPs per example, {name}: {count["profiler_per_example"] / 1e6:,.2f} M '
        f'(profiler, training step at batch {count["batch_size"]}'
        + ''.join(f'; {value / 1e6:,.2f} M at batch {size}' for size, value in
                  count['profiler_per_example_by_batch'].items() if size != count['batch_size'])
        + '), '
        f'{count["layer_shapes_per_example"] / 1e6:,.2f} M (layer shapes: convolutions and '
        'matmuls)' for name, count in counted.items()] + [
        f'rows: graph mode (tf.compat.v1.Session), each section\'s rows interleaved for '
        f'{FLAGS.repetitions} rounds after warm-up{" (--quick)" if FLAGS.quick else ""}; '
        f'median +- half its 95% interval; {elapsed:.0f} s in all',
    ] + ([
        'mixed_bfloat16 training rows left out: this CPU has no AVX512-BF16 or AMX, so '
        'bfloat16 is emulated (compare the ceiling\'s two dtypes) and --precision=auto picks '
        'float32; --emulated_bfloat16 times them anyway'] if bfloat16_left_out else []) + [{
        'mnist': f'MNIST: {data.get("mnist")}; batch {FLAGS.batch_size}',
        'faces': f'faces: {data.get("faces")}; batch {FLAGS.pair_batch_size} pairs, '
                 f'{FACE_GEOMETRY.image_size}x{FACE_GEOMETRY.image_size} grayscale; '
                 'face_embedding trains on random 96x96 pairs held in memory',
        'images': f'image folders: {data.get("images")}',
        'tables': f'tables: {data.get("tables")}'}[name] for name in data]
    checked, not_judged = check_targets(results, FLAGS.larger_batch_size)
    print(report(results, header, checked, not_judged), flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output_json)), exist_ok=True)
    atomic_writes.write_json_atomic(FLAGS.output_json, {
        'machine': {**described, 'ceiling': ceiling}, 'settings': settings,
        'wall_seconds': elapsed, 'data': data, 'flops': counted,
        'rows': results.rows, 'targets': checked, 'targets_not_judged': not_judged})
    print(f'\nwrote {FLAGS.output_json}')


if __name__ == '__main__':
    define_flags()
    cli.run(main, own_modules=[])  # bad flags: one line, exit 2
