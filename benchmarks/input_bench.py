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
     training from them vs in memory (benchmarks/image_bench.py; alone:
     python -m benchmarks.image_bench);
  12. and 13. tables: prepare csv, an epoch from its shards vs
     tf.data.experimental.make_csv_dataset on the same CSV, and dnn_classifier training from
     them vs in memory (benchmarks/table_bench.py; alone: python -m benchmarks.table_bench).
Prints a table and the targets (met, SHORT, or not resolved when the 95% interval of the
median ratio holds the target), and writes everything, every repeat, to --output_json. Uses
--data_dir/mnist and --data_dir/lfw-devtrain/lfw when they are there, synthetic
data of the same shapes when not, and says which.
"""
import glob
import os
import shutil
import json
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import flags, logging

from benchmarks import (baselines, flops, gpu_use, image_bench, machine, precision_bench,
                        python_work, repeats, table_bench)
from common import cli, files
from input_fns import (digit_sources, face_images, face_pairs, face_records, image_records,
                       lfw_files, parallel_python, prepare, prepare_faces, shards, synthetic_faces)
from models import registry
from trainer.cluster import devices
from trainer.observe import timing
from trainer.run import benchmark_input

FLAGS = flags.FLAGS
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FACE_MEMORY_BATCHES = 40  # the 40 steps the issue measured training's peak RSS over
IMAGE_SHAPE = (28, 28, 1)
FACE_GEOMETRY = face_images.FaceGeometry(image_size=64, channels=1, crop_fraction=0.5)
# Training with the input_fn vs in-memory input: the bar on a CPU, where the input
# pipeline shares the cores with the step, and on a GPU.
ESTIMATOR_INPUT_TARGET = {'cpu': 0.97, 'gpu': 0.95}
SECTIONS = ('mnist', 'faces', 'python', 'images', 'tables')


def fixed_targets(gpu: bool):
    """[(what, numerator row(s), denominator row, target, at least (True) or at most)]."""
    return [
        ('MNIST input_fn vs one record at a time', 'mnist.input_fn', 'mnist.floatlist', 5.0, True),
        ('MNIST input_fn vs in-memory tensors', 'mnist.input_fn', 'mnist.in_memory', 0.8, True),
        ('Estimator: input_fn vs in-memory input', 'train.input_fn', 'train.in_memory',
         ESTIMATOR_INPUT_TARGET['gpu' if gpu else 'cpu'], True),
        ('face pairs: sampler vs generator', 'faces.sampler', 'faces.generator', 1.8, True),
        # Streaming people through a buffer may cost at most a tenth of the in-memory
        # sampler's speed.
        ('face pairs: streaming vs in-memory sampler', 'faces.sampler', 'faces.in_memory',
         0.9, True),
        ('face pairs, --augment: streaming vs in-memory', 'faces.sampler_augment',
         'faces.in_memory_augment', 0.9, True),
        ('face sampler peak RSS: --face_memory_scale x vs 1x people',
         'memory.faces.streaming_scaled', 'memory.faces.streaming_1x', 1.3, False),
        ('face pairs: sampler vs decode-only ceiling', 'faces.sampler', 'faces.decode_only',
         0.7, True),
        # With --augment both ways do the same rotations, which narrows the gap: set from the
        # last quiet run's 1.74x and 0.59x (docs/bench.md), so that a regression shows.
        ('face pairs, --augment: sampler vs generator', 'faces.sampler_augment',
         'faces.generator_augment', 1.7, True),
        ('face pairs, --augment: sampler vs decode-only', 'faces.sampler_augment',
         'faces.decode_only', 0.55, True),
        ('Python preprocessing: workers vs py_function', 'python.workers', 'python.py_function',
         1.8, True),
        ('shard bytes vs raw pixel bytes', 'convert.raw_bytes', 'convert.pixel_bytes', 1.1, False),
        ('training: best of bfloat16/XLA vs float32', precision_bench.faster_keys(gpu),
         'precision.float32', 1.5, True),
        # Shards hold decoded, fitted pixels; Keras decodes and resizes every photo every epoch.
        ('image folders: an epoch, shards vs image_dataset_from_directory', 'images.shards',
         'images.from_directory', 2.0, True),
        ('image_classifier: input_fn vs in-memory input', 'images.train_input_fn',
         'images.train_in_memory', ESTIMATOR_INPUT_TARGET['gpu' if gpu else 'cpu'], True),
        *table_bench.targets(ESTIMATOR_INPUT_TARGET['gpu' if gpu else 'cpu']),
    ]


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
    image_bench.define_flags()
    table_bench.define_flags()


# --quick: fewer rounds than a figure to report needs.
QUICK = {'mnist_examples': 5000, 'face_people': 200, 'repetitions': 3, 'seconds': 0.3,
         'warmup_seconds': 0.2, 'train_steps': 5, 'pair_train_steps': 3, 'warmup_steps': 3,
         'ceiling_size': 1024, 'ceiling_runs': 2, 'ceiling_seconds': 0.3, 'image_photos': 300,
         'image_train_steps': 3, 'table_rows': 5000, 'table_train_steps': 20}


def apply_quick():
    for name, value in QUICK.items():
        if not FLAGS[name].present:
            FLAGS[name].value = value


def num_cores() -> int:
    return parallel_python.default_num_workers()


def progress(message):
    print(f'[{time.strftime("%H:%M:%S")}] {message}', file=sys.stderr, flush=True)


class Results:
    def __init__(self):
        self.rows = []

    def add(self, key, section, name, values, unit, note=''):
        """values: every repeat (one value for what is counted, not timed)."""
        value = statistics.median(values)
        self.rows.append({'key': key, 'section': section, 'name': name, 'value': value,
                          'spread': repeats.half_interval(values) / value if value else 0.0,
                          'unit': unit, 'repetitions': list(values), 'note': note})
        progress(f'{section} | {name}: {value:,.1f} {unit}')

    def row(self, key):
        return next(row for row in self.rows if row['key'] == key)


def measure(results, section, rows, unit, units=None):
    """rows: [(key, name, turn, note)]; their turns interleaved for --repetitions rounds.
    units: {key: unit} for rows in another unit than `unit`."""
    def on_turn(key, round_index, value):
        progress(f'{section} | round {round_index + 1}/{FLAGS.repetitions} {key}: {value:,.1f}')

    values = repeats.interleave({key: turn for key, _, turn, _ in rows}, FLAGS.repetitions,
                                on_turn)
    for key, name, _, note in rows:
        results.add(key, section, name, values[key], (units or {}).get(key, unit), note)


def feeding_timing():
    """One turn of a feeding row: its own warm-up, then one timed repeat."""
    return dict(repetitions=1, seconds=FLAGS.seconds, warmup_steps=5,
                warmup_seconds=FLAGS.warmup_seconds)


def dataset_turn(make_dataset, per_element, timed=None):
    """timed: dataset_rate's timing (default: feeding_timing())."""
    return lambda: (timing.dataset_rate(make_dataset, **(timed or feeding_timing())).per_sec
                    * per_element)


