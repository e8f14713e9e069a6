"""The bench's sections: each measures its rows, interleaved for --repetitions rounds
(benchmarks/repeats.py), into Results (benchmarks/bench_report.py). Numbered as the report
numbers them (benchmarks/input_bench.py says what each holds)."""
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf
from absl import flags

from benchmarks import baselines, gpu_use, machine, precision_bench, python_work, repeats
from benchmarks.bench_data import copies_of_people, face_photo_root, total_bytes
from benchmarks.bench_report import progress
from input_fns.faces import face_images, face_pairs, face_records, prepare_faces
from input_fns.images import image_records
from input_fns.prepare import command as prepare
from input_fns.records import parallel_python, stream_shards
from models import registry
from trainer.cluster import devices
from trainer.observe import timing
from trainer.run import benchmark_input

FLAGS = flags.FLAGS
FACE_MEMORY_BATCHES = 40  # the 40 steps the issue measured training's peak RSS over
IMAGE_SHAPE = (28, 28, 1)
FACE_GEOMETRY = face_images.FaceGeometry(image_size=64, channels=1, crop_fraction=0.5)


def num_cores() -> int:
    return parallel_python.default_num_workers()


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


def convert_mnist(images, labels, work_dir, results):
    """5. MNIST conversion, raw uint8 bytes (this service) vs FloatList; returns both file lists.
    Counted and timed once: its ratio is of bytes, which do not vary."""
    raw_dir, float_dir = os.path.join(work_dir, 'mnist_raw'), os.path.join(work_dir, 'mnist_float')
    start = time.perf_counter()
    prepare.write_digit_splits(raw_dir, 'mnist', {'train': (images, labels, ['bench'])},
                               num_shards=10, num_eval_shards=1, seed=0)
    raw_seconds = time.perf_counter() - start
    start = time.perf_counter()
    stream_shards.write_split(float_dir, 'train', len(labels),
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
    gpu = machine.has_gpu()
    bfloat16 = precision_bench.bfloat16_rows_wanted(gpu, FLAGS.emulated_bfloat16)
    for model, model_input_fn, batch_size, steps, model_larger_batch in model_inputs:
        ceiling, watched = ceiling_rows(model.ceiling_prefix), gpu_watch()
        rows = precision_bench.precision_rows(
            model, model_input_fn, batch_size, work_dir, steps, FLAGS.warmup_steps,
            FLAGS.intra_op_threads, FLAGS.inter_op_threads, model_larger_batch,
            gpu, watched, bfloat16)
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


def peak_rss_mb(sampler, files):
    """Peak RSS of a fresh process reading FACE_MEMORY_BATCHES batches with one sampler."""
    result = subprocess.run(
        [sys.executable, '-m', 'benchmarks.face_sampler_stats', f'--train_files={files}',
         f'--memory_batches={FACE_MEMORY_BATCHES}', f'--sampler={sampler}',
         f'--batch_size={FLAGS.pair_batch_size}'], capture_output=True, text=True,
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
