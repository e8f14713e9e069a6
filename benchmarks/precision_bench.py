"""Sections 6 to 9 of `./run.sh bench`: Estimator training of the MNIST CNN and of
face_embedding at each precision, with and without XLA, as --precision and --xla set them up;
their GFLOP/s against the matmul ceiling; the MNIST CNN at each thread setting.

Each row is a list of turns that benchmarks.input_bench interleaves with the other rows';
a turn builds a fresh Estimator and session, warms up, and times --train_steps steps.
"""
import dataclasses
import re
import tempfile
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from benchmarks import gpu_use
from models import registry
from trainer.cluster import devices
from trainer.observe import timing
from trainer.run import benchmark_input

# (row suffix, --precision, --xla, row name)
SETTINGS = [
    ('float32', 'float32', False, 'float32'),
    ('bfloat16', 'mixed_bfloat16', False, '--precision=mixed_bfloat16'),
    ('xla', 'float32', True, 'float32 --xla'),
    ('bfloat16_xla', 'mixed_bfloat16', True, 'mixed_bfloat16 --xla'),
]
# float16 mixed precision is for GPUs (the trainer refuses it on a CPU).
GPU_SETTINGS = [('float16', 'mixed_float16', False, '--precision=mixed_float16')]
# Rows again at --larger_batch_size: Adam's update and the float32<->bfloat16 casts of the
# 3.3M parameters cost the same at any batch size (about a sixth of a bfloat16 step's op
# time at batch 100).
LARGER_BATCH_SETTINGS = SETTINGS[:2]
# The targets: training GFLOP/s as a share of the matmul ceiling in its dtype.
CEILING_TARGETS = {'float32': 0.8, 'bfloat16': 0.7}
CEILING_SECTION = '8 training against the ceiling'
THREADS_SECTION = '9 threads: MNIST CNN, --precision=auto'


@dataclasses.dataclass(frozen=True)
class Model:
    name: str  # in the registry
    title: str
    prefix: str  # its rows: PREFIX.float32, PREFIX.bfloat16, ...
    ceiling_prefix: str  # the ceiling's turns among them: CEILING_PREFIX.float32, ...
    section: str

    def key(self, suffix: str) -> str:
        return f'{self.prefix}.{suffix}'


MNIST = Model('mnist_cnn', 'MNIST CNN', 'precision', 'ceiling', '6 precision and XLA')
FACES = Model('face_embedding', 'face_embedding', 'face_precision', 'face_ceiling',
              '7 precision and XLA: face_embedding')
MODELS = (MNIST, FACES)
SECTION = MNIST.section


def settings(gpu: bool, bfloat16: bool = True) -> List[Tuple]:
    """The precision rows' settings; bfloat16: with the mixed_bfloat16 rows."""
    return [setting for setting in SETTINGS + (GPU_SETTINGS if gpu else [])
            if bfloat16 or setting[1] != 'mixed_bfloat16']


def bfloat16_rows_wanted(gpu: bool, emulated: bool) -> bool:
    """Whether to time training in mixed_bfloat16: on a GPU or a CPU with bfloat16 units, and
    on a CPU that emulates it only when asked (emulated: --emulated_bfloat16). Emulated, a step
    is 13x slower than float32 on a 2-core AMD EPYC Zen 3; its rows took most of a full bench
    there, to measure what --precision=auto never picks."""
    return gpu or emulated or devices.cpu_has_bfloat16_units() is not False


def faster_keys(gpu: bool) -> Tuple[str, ...]:
    """The MNIST rows that the 'best of bfloat16/XLA (float16 on a GPU) vs float32' target
    takes the best of."""
    return tuple(MNIST.key(suffix) for suffix, *_ in settings(gpu)[1:])


def compute_dtype(key: str) -> str:
    """The dtype a precision row's convolutions and matmuls run in."""
    return next((dtype for dtype in ('bfloat16', 'float16') if dtype in key), 'float32')