def thread_plan():
    """float32, no XLA, at the bench's thread settings."""
    return devices.plan(intra_op_threads=FLAGS.intra_op_threads,
                        inter_op_threads=FLAGS.inter_op_threads)


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
    """5. MNIST conversion, raw uint8 bytes (this service) vs FloatList; returns both file lists.
    Counted and timed once: its ratio is of bytes, which do not vary."""
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
                [raw_seconds], 's')
    results.add('convert.float_seconds', section, 'FloatList: seconds', [float_seconds], 's')
    results.add('convert.pixel_bytes', section, 'raw pixels (N x 784 bytes)', [images.size],
                'bytes')
    results.add('convert.raw_bytes', section, 'raw uint8 bytes (this service): on disk',
                [total_bytes(raw_files)], 'bytes')
    results.add('convert.float_bytes', section, 'FloatList: on disk', [total_bytes(float_files)],
                'bytes')
    return raw_files, float_files


def mnist_feeding(images, labels, raw_files, float_files, results):
    """1. Examples/sec delivered to a session by each way of feeding MNIST."""
    batch_size = FLAGS.batch_size
    batches = baselines.NumpyBatches(baselines.float_images(images), labels.astype(np.int32),
                                     batch_size)
    input_fn = image_records.make_input_fn(','.join(raw_files), IMAGE_SHAPE, batch_size, True)
    measure(results, '1 MNIST feeding', [
        ('mnist.feed_dict', 'feed_dict from NumPy',
         lambda: baselines.feed_dict_rate(batches, **feeding_timing()).per_sec * batch_size, ''),
        ('mnist.queue_runners', 'queue runners, shuffle_batch',
         lambda: baselines.queue_runner_rate(raw_files, IMAGE_SHAPE, batch_size, num_cores(),
                                             **feeding_timing()).per_sec * batch_size,
         f'{num_cores()} reader threads'),
        ('mnist.floatlist', 'FloatList, parse_single_example one at a time',
         dataset_turn(lambda: baselines.floatlist_dataset(float_files, batch_size), batch_size),
         ''),
        ('mnist.input_fn', "this service's input_fn", dataset_turn(input_fn, batch_size), ''),
        ('mnist.in_memory', 'in-memory tensors (upper bound)',
         dataset_turn(lambda: baselines.in_memory_dataset(images, labels, batch_size), batch_size),
         'decoded, shuffled and batched the same way'),
    ], 'examples/s')


