"""Section 6 of `./run.sh bench`: Estimator training of the MNIST CNN at each precision, with
and without XLA, fed by this service's input_fn, as --precision and --xla set them up.

Each setting is timed in two rounds, the second in reverse order, so that a machine
getting busier or quieter during the run favours none of them; a row's value is the
median of all its repetitions.
"""
import statistics
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
ROUNDS = 2


def precision_rows(input_fn, batch_size, work_dir, results, steps, repetitions, warmup_steps):
    spec = registry.get('mnist_cnn')
    rates = {key: [] for key, *_ in SETTINGS}
    per_round = max(1, -(-repetitions // ROUNDS))
    for round_index in range(ROUNDS):
        for key, precision, xla, _ in (SETTINGS if round_index % 2 == 0 else SETTINGS[::-1]):
            plan = devices.plan(precision=precision, xla=xla)
            estimator = timing.timing_estimator(spec.model_fn, spec.default_params,
                                                tempfile.mkdtemp(dir=work_dir), plan)
            rate = timing.training_rate(estimator, input_fn, steps, per_round, warmup_steps)
            rates[key] += rate.repetitions
    for key, _, _, name in SETTINGS:
        rate = timing.Rate(statistics.median(rates[key]), rates[key])
        results.add(key, SECTION, name, rate.per_sec * batch_size, 'examples/s', rate)
