"""The input-pipeline benchmark: `./run.sh bench` (python -m benchmarks.input_bench).

Measures, in one run, on the same data, in graph mode as the Estimator runs it
(warm-up, then the median of --repetitions):
  1. MNIST feeding: feed_dict, queue runners, FloatList one record at a time,
     this service's input_fn, and in-memory tensors (the upper bound);
  2. Estimator training of the MNIST CNN: this service's input_fn, in-memory
     input, feed_dict feeding;
  3. face pairs: the Python-generator way, the in-graph sampler, and the
     decode-only ceiling (tf.io.decode_jpeg on all cores);
  4. a CPU-heavy plain-Python function: tf.py_function vs worker processes;
  5. MNIST conversion: seconds and bytes, FloatList vs raw uint8 bytes;
  6. Estimator training of the MNIST CNN in float32, mixed_bfloat16, with XLA, and both
     (benchmarks/precision_bench.py).
Prints a table and the targets, and writes everything to --output_json. Uses
--data_dir/mnist and --data_dir/lfw-devtrain/lfw when they are there, synthetic
data of the same shapes when not, and says which.
"""
import glob
import os
import platform
import shutil
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import flags, logging

from benchmarks import baselines, precision_bench, python_work
from common import cli, files
from input_fns import (digit_sources, face_images, face_pairs, face_records, image_records,
                       lfw_files, parallel_python, prepare, prepare_faces, shards, synthetic_faces)
from models import registry
from trainer.observe import timing
from trainer.run import benchmark_input

FLAGS = flags.FLAGS
IMAGE_SHAPE = (28, 28, 1)
FACE_GEOMETRY = face_images.FaceGeometry(image_size=64, channels=1, crop_fraction=0.5)
TARGETS = [  # (what, numerator row, denominator row, target, at least (True) or at most)
    ('MNIST input_fn vs one record at a time', 'mnist.input_fn', 'mnist.floatlist', 5.0, True),
    ('MNIST input_fn vs in-memory tensors', 'mnist.input_fn', 'mnist.in_memory', 0.8, True),
    ('Estimator: input_fn vs in-memory input', 'train.input_fn', 'train.in_memory', 0.97, True),
    ('face pairs: sampler vs generator', 'faces.sampler', 'faces.generator', 1.8, True),
    ('face pairs: sampler vs decode-only ceiling', 'faces.sampler', 'faces.decode_only', 0.7, True),
    ('Python preprocessing: workers vs py_function', 'python.workers', 'python.py_function', 1.8,
     True),
    ('shard bytes vs raw pixel bytes', 'convert.raw_bytes', 'convert.pixel_bytes', 1.1, False),
    ('training: best of bfloat16/XLA vs float32', precision_bench.FASTER_KEYS,
     'precision.float32', 1.5, True),
]


def define_flags():
    flags.DEFINE_string('data_dir', '../shared/data', 'Real data: mnist/ (IDX files) and '
                        'lfw-devtrain/lfw/; synthetic data of the same shapes when absent.')
    flags.DEFINE_string('output_json', 'runs/bench/input_bench.json', 'Where the results go.')
    flags.DEFINE_integer('mnist_examples', 60_000, 'MNIST images to use (the subset size).',
                         lower_bound=100)
    flags.DEFINE_integer('face_people', 1000, 'LFW people to use (about 2.4 photos each).',
                         lower_bound=4)
    flags.DEFINE_integer('batch_size', 100, 'MNIST batch size.', lower_bound=1)
    flags.DEFINE_integer('pair_batch_size', 64, 'Face pairs and Python examples per batch.',
                         lower_bound=1)
    flags.DEFINE_integer('repetitions', 5, 'Timed repetitions per row (the median is reported).',
                         lower_bound=1)
    flags.DEFINE_float('seconds', 2.0, 'Length of each timed repetition of a feeding row.',
                       lower_bound=0.01)
    flags.DEFINE_float('warmup_seconds', 1.0, 'Warm-up before each feeding row is timed.',
                       lower_bound=0.0)
    flags.DEFINE_integer('train_steps', 10, 'Training steps per timed repetition (Estimator rows).',
                         lower_bound=1)
    flags.DEFINE_integer('warmup_steps', 5, 'Training steps before timing (Estimator rows).',
                         lower_bound=1)


def num_cores() -> int:
    return parallel_python.default_num_workers()


def progress(message):
    print(f'[{time.strftime("%H:%M:%S")}] {message}', file=sys.stderr, flush=True)


class Results:
    def __init__(self):
        self.rows = []

    def add(self, key, section, name, value, unit, rate=None, note=''):
        self.rows.append({'key': key, 'section': section, 'name': name, 'value': value,
                          'unit': unit, 'repetitions': rate.repetitions if rate else None,
                          'note': note})
        progress(f'{section} | {name}: {value:,.1f} {unit}')

    def value(self, key):
        return next(row['value'] for row in self.rows if row['key'] == key)