def estimator_training(images, labels, raw_files, work_dir, results):
    """2. Examples/sec of Estimator training of the MNIST CNN, fed three ways; then 6 to 9."""
    spec, batch_size = registry.get('mnist_cnn'), FLAGS.batch_size
    input_fn = image_records.make_input_fn(','.join(raw_files), IMAGE_SHAPE, batch_size, True)
    batches = baselines.NumpyBatches(baselines.float_images(images), labels.astype(np.int32),
                                     batch_size)
    ways = [('train.input_fn', "this service's input_fn", input_fn, []),
            ('train.in_memory', 'synthetic in-memory input',
             benchmark_input.in_memory_input_fn(input_fn), []),
            ('train.feed_dict', 'feed_dict feeding (a hook feeds NumPy batches)',
             baselines.feed_dict_input_fn(IMAGE_SHAPE), [baselines.FeedDictHook(batches)])]
    watched, section = gpu_watch(), '2 Estimator training'
    rows = [(key, f'MNIST CNN, {name}', precision_bench.training_turn(
        spec, way_input_fn, batch_size, thread_plan(), work_dir, FLAGS.train_steps,
        FLAGS.warmup_steps, hooks, None if watched is None else watched.setdefault(key, [])), '')
        for key, name, way_input_fn, hooks in ways]
    measure(results, section, rows, 'examples/s')
    add_utilization(results, section, rows, watched)
    larger_batch = None
    if FLAGS.larger_batch_size:
        larger_batch = (image_records.make_input_fn(','.join(raw_files), IMAGE_SHAPE,
                                                    FLAGS.larger_batch_size, True),
                        FLAGS.larger_batch_size)
    precision_sections(input_fn, larger_batch, work_dir, results)


def precision_sections(input_fn, larger_batch, work_dir, results):
    """6. and 7.: each model's precision rows among turns of the ceiling; 9. threads.
    larger_batch: (MNIST input_fn, --larger_batch_size), or None."""
    model_inputs = [(precision_bench.MNIST, input_fn, FLAGS.batch_size, FLAGS.train_steps,
                     larger_batch),
                    (precision_bench.FACES, precision_bench.random_pairs_input_fn(
                        FLAGS.pair_batch_size), FLAGS.pair_batch_size, FLAGS.pair_train_steps,
                     None)]
    for model, model_input_fn, batch_size, steps, model_larger_batch in model_inputs:
        ceiling, watched = ceiling_rows(model.ceiling_prefix), gpu_watch()
        rows = precision_bench.precision_rows(
            model, model_input_fn, batch_size, work_dir, steps, FLAGS.warmup_steps,
            FLAGS.intra_op_threads, FLAGS.inter_op_threads, model_larger_batch,
            machine.has_gpu(), watched)
        measure(results, model.section, rows + ceiling,
                'examples/s' if model is precision_bench.MNIST else 'pairs/s',
                {key: 'GFLOP/s' for key, *_ in ceiling})
        add_utilization(results, model.section, rows, watched)
    measure(results, precision_bench.THREADS_SECTION, precision_bench.thread_rows(
        input_fn, FLAGS.batch_size, work_dir, FLAGS.train_steps, FLAGS.warmup_steps,
        num_cores()), 'examples/s')