def training_turn(spec, input_fn, batch_size, plan, work_dir, steps, warmup_steps, hooks=(),
                  utilization: Optional[list] = None):
    """One repeat: examples/sec of `steps` training steps of a fresh Estimator after warm-up.
    utilization: on a GPU, a list that gets each turn's mean GPU utilization over its timed
    steps (benchmarks.gpu_use)."""
    def turn():
        estimator = timing.timing_estimator(spec.model_fn, spec.default_params,
                                            tempfile.mkdtemp(dir=work_dir), plan)
        watch = [gpu_use.UtilizationHook(warmup_steps)] if utilization is not None else []
        rate = timing.training_rate(estimator, input_fn, steps, 1, warmup_steps,
                                    [*hooks, *watch])
        if watch and watch[0].mean() is not None:
            utilization.append(watch[0].mean())
        return rate.per_sec * batch_size
    return turn


def schema_model_rows(key_prefix: str, model: str, schema: Dict, input_fn, batch_size: int,
                      training_turn) -> List:
    """Rows for bench_sections.measure: a model built from its data's schema trained fed by
    input_fn, and by one of its batches held in memory (is training from shards input-bound?)."""
    spec = registry.get(model)
    spec = dataclasses.replace(spec, schema=schema,
                               default_params={**spec.default_params, 'schema': schema})
    return [(f'{key_prefix}.train_input_fn', f"{model}, this service's input_fn",
             training_turn(spec, input_fn, batch_size), ''),
            (f'{key_prefix}.train_in_memory', f'{model}, the same batch in memory',
             training_turn(spec, benchmark_input.in_memory_input_fn(input_fn), batch_size), '')]


def batch_key(suffix: str, batch_size: int) -> str:
    return f'{suffix}_batch{batch_size}'


def row_batch_size(key: str, default: int) -> int:
    """The batch a row trained at: its key's _batchN, else the model's batch."""
    match = re.search(r'_batch(\d+)$', key)
    return int(match.group(1)) if match else default


def precision_rows(model: Model, input_fn, batch_size, work_dir, steps, warmup_steps,
                   intra_op_threads=0, inter_op_threads=0, larger_batch=None, gpu=False,
                   utilization: Optional[Dict[str, list]] = None, bfloat16: bool = True):
    """[(row key, row name, turn, note)] for benchmarks.bench_sections.measure.

    larger_batch: (input_fn, batch size) for LARGER_BATCH_SETTINGS' rows again at that batch.
    gpu: float16 rows too. utilization: {row key: each turn's GPU utilization}, filled as
    turns run (benchmarks.gpu_use), or None. bfloat16: the mixed_bfloat16 rows too.
    """
    spec = registry.get(model.name)
    variants = [(settings(gpu, bfloat16), input_fn, batch_size, lambda suffix: suffix, '')]
    if larger_batch:
        larger_input_fn, larger = larger_batch
        larger_settings = [setting for setting in LARGER_BATCH_SETTINGS
                           if setting in settings(gpu, bfloat16)]
        variants.append((larger_settings, larger_input_fn, larger,
                         lambda suffix: batch_key(suffix, larger), f', batch {larger}'))
    rows = []
    for variant_settings, rows_input_fn, rows_batch, key_of, batch_name in variants:
        for suffix, precision, xla, name in variant_settings:
            plan = devices.plan(precision=precision, xla=xla, intra_op_threads=intra_op_threads,
                                inter_op_threads=inter_op_threads)
            key = model.key(key_of(suffix))
            watched = None if utilization is None else utilization.setdefault(key, [])
            rows.append((key, f'{model.title}, {name}{batch_name}',
                         training_turn(spec, rows_input_fn, rows_batch, plan, work_dir, steps,
                                       warmup_steps, utilization=watched), ''))
    return rows