def feeding_timing():
    return dict(repetitions=FLAGS.repetitions, seconds=FLAGS.seconds, warmup_steps=5,
                warmup_seconds=FLAGS.warmup_seconds)


# ------------------------------------------------------------------ data


def load_mnist():
    folder = os.path.join(FLAGS.data_dir, 'mnist')
    if os.path.isdir(folder):
        images, labels, _ = digit_sources.load_mnist(folder)['train']
        source = f'real: {folder}'
    else:
        rng = np.random.RandomState(0)
        images = rng.randint(0, 256, (FLAGS.mnist_examples, 28, 28)).astype(np.uint8)
        labels = rng.randint(0, 10, FLAGS.mnist_examples).astype(np.uint8)
        source = f'synthetic ({folder} not found): random 28x28 uint8 images'
    images, labels = images[:FLAGS.mnist_examples], labels[:FLAGS.mnist_examples]
    return images, labels, f'{source}, {len(labels):,} images'


def face_photo_root(work_dir):
    """A folder of --face_people people in LFW's layout: real LFW people (linked), or synthetic."""
    lfw = os.path.join(FLAGS.data_dir, 'lfw-devtrain', 'lfw')
    root = os.path.join(work_dir, 'faces')
    os.makedirs(root)
    if os.path.isdir(lfw):
        names = sorted(lfw_files.scan_people(lfw))
        step = max(1, len(names) // FLAGS.face_people)
        for name in names[::step][:FLAGS.face_people]:  # spread over the alphabet
            os.symlink(os.path.abspath(os.path.join(lfw, name)), os.path.join(root, name))
        source = f'real: {lfw}'
    else:
        synthetic_faces.write_faces(root, FLAGS.face_people, size=250, seed=0)
        source = f'synthetic ({lfw} not found): rendered 250x250 JPEG faces'
    photos = sum(len(p) for p in lfw_files.scan_people(root).values())
    return root, f'{source}, {len(os.listdir(root))} people, {photos} photos'


def total_bytes(files):
    return sum(os.path.getsize(f) for f in files)


# ------------------------------------------------------------------ sections


def convert_mnist(images, labels, work_dir, results):
    """5. MNIST conversion, raw uint8 bytes (this service) vs FloatList; returns both file lists."""
    raw_dir, float_dir = os.path.join(work_dir, 'mnist_raw'), os.path.join(work_dir, 'mnist_float')
    start = time.perf_counter()
    prepare.write_digit_splits(raw_dir, 'mnist', {'train': (images, labels, ['bench'])},
                               num_shards=10, num_eval_shards=1, seed=0)
    raw_seconds = time.perf_counter() - start
    start = time.perf_counter()
    shards.write_split(float_dir, 'train', len(labels),
                       lambda i: baselines.encode_floatlist_example(images[i], labels[i]),
                       num_shards=10, seed=0, dataset='mnist_floatlist',
                       features={'image': 'float list', 'label': 'int64'}, sources=['bench'])
    float_seconds = time.perf_counter() - start
    raw_files = sorted(glob.glob(os.path.join(raw_dir, 'train-*')))
    float_files = sorted(glob.glob(os.path.join(float_dir, 'train-*')))
    section = '5 MNIST conversion'
    results.add('convert.raw_seconds', section, 'raw uint8 bytes (this service): seconds',
                raw_seconds, 's')
    results.add('convert.float_seconds', section, 'FloatList: seconds', float_seconds, 's')
    results.add('convert.pixel_bytes', section, 'raw pixels (N x 784 bytes)', images.size, 'bytes')
    results.add('convert.raw_bytes', section, 'raw uint8 bytes (this service): on disk',
                total_bytes(raw_files), 'bytes')
    results.add('convert.float_bytes', section, 'FloatList: on disk', total_bytes(float_files),
                'bytes')
    return raw_files, float_files


def mnist_feeding(images, labels, raw_files, float_files, results):
    """1. Examples/sec delivered to a session by each way of feeding MNIST."""
    batch_size, section = FLAGS.batch_size, '1 MNIST feeding'
    examples = lambda rate: rate.per_sec * batch_size  # noqa: E731
    pixels = baselines.float_images(images)
    rate = baselines.feed_dict_rate(baselines.NumpyBatches(pixels, labels.astype(np.int32),
                                                           batch_size), **feeding_timing())
    results.add('mnist.feed_dict', section, 'feed_dict from NumPy', examples(rate),
                'examples/s', rate)
    rate = baselines.queue_runner_rate(raw_files, IMAGE_SHAPE, batch_size, num_cores(),
                                       **feeding_timing())
    results.add('mnist.queue_runners', section, 'queue runners, shuffle_batch', examples(rate),
                'examples/s', rate, f'{num_cores()} reader threads')
    rate = timing.dataset_rate(lambda: baselines.floatlist_dataset(float_files, batch_size),
                               **feeding_timing())
    results.add('mnist.floatlist', section, 'FloatList, parse_single_example one at a time',
                examples(rate), 'examples/s', rate)
    input_fn = image_records.make_input_fn(','.join(raw_files), IMAGE_SHAPE, batch_size, True)
    rate = timing.dataset_rate(input_fn, **feeding_timing())
    results.add('mnist.input_fn', section, "this service's input_fn", examples(rate),
                'examples/s', rate)
    rate = timing.dataset_rate(lambda: baselines.in_memory_dataset(images, labels, batch_size),
                               **feeding_timing())
    results.add('mnist.in_memory', section, 'in-memory tensors (upper bound)', examples(rate),
                'examples/s', rate, 'decoded, shuffled and batched the same way')


def estimator_training(images, labels, raw_files, work_dir, results):
    """2. Examples/sec of Estimator training of the MNIST CNN, fed three ways."""
    spec, batch_size, section = registry.get('mnist_cnn'), FLAGS.batch_size, '2 Estimator training'
    input_fn = image_records.make_input_fn(','.join(raw_files), IMAGE_SHAPE, batch_size, True)
    batches = baselines.NumpyBatches(baselines.float_images(images), labels.astype(np.int32),
                                     batch_size)
    ways = [('train.input_fn', "this service's input_fn", input_fn, []),
            ('train.in_memory', 'synthetic in-memory input',
             benchmark_input.in_memory_input_fn(input_fn), []),
            ('train.feed_dict', 'feed_dict feeding (a hook feeds NumPy batches)',
             baselines.feed_dict_input_fn(IMAGE_SHAPE), [baselines.FeedDictHook(batches)])]
    for key, name, way_input_fn, hooks in ways:
        model_dir = tempfile.mkdtemp(dir=work_dir)
        estimator = timing.timing_estimator(spec.model_fn, spec.default_params, model_dir)
        rate = timing.training_rate(estimator, way_input_fn, FLAGS.train_steps,
                                    FLAGS.repetitions, FLAGS.warmup_steps, hooks)
        results.add(key, section, f'MNIST CNN, {name}', rate.per_sec * batch_size, 'examples/s',
                    rate)
    precision_bench.precision_rows(input_fn, batch_size, work_dir, results, FLAGS.train_steps,
                                   FLAGS.repetitions, FLAGS.warmup_steps)


def face_pair_rows(work_dir, results):
    """3. Training pairs/sec: the generator way, the in-graph sampler, and decode-only."""
    root, source = face_photo_root(work_dir)
    shard_dir = os.path.join(work_dir, 'face_shards')
    prepare_faces.prepare_faces(
        source_dir=root, output_dir=shard_dir, validation_fraction=0.0, train_people_file=None,
        num_pairs=0, pair_folds=1, strict=False, seed=0, num_shards=4, num_eval_shards=1)
    files = sorted(glob.glob(os.path.join(shard_dir, 'train-*')))
    index = face_pairs.read_photo_index(files)
    batch_size, section = FLAGS.pair_batch_size, '3 face pairs'
    pairs = lambda rate: rate.per_sec * batch_size  # noqa: E731
    rate = timing.dataset_rate(lambda: face_pairs.generator_pairs_dataset(
        index, FACE_GEOMETRY, batch_size), **feeding_timing())
    results.add('faces.generator', section, 'Python generator of paths, map to read and decode',
                pairs(rate), 'pairs/s', rate)
    rate = timing.dataset_rate(lambda: face_pairs.sampled_pairs_dataset(
        files, index, FACE_GEOMETRY, batch_size), **feeding_timing())
    results.add('faces.sampler', section, "this service's in-graph sampler", pairs(rate),
                'pairs/s', rate)
    jpegs = [record['image'] for record in tf.data.TFRecordDataset(files).map(
        lambda s: tf.io.parse_single_example(s, {'image': face_records.PHOTO_SPEC['image']}))
        .as_numpy_iterator()]

    def decode_only():
        def decode(jpeg):  # one pixel of each photo: photos of any size batch together
            return tf.io.decode_jpeg(jpeg, channels=FACE_GEOMETRY.channels)[0, 0]

        photos = tf.data.Dataset.from_tensor_slices(jpegs).repeat()
        photos = photos.map(decode, num_parallel_calls=num_cores(), deterministic=False)
        return photos.batch(2 * batch_size)

    rate = timing.dataset_rate(decode_only, **feeding_timing())
    results.add('faces.decode_only', section, 'decode-only ceiling: decode_jpeg on all cores',
                rate.per_sec * batch_size, 'pairs/s', rate, 'whole photos decoded per second / 2')
    return source


def python_preprocessing(results):
    """4. A CPU-heavy plain-Python function: tf.py_function vs worker processes."""
    signature = (tf.TensorSpec([python_work.SIZE, python_work.SIZE], tf.float32),
                 tf.TensorSpec([], tf.int32))
    batch_size, section = FLAGS.pair_batch_size, '4 Python preprocessing'
    rate = timing.dataset_rate(lambda: baselines.py_function_dataset(
        python_work.blurred_example, signature, batch_size), **feeding_timing())
    results.add('python.py_function', section, 'tf.py_function, num_parallel_calls=AUTOTUNE',
                rate.per_sec * batch_size, 'examples/s', rate)
    rate = timing.dataset_rate(lambda: parallel_python.parallel_map(
        python_work.blurred_example, range(2 ** 62), signature, ordered=False)
        .batch(batch_size).prefetch(tf.data.AUTOTUNE), **feeding_timing())
    results.add('python.workers', section,
                f'parallel_python.parallel_map, {num_cores()} worker processes',
                rate.per_sec * batch_size, 'examples/s', rate)


# ------------------------------------------------------------------ report


def check_targets(results):
    checked = []
    for what, numerator, denominator, target, at_least in TARGETS:
        best = max(results.value(key) for key in (
            numerator if isinstance(numerator, tuple) else (numerator,)))  # the best of several
        ratio = best / results.value(denominator)
        met = ratio >= target if at_least else ratio <= target
        checked.append({'target': what, 'ratio': ratio,
                        'wanted': f'{">=" if at_least else "<="} {target}x',
                        'met': bool(met)})
    return checked


def format_value(value, unit):
    return f'{value:,.2f}' if unit == 's' else f'{value:,.0f}'


def report(results, header, targets) -> str:
    lines = header + ['']
    width = max(len(row['name']) for row in results.rows)
    for section in sorted({row['section'] for row in results.rows}):
        lines.append(section)
        for row in (r for r in results.rows if r['section'] == section):
            note = f'  ({row["note"]})' if row['note'] else ''
            lines.append(f'  {row["name"]:<{width}}  {format_value(row["value"], row["unit"]):>14} '
                         f'{row["unit"]}{note}')
    lines += ['', 'targets']
    width = max(len(t['target']) for t in targets)
    for t in targets:
        lines.append(f'  {t["target"]:<{width}}  {t["ratio"]:7.2f}x  wanted {t["wanted"]:<8} '
                     f'{"met" if t["met"] else "SHORT"}')
    return '\n'.join(lines)


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    tf.get_logger().setLevel('ERROR')
    started = time.time()
    work_dir = tempfile.mkdtemp(prefix='input_bench-')
    results = Results()
    try:
        images, labels, mnist_source = load_mnist()
        progress(f'MNIST: {mnist_source}')
        raw_files, float_files = convert_mnist(images, labels, work_dir, results)
        mnist_feeding(images, labels, raw_files, float_files, results)
        estimator_training(images, labels, raw_files, work_dir, results)
        face_source = face_pair_rows(work_dir, results)
        python_preprocessing(results)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    elapsed = time.time() - started
    machine = {'cores_usable': num_cores(), 'cpu_count': os.cpu_count(),
               'processor': platform.processor() or platform.machine(),
               'tensorflow': tf.__version__, 'python': platform.python_version()}
    settings = {name: getattr(FLAGS, name) for name in (
        'mnist_examples', 'face_people', 'batch_size', 'pair_batch_size', 'repetitions', 'seconds',
        'warmup_seconds', 'train_steps', 'warmup_steps')}
    header = [
        f'input pipeline benchmark: {machine["cores_usable"]} usable cores ({machine["cpu_count"]} '
        f'CPUs), TensorFlow {machine["tensorflow"]}, graph mode (tf.compat.v1.Session), medians '
        f'of {FLAGS.repetitions} after warm-up; {elapsed:.0f} s in all',
        f'MNIST: {mnist_source}; batch {FLAGS.batch_size}',
        f'faces: {face_source}; batch {FLAGS.pair_batch_size} pairs, '
        f'{FACE_GEOMETRY.image_size}x{FACE_GEOMETRY.image_size} grayscale',
    ]
    targets = check_targets(results)
    print(report(results, header, targets), flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output_json)), exist_ok=True)
    files.write_json_atomic(FLAGS.output_json, {
        'machine': machine, 'settings': settings, 'wall_seconds': elapsed,
        'data': {'mnist': mnist_source, 'faces': face_source},
        'rows': results.rows, 'targets': targets})
    print(f'\nwrote {FLAGS.output_json}')


if __name__ == '__main__':
    define_flags()
    cli.run(main, own_modules=[])  # bad flags: one line, exit 2