def ceiling_rows(prefix):
    """The matmul ceiling again, one run a turn among the precision rows, so that each
    round's training is read against that round's ceiling (the load changes)."""
    config = machine.session_config(FLAGS.intra_op_threads, FLAGS.inter_op_threads)
    device, dtypes = (('/gpu:0', machine.GPU_DTYPES) if machine.has_gpu()
                      else ('/cpu:0', ('float32', 'bfloat16')))
    size = FLAGS.ceiling_size
    return [(f'{prefix}.{dtype}', f'dense matmul {size}x{size}, {dtype}: the ceiling',
             lambda dtype=dtype: machine.matmul_gflops(tf.as_dtype(dtype), size, 1,
                                                       FLAGS.ceiling_seconds, config, device)[0],
             device) for dtype in dtypes]


def gpu_watch():
    """On a GPU with nvidia-smi, {} for the training rows to fill with each turn's GPU
    utilization ({row key: [percent a turn]}); None elsewhere."""
    return {} if machine.has_gpu() and gpu_use.available() else None


def add_utilization(results, section, rows, watched):
    """The GPU utilization rows of a section's training rows (rows: [(key, name, ...)])."""
    for key, name, *_ in rows:
        if (watched or {}).get(key):
            results.add(f'gpu_util.{key}', section, f'{name}: GPU utilization', watched[key],
                        '%', 'nvidia-smi over the timed steps')


def face_pair_rows(work_dir, results):
    """3. Training pairs/sec: the generator way and the in-graph sampler, each without and with
    --augment's rotations, and decode-only."""
    root, source = face_photo_root(work_dir)
    shard_dir = os.path.join(work_dir, 'face_shards')
    prepare_faces.prepare_faces(
        source_dir=root, output_dir=shard_dir, validation_fraction=0.0, train_people_file=None,
        num_pairs=0, pair_folds=1, strict=False, seed=0, num_shards=4, num_eval_shards=1)
    files = sorted(glob.glob(os.path.join(shard_dir, 'train-*')))
    index = face_pairs.read_photo_index(files)
    num_people, _ = face_pairs.check_people(files)
    batch_size = FLAGS.pair_batch_size
    jpegs = list(tf.data.TFRecordDataset(files).map(
        lambda s: tf.io.parse_single_example(s, face_records.PERSON_SPEC)['images']).unbatch()
        .as_numpy_iterator())

    def decode_only():
        def decode(jpeg):  # one pixel of each photo: photos of any size batch together
            return tf.io.decode_jpeg(jpeg, channels=FACE_GEOMETRY.channels)[0, 0]

        photos = tf.data.Dataset.from_tensor_slices(jpegs).repeat()
        photos = photos.map(decode, num_parallel_calls=num_cores(), deterministic=False)
        return photos.batch(2 * batch_size)

    rows = []
    for suffix, augment, what in (('', False, ''), ('_augment', True, ', --augment')):
        rows += [
            (f'faces.generator{suffix}', f'Python generator of paths, map to read and decode{what}',
             dataset_turn(lambda augment=augment: face_pairs.generator_pairs_dataset(
                 index, FACE_GEOMETRY, batch_size, augment_images=augment), batch_size), ''),
            (f'faces.in_memory{suffix}', f'in-graph sampler, every photo in memory (before){what}',
             dataset_turn(lambda augment=augment: baselines.in_memory_pairs_dataset(
                 files, index, FACE_GEOMETRY, batch_size, augment_images=augment), batch_size), ''),
            (f'faces.sampler{suffix}', f"this service's streaming in-graph sampler{what}",
             dataset_turn(lambda augment=augment: face_pairs.sampled_pairs_dataset(
                 files, num_people, FACE_GEOMETRY, batch_size, augment_images=augment),
                 batch_size), '')]
    decode = ('faces.decode_only', 'decode-only ceiling: decode_jpeg on all cores',
              dataset_turn(decode_only, batch_size), 'whole photos decoded per second / 2')
    # Each sampler next to the rows its targets read it against (the load drifts within a
    # round): generator, in-memory, sampler, decode-only, then the --augment three reversed.
    measure(results, '3 face pairs', rows[:3] + [decode] + rows[3:][::-1], 'pairs/s')
    if FLAGS.face_memory_scale:
        face_memory_rows(root, files, work_dir, results)
    return source


