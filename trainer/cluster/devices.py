"""The devices the trainer uses: what is there, how training is spread over it, at what precision.

`plan(...)` checks --distribution, --num_gpus, --cpu_replicas, --precision and
--xla against the devices found and says what to do when they do not fit;
`Plan.run_config(config)` adds the strategy and session settings to a RunConfig, the
threads of --intra_op_threads and --inter_op_threads among them.
"""
import dataclasses
import os
from typing import Optional, Tuple

import tensorflow as tf
from absl import logging
from tensorflow.compat.v1 import ConfigProto
from tensorflow_estimator.python.estimator import run_config as estimator_run_config

from common import tf_config, tf_settings
from common.errors import UserError
from trainer.cluster import multi_worker


@dataclasses.dataclass(frozen=True)
class Devices:
    cpu_cores: int
    gpus: Tuple[str, ...]  # names, e.g. 'NVIDIA H100 80GB HBM3'

    def describe(self) -> str:
        gpus = ', '.join(f'GPU:{i} {name}' for i, name in enumerate(self.gpus)) or 'no GPU'
        return f'{self.cpu_cores} CPU cores, {gpus}'


def discover() -> Devices:
    gpus = tf.config.list_physical_devices('GPU')
    names = tuple(tf.config.experimental.get_device_details(gpu).get('device_name', gpu.name)
                  for gpu in gpus)
    return Devices(len(os.sched_getaffinity(0)), names)


@dataclasses.dataclass(frozen=True)
class Plan:
    devices: Devices
    distribution: str
    replica_devices: Tuple[str, ...]  # what MirroredStrategy mirrors over; () for none
    gpus_used: int
    precision: str
    xla: bool
    precision_chosen_by_auto: bool = False
    intra_op_threads: int = 0  # 0: TensorFlow decides
    inter_op_threads: int = 0
    sync_workers: int = 0  # multi_worker_mirrored: the chief and workers that train in step

    @property
    def num_replicas(self) -> int:
        if self.sync_workers:  # MultiWorkerMirroredStrategy mirrors over each worker's GPUs
            return self.sync_workers * max(1, self.gpus_used)
        return max(1, len(self.replica_devices))

    def per_replica_batch(self, global_batch: int) -> int:
        return global_batch // self.num_replicas

    def strategy(self) -> Optional[tf.distribute.Strategy]:
        if self.sync_workers:
            return multi_worker.strategy() if tf_config.role().trains else None
        if not self.replica_devices:
            return None
        return tf.distribute.MirroredStrategy(list(self.replica_devices))

    def session_config(self, base: Optional[ConfigProto]) -> Optional[ConfigProto]:
        """base (RunConfig's own, e.g. a cluster's device filters) plus what this plan needs."""
        cpu_replicas = sum(device.startswith('/cpu') for device in self.replica_devices)
        threads = self.intra_op_threads or self.inter_op_threads
        if not (self.xla or self.devices.gpus or cpu_replicas > 1 or threads):
            return base
        config = ConfigProto()
        config.CopyFrom(base or estimator_run_config.get_default_session_config())
        if self.intra_op_threads:
            config.intra_op_parallelism_threads = self.intra_op_threads
        if self.inter_op_threads:
            config.inter_op_parallelism_threads = self.inter_op_threads
        if cpu_replicas > 1:  # one CPU shown as N devices (logical devices make train() hang)
            config.device_count['CPU'] = cpu_replicas
        if self.devices.gpus:
            config.gpu_options.allow_growth = True  # leave GPU memory to other processes
            if not self.gpus_used:
                config.device_count['GPU'] = 0
            elif self.gpus_used < len(self.devices.gpus):
                config.gpu_options.visible_device_list = ','.join(map(str, range(self.gpus_used)))
        if self.xla:
            config.graph_options.optimizer_options.global_jit_level = (
                tf.compat.v1.OptimizerOptions.ON_1)
        return config

    def run_config(self, config: tf.estimator.RunConfig) -> tf.estimator.RunConfig:
        # Evaluation stays on one device: MirroredStrategy's evaluation drops a replica's last
        # partial batch (359 records evaluated as 352 in a trial), and an eval must see them all.
        return config.replace(train_distribute=self.strategy(), eval_distribute=None,
                              session_config=self.session_config(config.session_config))

    def describe(self) -> str:
        if self.sync_workers:
            spread = (f'multi-worker mirrored, synchronous all-reduce over {self.num_replicas} '
                      f'replicas on {self.sync_workers} workers, TF_CONFIG cluster')
        elif self.replica_devices:
            spread = (f'mirrored over {self.num_replicas} replicas '
                      f'({", ".join(self.replica_devices)})')
        else:
            spread = 'one device' + (', TF_CONFIG cluster' if tf_config.role().in_cluster else '')
        auto = ' (--precision=auto)' if self.precision_chosen_by_auto else ''
        return (f'devices: {self.devices.describe()}; distribution: {spread}; precision: '
                f'{self.precision}{auto}; XLA: {"on" if self.xla else "off"}; CPU kernels: '
                f'{"oneDNN" if tf_settings.onednn_enabled() else "Eigen"}; threads: '
                f'{describe_threads(self.intra_op_threads, self.inter_op_threads)}')


def describe_threads(intra_op_threads: int, inter_op_threads: int) -> str:
    def count(threads):
        return str(threads) if threads else '0 (TensorFlow decides)'
    return f'intra-op {count(intra_op_threads)}, inter-op {count(inter_op_threads)}'


