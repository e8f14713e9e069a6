"""Judging the bench's targets: each a ratio of two rows' medians over the paired rounds, met,
SHORT, or not resolved when its 95% interval holds the target (benchmarks/repeats.py)."""
from benchmarks import bench_tables, machine, precision_bench, repeats
from benchmarks.bench_sections import num_cores

# Training with the input_fn vs in-memory input: the bar on a CPU, where the input
# pipeline shares the cores with the step, and on a GPU.
ESTIMATOR_INPUT_TARGET = {'cpu': 0.97, 'gpu': 0.95}


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
        ('image folders: an epoch, pixel shards vs image_dataset_from_directory',
         'images.shards_pixels', 'images.from_directory', 2.0, True),
        # JPEG shards decode every epoch too, but photos already fitted, a fraction the size
        # (6.03x in the run docs/bench.md reports).
        ('image folders: an epoch, JPEG shards vs image_dataset_from_directory',
         'images.shards_jpeg', 'images.from_directory', 2.0, True),
        # Preparing is paid once: it may cost at most about 33 epochs of Keras decoding the same
        # tree (0.04x [0.04, 0.08] in that run, the workers' start included), so a slower
        # prepare shows.
        ('image folders: prepare images vs an epoch of image_dataset_from_directory',
         'images.prepare_pixels', 'images.from_directory', 0.03, True),
        # 0.41x on the bench's noise photos, JPEG's worst case.
        ('image folders: JPEG vs pixel shard bytes', 'images.bytes_jpeg', 'images.bytes_pixels',
         0.5, False),
        ('image_classifier: input_fn vs in-memory input', 'images.train_input_fn',
         'images.train_in_memory', ESTIMATOR_INPUT_TARGET['gpu' if gpu else 'cpu'], True),
        *bench_tables.targets(),
    ]


def targets(larger_batch_size: int, gpu: bool = False):
    """fixed_targets, the ceiling's (which take the larger batch's rows too) and the thread
    settings' (which depend on the cores)."""
    return (fixed_targets(gpu) + precision_bench.ceiling_targets(larger_batch_size)
            + [precision_bench.threads_target(num_cores())])


def check_targets(results, larger_batch_size: int):
    """(the targets judged, [{'target', 'missing': row keys}] for those with some of their
    rows measured and some left out: bfloat16's on a CPU that emulates it). A target with none
    of its rows measured (a section not run, --face_memory_scale=0) is neither."""
    checked, not_judged = [], []
    measured = {row['key'] for row in results.rows}
    gpu = machine.has_gpu()
    for what, numerator, denominator, target, at_least in targets(larger_batch_size, gpu):
        keys = numerator if isinstance(numerator, tuple) else (numerator,)
        # A best-of target with some of its rows left out would judge a different question.
        missing = [key for key in (*keys, denominator) if key not in measured]
        if len(missing) == len(keys) + 1:
            continue
        if missing:
            not_judged.append({'target': what, 'missing': missing})
            continue
        best = max(keys, key=lambda key: results.row(key)['value'])  # the best of several
        checked.append({'target': what, 'numerator': best, 'denominator': denominator,
                        'best_of': list(keys) if len(keys) > 1 else None,
                        **repeats.check(results.row(best)['repetitions'],
                                        results.row(denominator)['repetitions'],
                                        target, at_least)})
    return checked, not_judged
