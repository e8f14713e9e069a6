"""The machine the bench runs on, and its ceiling: what a dense matmul reaches at each precision.

The ceiling is GFLOP/s of a square matmul (2 n^3 floating-point operations) in a graph-mode
session with the thread settings training uses, best of several runs: the most this
machine's math units give TensorFlow, against which training's own GFLOP/s is read.
Beside it, memory read bandwidth (a sum over a tensor far larger than the caches): the
limit of ops that do little math per byte, such as the optimizer's update of every weight.
"""
import os
import platform
import time
from typing import Callable, Dict, List

import tensorflow as tf
from common import tf_settings
from trainer.cluster import devices

MEMORY_MEGABYTES = 256  # far beyond any CPU's caches
CPU_FLAGS_THAT_MATTER = ('avx2', 'avx512f', 'avx512_bf16', 'avx512_fp16', 'amx_bf16', 'amx_tile')


def cpu_model_and_flags():
    """('AMD EPYC 9B14', ['avx512f', ...]) from Linux's /proc/cpuinfo; (platform's name, [])
    elsewhere."""
    try:
        with open('/proc/cpuinfo') as f:
            lines = f.read().splitlines()
    except OSError:
        return platform.processor() or platform.machine(), []
    model = next((line.split(':', 1)[1].strip() for line in lines
                  if line.startswith('model name')), platform.machine())
    present = set(next((line for line in lines if line.startswith('flags')), '').split())
    return model, [flag for flag in CPU_FLAGS_THAT_MATTER if flag in present]


def describe(intra_op_threads: int, inter_op_threads: int) -> Dict:
    model, cpu_flags = cpu_model_and_flags()
    return {
        'cpu_model': model, 'cpu_flags': cpu_flags,
        'cores_usable': len(os.sched_getaffinity(0)), 'cpu_count': os.cpu_count(),
        'gpus': list(devices.discover().gpus),
        'tensorflow': tf.__version__, 'python': platform.python_version(),
        'build_info': {key: str(value) for key, value in tf.sysconfig.get_build_info().items()},
        'onednn': tf_settings.onednn_enabled(),
        'TF_ENABLE_ONEDNN_OPTS': os.environ.get('TF_ENABLE_ONEDNN_OPTS', '(unset)'),
        'threads': devices.describe_threads(intra_op_threads, inter_op_threads),
        'intra_op_threads': intra_op_threads, 'inter_op_threads': inter_op_threads,
    }


def session_config(intra_op_threads: int, inter_op_threads: int) -> tf.compat.v1.ConfigProto:
    return tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra_op_threads,
                                    inter_op_parallelism_threads=inter_op_threads)


def giga_per_second(make_fetch: Callable[[], tf.Tensor], work: float, runs: int,
                    seconds: float, config, device: str = '/cpu:0',
                    clock: Callable[[], float] = time.perf_counter) -> List[float]:
    """work x calls / second of `clock` / 1e9 of each of `runs` timed runs (about `seconds`
    of wall time each) of the op make_fetch builds, after one untimed run; its variables
    are made first. clock=time.process_time: per second of this process's CPU time."""
    with tf.Graph().as_default():
        with tf.device(device):
            fetch = make_fetch()
        with tf.compat.v1.Session(config=config) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(fetch)
            rates = []
            for _ in range(runs):
                start, clock_start, done = time.perf_counter(), clock(), 0
                while done == 0 or time.perf_counter() - start < seconds:
                    session.run(fetch)
                    done += 1
                rates.append(work * done / (clock() - clock_start) / 1e9)
    return rates


def matmul_gflops(dtype: tf.DType, size: int, runs: int, seconds: float, config,
                  device: str = '/cpu:0', clock: Callable[[], float] = time.perf_counter
                  ) -> List[float]:
    """GFLOP/s (per second of `clock`) of each run of a size x size matmul."""
    def product():
        # Variables: the operands are made once, so each step is the matmul alone.
        a = tf.Variable(tf.cast(tf.random.uniform([size, size]), dtype))
        b = tf.Variable(tf.cast(tf.random.uniform([size, size]), dtype))
        # A scalar fetched: n^2 adds beside 2 n^3 (Grappler prunes an op nothing reads).
        return tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32))
    return giga_per_second(product, 2 * size ** 3, runs, seconds, config, device, clock)


def memory_read_gbps(megabytes: int, runs: int, seconds: float, config) -> List[float]:
    """GB/s of each run of summing a float32 tensor of `megabytes`."""
    return giga_per_second(lambda: tf.reduce_sum(tf.Variable(tf.ones([megabytes * 2 ** 20 // 4]))),
                           megabytes * 2 ** 20, runs, seconds, config)


GPU_DTYPES = ('float32', 'bfloat16', 'float16')


def has_gpu() -> bool:
    return bool(tf.config.list_physical_devices('GPU'))


def ceiling(size: int, runs: int, seconds: float, intra_op_threads: int,
            inter_op_threads: int) -> Dict[str, Dict]:
    """{'cpu float32': {'gflops': best, 'runs': [...]}, 'cpu bfloat16': ..., and on a GPU
    'gpu float32', 'gpu bfloat16', 'gpu float16'}."""
    config = session_config(intra_op_threads, inter_op_threads)
    measured = {}
    kinds = [('cpu', '/cpu:0', tf.float32), ('cpu', '/cpu:0', tf.bfloat16)]
    if has_gpu():
        kinds += [('gpu', '/gpu:0', tf.as_dtype(dtype)) for dtype in GPU_DTYPES]
    for where, device, dtype in kinds:
        rates = matmul_gflops(dtype, size, runs, seconds, config, device)
        measured[f'{where} {dtype.name}'] = {'gflops': max(rates), 'runs': rates,
                                             'matmul': f'{size}x{size}', 'device': device}
    rates = memory_read_gbps(MEMORY_MEGABYTES, runs, seconds, config)
    measured['cpu memory read'] = {'gbps': max(rates), 'runs': rates,
                                   'sum': f'{MEMORY_MEGABYTES} MB float32'}
    return measured


def report_lines(machine: Dict, measured: Dict[str, Dict]) -> List[str]:
    lines = [f'machine: {machine["cpu_model"]}, {machine["cores_usable"]} usable cores '
             f'({machine["cpu_count"]} CPUs), CPU flags: {" ".join(machine["cpu_flags"]) or "none"}'
             f'; GPUs: {", ".join(machine["gpus"]) or "none"}',
             f'TensorFlow {machine["tensorflow"]}: oneDNN {"on" if machine["onednn"] else "off"} '
             f'(TF_ENABLE_ONEDNN_OPTS={machine["TF_ENABLE_ONEDNN_OPTS"]}), build '
             + ', '.join(f'{key}={value}' for key, value in machine['build_info'].items()),
             f'threads: {machine["threads"]}',
             'ceiling: dense matmul GFLOP/s and memory read GB/s, best of '
             f'{len(next(iter(measured.values()))["runs"])} runs:']
    for name, entry in measured.items():
        what, best, unit = ((entry['matmul'], entry['gflops'], 'GFLOP/s') if 'gflops' in entry
                            else (entry['sum'], entry['gbps'], 'GB/s'))
        lines.append(f'  {name:<15} {what:>14}  {best:8.1f} {unit:<7}  (runs: '
                     + ', '.join(f'{rate:.1f}' for rate in entry['runs']) + ')')
    return lines
