"""Section 6 of `./run.sh bench`: Estimator training of the MNIST CNN at each precision, with
and without XLA, fed by this service's input_fn, as --precision and --xla set them up.

Each row is a list of turns that benchmarks.input_bench interleaves with the other rows';
a turn builds a fresh Estimator and session, warms up, and times --train_steps steps.
"""
import tempfile

from models import registry
from trainer.cluster import devices
from trainer.observe import timing

SECTION = '6 precision and XLA'
# (row key, --precision, --xla, row name)
SETTINGS = [
    ('precision.float32', 'float32', False, 'MNIST CNN, float32'),
    ('precision.bfloat16', 'mixed_bfloat16', False, 'MNIST CNN, --precision=mixed_bfloat16'),
    ('precision.xla', 'float32', True, 'MNIST CNN, float32 --xla'),
    ('precision.bfloat16_xla', 'mixed_bfloat16', True, 'MNIST CNN, mixed_bfloat16 --xla'),
]
FASTER_KEYS = tuple(key for key, *_ in SETTINGS[1:])


def compute_dtype(key: str) -> str:
    """The dtype a precision row's convolutions and matmuls run in."""
    return 'bfloat16' if 'bfloat16' in key else 'float32'


def training_turn(spec, input_fn, batch_size, plan, work_dir, steps, warmup_steps, hooks=()):
    """One repeat: examples/sec of `steps` training steps of a fresh Estimator after warm-up."""
    def turn():
        estimator = timing.timing_estimator(spec.model_fn, spec.default_params,
                                            tempfile.mkdtemp(dir=work_dir), plan)
        rate = timing.training_rate(estimator, input_fn, steps, 1, warmup_steps, hooks)
        return rate.per_sec * batch_size
    return turn


def precision_rows(input_fn, batch_size, work_dir, steps, warmup_steps, intra_op_threads=0,
                   inter_op_threads=0):
    """[(row key, row name, turn, note)] for benchmarks.input_bench.measure."""
    spec = registry.get('mnist_cnn')
    rows = []
    for key, precision, xla, name in SETTINGS:
        plan = devices.plan(precision=precision, xla=xla, intra_op_threads=intra_op_threads,
                            inter_op_threads=inter_op_threads)
        rows.append((key, name, training_turn(spec, input_fn, batch_size, plan, work_dir, steps,
                                              warmup_steps), ''))
    return rows