def copies_of_people(root, scale, work_dir):
    """A folder of `scale` copies of root's people, each copy under new names (links to the
    same photos): `scale` times the people for the memory rows."""
    copied = os.path.join(work_dir, f'faces_{scale}x')
    for name, photos in lfw_files.scan_people(root).items():
        for copy in range(scale):
            person = f'{name}_c{copy}'
            os.makedirs(os.path.join(copied, person))
            for photo in photos:
                number = photo.rsplit('_', 1)[1]
                os.symlink(os.path.realpath(os.path.join(root, name, photo)),
                           os.path.join(copied, person, f'{person}_{number}'))
    return copied


def peak_rss_mb(sampler, files):
    """Peak RSS of a fresh process reading FACE_MEMORY_BATCHES batches with one sampler."""
    result = subprocess.run(
        [sys.executable, '-m', 'benchmarks.face_sampler_stats', f'--train_files={files}',
         f'--memory_batches={FACE_MEMORY_BATCHES}', f'--sampler={sampler}',
         f'--batch_size={FLAGS.pair_batch_size}'], cwd=REPO, capture_output=True, text=True,
        check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])['peak_rss_mb']


def face_memory_rows(root, files, work_dir, results):
    """3. Peak RSS of each sampler on the face data and on --face_memory_scale times its people."""
    scale = FLAGS.face_memory_scale
    scaled_dir = os.path.join(work_dir, f'face_shards_{scale}x')
    progress(f'3 face pairs | memory: preparing {scale}x the people')
    prepare_faces.prepare_faces(
        source_dir=copies_of_people(root, scale, work_dir), output_dir=scaled_dir,
        validation_fraction=0.0, train_people_file=None, num_pairs=0, pair_folds=1,
        strict=False, seed=0, num_shards=4 * scale, num_eval_shards=1)
    patterns = [('1x', '1x', ','.join(files)),
                ('scaled', f'{scale}x', os.path.join(scaled_dir, 'train-*'))]
    for sampler, what in (('streaming', "this service's streaming sampler"),
                          ('in_memory', 'every photo in memory (before)')):
        for key, size, pattern in patterns:
            results.add(f'memory.faces.{sampler}_{key}', '3 face pairs',
                        f'peak RSS, {what}, {size} people', [peak_rss_mb(sampler, pattern)], 'MB',
                        f'{FACE_MEMORY_BATCHES} batches, fresh process')


def python_preprocessing(results):
    """4. A CPU-heavy plain-Python function: tf.py_function vs worker processes."""
    signature = (tf.TensorSpec([python_work.SIZE, python_work.SIZE], tf.float32),
                 tf.TensorSpec([], tf.int32))
    batch_size = FLAGS.pair_batch_size
    measure(results, '4 Python preprocessing', [
        ('python.py_function', 'tf.py_function, num_parallel_calls=AUTOTUNE',
         dataset_turn(lambda: baselines.py_function_dataset(
             python_work.blurred_example, signature, batch_size), batch_size), ''),
        ('python.workers', f'parallel_python.parallel_map, {num_cores()} worker processes',
         dataset_turn(lambda: parallel_python.parallel_map(
             python_work.blurred_example, range(2 ** 62), signature, ordered=False)
             .batch(batch_size).prefetch(tf.data.AUTOTUNE), batch_size), '')], 'examples/s')


# ------------------------------------------------------------------ report


def targets(larger_batch_size: int, gpu: bool = False):
    """fixed_targets, the ceiling's (which take the larger batch's rows too) and the thread
    settings' (which depend on the cores)."""
    return (fixed_targets(gpu) + precision_bench.ceiling_targets(larger_batch_size)
            + [precision_bench.threads_target(num_cores())])