def plan(distribution: str = 'none', num_gpus: Optional[int] = None, cpu_replicas: int = 1,
         precision: str = 'float32', xla: bool = False, batch_size: Optional[int] = None,
         devices: Optional[Devices] = None, intra_op_threads: int = 0,
         inter_op_threads: int = 0) -> Plan:
    """Checks the flags against the devices; a UserError says what to do when they do not fit."""
    devices = devices or discover()
    if num_gpus is not None and num_gpus > len(devices.gpus):
        raise UserError(f'--num_gpus={num_gpus}, but {len(devices.gpus)} GPU(s) are visible '
                        f'({devices.describe()}); lower --num_gpus or check CUDA_VISIBLE_DEVICES '
                        'and the GPU install (TF_VARIANT=gpu ./run.sh)')
    gpus = len(devices.gpus) if num_gpus is None else num_gpus
    chosen_by_auto = precision == 'auto'
    sync = distribution == 'multi_worker_mirrored'
    if chosen_by_auto:  # bfloat16 fails under multi_worker_mirrored (multi_worker.check_precision)
        precision = 'float32' if sync else auto_precision(gpus)
    if precision == 'mixed_float16' and not gpus:
        raise UserError('--precision=mixed_float16 needs a GPU (float16 math on a CPU is slow); '
                        f'this machine has {devices.describe()}: use --precision=auto, '
                        'mixed_bfloat16 (CPUs with AVX512-BF16 or AMX) or float32')
    replica_devices = ()
    if distribution == 'mirrored':
        if gpus:
            replica_devices = tuple(f'/gpu:{i}' for i in range(gpus))
        else:
            replica_devices = tuple(f'/cpu:{i}' for i in range(cpu_replicas))
        if len(replica_devices) < 2:
            asked = f', --num_gpus={num_gpus}' if num_gpus is not None else ''
            raise UserError(
                f'--distribution=mirrored needs at least two devices, but this run has one '
                f'({devices.describe()}{asked}); use --distribution=none, or --cpu_replicas=2 '
                'to try mirroring on the CPU')
        if tf_config.role().in_cluster:
            raise UserError('--distribution=mirrored is for one machine; with a TF_CONFIG cluster '
                            'the parameter servers spread training (--distribution=none), or all-reduce '
                            'does (multi_worker_mirrored)')
        if batch_size is not None and batch_size % len(replica_devices):
            raise UserError(f'--batch_size={batch_size} is the global batch and must split evenly '
                            f'over {len(replica_devices)} replicas; use a multiple of '
                            f'{len(replica_devices)}')
    elif cpu_replicas > 1:
        raise UserError('--cpu_replicas only applies with --distribution=mirrored')
    sync_workers = 0
    if sync:
        sync_workers = multi_worker.check_cluster(batch_size, max(1, gpus))
        multi_worker.check_precision(precision, gpus)
    if xla:
        _enable_xla_on_cpu()
    return Plan(devices, distribution, replica_devices, gpus, precision, xla, chosen_by_auto,
                intra_op_threads, inter_op_threads, sync_workers)


def _enable_xla_on_cpu():
    """Without this, auto-clustering leaves CPU ops alone (global_jit_level alone covers GPUs).

    The same switch as TF_XLA_FLAGS=--tf_xla_cpu_global_jit, which TF reads only at import.
    """
    from tensorflow.python.client import _pywrap_tf_session
    _pywrap_tf_session.TF_SetTfXlaCpuGlobalJit(True)


def from_settings(settings) -> Plan:
    """The plan for a trainer's Settings (or anything with the same device fields)."""
    if settings.distribution == 'multi_worker_mirrored':
        multi_worker.check_settings(settings)
    return plan(settings.distribution, settings.num_gpus, settings.cpu_replicas,
                settings.precision, settings.xla, settings.batch_size,
                intra_op_threads=settings.intra_op_threads,
                inter_op_threads=settings.inter_op_threads)


def cpu_has_bfloat16_units() -> Optional[bool]:
    """Whether this CPU does bfloat16 math in hardware (AVX512-BF16 or AMX); None: unknown
    (only Linux's /proc/cpuinfo is read)."""
    try:
        with open('/proc/cpuinfo') as f:  # local: this machine's CPU flags
            flags_line = next((line for line in f if line.startswith('flags')), '')
    except OSError:
        return None
    return bool({'avx512_bf16', 'amx_bf16'} & set(flags_line.split()))


def auto_precision(gpus_used: int) -> str:
    """--precision=auto: mixed_bfloat16 on a CPU known to do bfloat16 in hardware, else float32.

    Emulated bfloat16 is several times slower than float32 (docs/training.md, "GPUs, mixed
    precision and XLA"); GPUs get float32 because mixed precision has not been measured on one
    here.
    """
    return 'mixed_bfloat16' if not gpus_used and cpu_has_bfloat16_units() is True else 'float32'


def log_plan(chosen: Plan):
    logging.info('%s', chosen.describe())
    on_cpu = not chosen.gpus_used
    if chosen.precision == 'mixed_bfloat16' and on_cpu and cpu_has_bfloat16_units() is False:
        logging.warning('--precision=mixed_bfloat16: this CPU has no AVX512-BF16 or AMX, so '
                        'bfloat16 is emulated, several times slower than float32 (13x for '
                        'mnist_cnn on a 2-core AMD EPYC Zen 3); use --precision=auto or float32')