def random_pairs_input_fn(batch_size: int):
    """One batch of random face_embedding pairs, held in memory and repeated: the step's
    speed alone (the face input pipeline has its own rows, section 3)."""
    rng = np.random.RandomState(0)
    shape = (batch_size, *registry.get(FACES.name).image_shape)
    batch = ({'image_a': rng.rand(*shape).astype(np.float32),
              'image_b': rng.rand(*shape).astype(np.float32)},
             (rng.rand(batch_size) < 0.5).astype(np.float32))
    return lambda: tf.data.Dataset.from_tensors(batch).repeat()


def ceiling_targets(larger_batch_size: int) -> List[Tuple]:
    """bench_targets rows: the best row computing in each dtype (at either batch size)
    against that dtype's ceiling of the same rounds, for each model. (float16, on a GPU, has
    its fractions in section 8 and no target: the issue set none.)"""
    targets = []
    for model in MODELS:
        for dtype, target in CEILING_TARGETS.items():
            suffixes = [suffix for suffix, *_ in SETTINGS]
            if model is MNIST and larger_batch_size:  # the one model with larger-batch rows
                suffixes += [batch_key(suffix, larger_batch_size)
                             for suffix, *_ in LARGER_BATCH_SETTINGS]
            keys = tuple(f'ceiling.{model.key(suffix)}.gflops' for suffix in suffixes
                         if compute_dtype(suffix) == dtype)
            targets.append((f'{model.title}: best {dtype} training vs the {dtype} ceiling', keys,
                            f'{model.ceiling_prefix}.{dtype}', target, True))
    return targets


def against_ceiling(results, flops_per_example: Dict[str, Dict[int, float]],
                    batch_sizes: Dict[str, int]):
    """8. Every precision row's GFLOP/s (examples/sec x FLOPs per example at its batch size,
    each repeat) and its share of the same round's matmul ceiling in the dtype it computes in.
    flops_per_example: {model: {batch size: FLOPs}}; batch_sizes: {model: its rows' batch}."""
    for model in MODELS:
        for row in [row for row in results.rows if row['key'].startswith(model.prefix + '.')]:
            key, dtype = row['key'], compute_dtype(row['key'])
            per_example = flops_per_example[model.name][
                row_batch_size(key, batch_sizes[model.name])]
            gflops = [examples * per_example / 1e9 for examples in row['repetitions']]
            results.add(f'ceiling.{key}.gflops', CEILING_SECTION, f'{row["name"]}: GFLOP/s',
                        gflops, 'GFLOP/s')
            ceiling = results.row(f'{model.ceiling_prefix}.{dtype}')['repetitions']
            results.add(f'ceiling.{key}.fraction', CEILING_SECTION,
                        f'{row["name"]}: of the {dtype} matmul ceiling',
                        [100 * value / limit for value, limit in zip(gflops, ceiling)], '%',
                        "each round's against that round's ceiling")


def thread_settings(cores: int) -> List[Tuple[int, int]]:
    """(intra-op, inter-op): TensorFlow's choice (0, 0), then one and all cores per op, each
    with one and two ops at a time."""
    return [(0, 0)] + [(intra, inter) for intra in sorted({1, cores}) for inter in (1, 2)]


def thread_key(intra: int, inter: int) -> str:
    return 'threads.default' if (intra, inter) == (0, 0) else f'threads.intra{intra}_inter{inter}'


def thread_rows(input_fn, batch_size, work_dir, steps, warmup_steps, cores: int):
    """9. The MNIST CNN as the recipes train it (--precision=auto) at each thread setting."""
    spec = registry.get(MNIST.name)
    return [(thread_key(intra, inter),
             f'MNIST CNN, {devices.describe_threads(intra, inter)}',
             training_turn(spec, input_fn, batch_size,
                           devices.plan(precision='auto', intra_op_threads=intra,
                                        inter_op_threads=inter),
                           work_dir, steps, warmup_steps), '')
            for intra, inter in thread_settings(cores)]


def threads_target(cores: int) -> Tuple:
    keys = tuple(thread_key(intra, inter) for intra, inter in thread_settings(cores))
    return ("threads: the fastest setting vs TensorFlow's choice", keys, 'threads.default', 1.0,
            True)