def check_targets(results):
    checked = []
    measured = {row['key'] for row in results.rows}
    for what, numerator, denominator, target, at_least in targets(FLAGS.larger_batch_size,
                                                                  machine.has_gpu()):
        keys = numerator if isinstance(numerator, tuple) else (numerator,)
        if denominator not in measured:  # rows left out (--face_memory_scale=0)
            continue
        best = max(keys, key=lambda key: results.row(key)['value'])  # the best of several
        checked.append({'target': what, 'numerator': best, 'denominator': denominator,
                        'best_of': list(keys) if len(keys) > 1 else None,
                        **repeats.check(results.row(best)['repetitions'],
                                        results.row(denominator)['repetitions'],
                                        target, at_least)})
    return checked


def format_value(value, unit):
    return f'{value:,.2f}' if unit in ('s', '%') else f'{value:,.0f}'


def report(results, header, checked) -> str:
    lines = header + ['']
    width = max(len(row['name']) for row in results.rows)
    for section in sorted({row['section'] for row in results.rows}):
        lines.append(section)
        for row in (r for r in results.rows if r['section'] == section):
            note = f'  ({row["note"]})' if row['note'] else ''
            spread = (f' +-{100 * row["spread"]:4.1f}%' if len(row['repetitions']) > 1
                      else ' ' * 8)
            lines.append(f'  {row["name"]:<{width}}  {format_value(row["value"], row["unit"]):>14}'
                         f'{spread} {row["unit"]}{note}')
    lines += ['', 'targets (ratio: median of the paired rounds [its 95% interval])']
    width = max(len(t['target']) for t in checked)
    for t in checked:
        best = f'  (best: {results.row(t["numerator"])["name"]})' if t['best_of'] else ''
        low, high = t['interval']
        lines.append(f'  {t["target"]:<{width}}  {t["ratio"]:7.2f}x [{low:5.2f}, {high:5.2f}]  '
                     f'wanted {t["wanted"]:<8} {t["verdict"]}{best}')
    return '\n'.join(lines)


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
        spec, input_fn, batch_size, thread_plan(), work_dir, steps, FLAGS.warmup_steps)


def run_sections(work_dir, results, sections):
    data = {}
    if 'mnist' in sections:
        images, labels, data['mnist'] = load_mnist()
        progress(f'MNIST: {data["mnist"]}')
        raw_files, float_files = convert_mnist(images, labels, work_dir, results)
        mnist_feeding(images, labels, raw_files, float_files, results)
        estimator_training(images, labels, raw_files, work_dir, results)
    if 'faces' in sections:
        data['faces'] = face_pair_rows(work_dir, results)
    if 'python' in sections:
        python_preprocessing(results)
    if 'images' in sections:
        data['images'] = image_bench.image_rows(
            work_dir, results, measure, dataset_turn,
            training_turns(work_dir, FLAGS.image_train_steps))
    if 'tables' in sections:
        data['tables'] = table_bench.table_rows(
            work_dir, results, measure, dataset_turn,
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
        'ceiling_size', 'ceiling_runs', 'ceiling_seconds', 'face_memory_scale', 'quick')}
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
    ] + [{
        'mnist': f'MNIST: {data.get("mnist")}; batch {FLAGS.batch_size}',
        'faces': f'faces: {data.get("faces")}; batch {FLAGS.pair_batch_size} pairs, '
                 f'{FACE_GEOMETRY.image_size}x{FACE_GEOMETRY.image_size} grayscale; '
                 'face_embedding trains on random 96x96 pairs held in memory',
        'images': f'image folders: {data.get("images")}',
        'tables': f'tables: {data.get("tables")}'}[name] for name in data]
    checked = check_targets(results)
    print(report(results, header, checked), flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output_json)), exist_ok=True)
    files.write_json_atomic(FLAGS.output_json, {
        'machine': {**described, 'ceiling': ceiling}, 'settings': settings,
        'wall_seconds': elapsed, 'data': data, 'flops': counted,
        'rows': results.rows, 'targets': checked})
    print(f'\nwrote {FLAGS.output_json}')


if __name__ == '__main__':
    define_flags()
    cli.run(main, own_modules=[])  # bad flags: one line, exit 2
