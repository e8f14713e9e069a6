"""Training settings compared side by side, each turn in its own process:
`./run.sh python -m benchmarks.settings_ab --variant='precision=mixed_bfloat16' --variant=...`

A variant is space-separated NAME=VALUE words: lower-case names are the trainer's settings
(precision, xla, batch_size, intra_op_threads, inter_op_threads), upper-case ones environment
variables, such as oneDNN's, which TensorFlow reads once a process; hence a process a turn.
A turn trains --model on one batch of random input held in memory (the step alone), as the
trainer sets it up, warms up and times --steps steps: examples/sec of wall time, and CPU
milliseconds per example (the process's user + system time), which other work on the machine
changes far less than wall time; and, in the same process, a 2048x2048 matmul in the dtype
the variant computes in, as GFLOP per CPU-second, so that training's GFLOP per CPU-second
(FLOPs per example from the layer shapes, benchmarks/flops.py) is also read as a share of
the matmul's: the ceiling fraction in CPU time. Variants take turns, A B C then C B A, for --rounds rounds;
each is read against the first variant round by round (benchmarks/repeats.py), with met,
SHORT or not resolved against 1.0x.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import flags, logging

from benchmarks import flops, machine, precision_bench, repeats
from common import cli
from common.errors import UserError
from models import registry
from trainer.cluster import devices
from trainer.observe import timing

FLAGS = flags.FLAGS
SETTINGS = {'precision': str, 'xla': lambda text: text.lower() in ('true', '1'),
            'batch_size': int, 'intra_op_threads': int, 'inter_op_threads': int}


def parse_variant(text: str):
    """({setting: value}, {ENV: value}) from 'precision=mixed_bfloat16 TF_X=false'."""
    settings, env = {}, {}
    for word in text.split():
        name, equals, value = word.partition('=')
        if not equals or not value:
            raise UserError(f'--variant={text!r}: {word!r} is not NAME=VALUE')
        if name.isupper():
            env[name] = value
        elif name in SETTINGS:
            try:
                settings[name] = SETTINGS[name](value)
            except ValueError:
                raise UserError(f'--variant={text!r}: {name} wants a number, not {value!r}')
        else:
            raise UserError(f'--variant={text!r}: {name!r} is neither an upper-case environment '
                            f'variable nor one of {", ".join(SETTINGS)}')
    return settings, env


def random_batch(spec, batch_size: int):
    rng = np.random.RandomState(0)
    shape = (batch_size, *spec.image_shape)
    if spec.input_kind == 'face_pairs':
        return ({'image_a': rng.rand(*shape).astype(np.float32),
                 'image_b': rng.rand(*shape).astype(np.float32)},
                (rng.rand(batch_size) < 0.5).astype(np.float32))
    return {'image': rng.rand(*shape).astype(np.float32)}, rng.randint(0, 10, batch_size)


class StepClocks(tf.estimator.SessionRunHook):
    """Wall and CPU time at the end of each step."""

    def __init__(self):
        self.wall, self.cpu = [], []

    def after_run(self, run_context, run_values):
        self.wall.append(time.perf_counter())
        self.cpu.append(time.process_time())


def one_turn(variant: str) -> dict:
    settings, _ = parse_variant(variant)  # the parent set the environment
    spec, batch_size = registry.get(FLAGS.model), settings.pop('batch_size', 100)
    plan = devices.plan(**settings)
    estimator = timing.timing_estimator(spec.model_fn, spec.default_params, tempfile.mkdtemp(),
                                        plan)
    batch, clocks = random_batch(spec, batch_size), StepClocks()
    estimator.train(lambda: tf.data.Dataset.from_tensors(batch).repeat(),
                    steps=FLAGS.warmup_steps + FLAGS.steps, hooks=[clocks])
    first = FLAGS.warmup_steps - 1
    examples = FLAGS.steps * batch_size
    cpu_ms_per_example = 1000 * (clocks.cpu[-1] - clocks.cpu[first]) / examples
    dtype = precision_bench.compute_dtype(plan.precision)
    ceiling = machine.matmul_gflops(
        tf.as_dtype(dtype), 2048, 1, 1.0, machine.session_config(
            plan.intra_op_threads, plan.inter_op_threads), clock=time.process_time)[0]
    training = flops.exact_training_flops(FLAGS.model, batch_size) / cpu_ms_per_example / 1e6
    return {'examples_per_sec': examples / (clocks.wall[-1] - clocks.wall[first]),
            'cpu_ms_per_example': cpu_ms_per_example, 'dtype': dtype,
            'cpu_ceiling_fraction': training / ceiling}


def turn_in_a_process(variant: str):
    def turn():
        _, env = parse_variant(variant)
        result = subprocess.run(
            [sys.executable, '-m', 'benchmarks.settings_ab', f'--turn={variant}',
             f'--model={FLAGS.model}', f'--steps={FLAGS.steps}',
             f'--warmup_steps={FLAGS.warmup_steps}'],
            env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3', **env}, capture_output=True,
            text=True, check=False)
        if result.returncode:
            raise RuntimeError(f'turn {variant!r} failed:\n{result.stderr[-3000:]}')
        return json.loads(result.stdout.splitlines()[-1])
    return turn


def main(argv):
    del argv
    logging.set_verbosity(logging.ERROR)
    if FLAGS.turn:
        print(json.dumps(one_turn(FLAGS.turn)))
        return
    if len(FLAGS.variant) < 2:
        raise UserError('--variant: give at least two (the first is the baseline)')
    for variant in FLAGS.variant:
        parse_variant(variant)
    measured = repeats.interleave({v: turn_in_a_process(v) for v in FLAGS.variant}, FLAGS.rounds,
                                  lambda v, i, r: print(f'round {i + 1} {v!r}: {r}', flush=True))
    base = measured[FLAGS.variant[0]]
    print(f'\n{FLAGS.model}, {FLAGS.steps} steps a turn, {FLAGS.rounds} interleaved rounds, '
          f'each against {FLAGS.variant[0]!r} in the same round (median +- half the range):')
    for variant, turns in measured.items():
        wall = repeats.check([t['examples_per_sec'] for t in turns],
                             [t['examples_per_sec'] for t in base], 1.0, True)
        cpu = repeats.check([t['cpu_ms_per_example'] for t in base],
                            [t['cpu_ms_per_example'] for t in turns], 1.0, True)
        print(f'  {variant!r}: wall {wall["ratio"]:.3f}x +-{wall["spread"]:.3f} '
              f'({wall["verdict"]}); CPU per example {cpu["ratio"]:.3f}x less +-'
              f'{cpu["spread"]:.3f} ({cpu["verdict"]}); median CPU '
              f'{np.median([t["cpu_ms_per_example"] for t in turns]):.3f} ms/example, '
              f'{100 * np.median([t["cpu_ceiling_fraction"] for t in turns]):.1f}% of the '
              f'{turns[0]["dtype"]} matmul per CPU-second')


if __name__ == '__main__':
    flags.DEFINE_multi_string('variant', [], 'NAME=VALUE words; the first is the baseline.')
    flags.DEFINE_string('model', 'mnist_cnn', 'A registered model.')
    flags.DEFINE_integer('rounds', 5, 'Interleaved rounds.', lower_bound=1)
    flags.DEFINE_integer('steps', 30, 'Timed training steps a turn.', lower_bound=1)
    flags.DEFINE_integer('warmup_steps', 5, 'Steps before timing.', lower_bound=1)
    flags.DEFINE_string('turn', None, 'Internal: run one turn of this variant, print JSON.')
    cli.run(main, own_modules=[], user_errors=(UserError,))  # bad input: one line, exit 2
