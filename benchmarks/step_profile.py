"""Where a training step's time goes, by op type: `./run.sh python -m benchmarks.step_profile`.

Trains the MNIST CNN with an Estimator, as the trainer sets it up for --precision and --xla,
on one batch of random images held in memory; after --warmup_steps it traces --steps steps
(RunOptions FULL_TRACE) and sums each op's time by op type. Ops of one step overlap on
several threads, so the sum exceeds the step's wall time: read the shares, not the sums,
and on a loaded machine read them as shares only.
"""
import collections
import json
import tempfile
from typing import Dict, List, Set

import numpy as np
import tensorflow as tf
from absl import flags, logging

from benchmarks import precision_bench
from common import cli
from models import registry
from trainer.cluster import devices
from trainer.observe import timing

FLAGS = flags.FLAGS


class TraceSteps(tf.estimator.SessionRunHook):
    """Full traces of the steps after the first `skip`."""

    def __init__(self, skip: int):
        self.skip, self.seen, self.traces = skip, 0, []

    def before_run(self, run_context):
        self.seen += 1
        if self.seen <= self.skip:
            return None
        options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        return tf.estimator.SessionRunArgs(None, options=options)

    def after_run(self, run_context, run_values):
        if self.seen > self.skip:
            self.traces.append(run_values.run_metadata)


def op_type_of(node_stats) -> str:
    """'Conv2D' from a timeline label 'name = Conv2D(input, filter)'."""
    label = node_stats.timeline_label
    return label.split(' = ', 1)[1].split('(', 1)[0] if ' = ' in label else node_stats.node_name


def microseconds_by_op_type(traces: List[tf.compat.v1.RunMetadata]) -> Dict[str, int]:
    totals = collections.Counter()
    for metadata in traces:
        for device in metadata.step_stats.dev_stats:
            for node in device.node_stats:
                totals[op_type_of(node)] += node.all_end_rel_micros
    return dict(totals)


def nodes_that_ran(traces: List[tf.compat.v1.RunMetadata]) -> Set[str]:
    return {node.node_name for metadata in traces for device in metadata.step_stats.dev_stats
            for node in device.node_stats}


def traced_steps(precision: str, xla: bool, batch_size: int, steps: int,
                 warmup_steps: int) -> List[tf.compat.v1.RunMetadata]:
    spec = registry.get('mnist_cnn')
    rng = np.random.RandomState(0)
    batch = ({'image': rng.rand(batch_size, *spec.image_shape).astype(np.float32)},
             rng.randint(0, 10, batch_size).astype(np.int32))
    plan = devices.plan(precision=precision, xla=xla)
    estimator = timing.timing_estimator(spec.model_fn, spec.default_params, tempfile.mkdtemp(),
                                        plan)
    traced = TraceSteps(warmup_steps)
    estimator.train(lambda: tf.data.Dataset.from_tensors(batch).repeat(),
                    steps=warmup_steps + steps, hooks=[traced])
    return traced.traces


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    totals = microseconds_by_op_type(traced_steps(FLAGS.precision, FLAGS.xla, FLAGS.batch_size,
                                                  FLAGS.steps, FLAGS.warmup_steps))
    everything = sum(totals.values())
    print(f'MNIST CNN, --precision={FLAGS.precision}{" --xla" if FLAGS.xla else ""}, batch '
          f'{FLAGS.batch_size}: op time by type over {FLAGS.steps} traced steps '
          f'(computes in {precision_bench.compute_dtype(FLAGS.precision)})')
    for op_type, micros in sorted(totals.items(), key=lambda item: -item[1]):
        if micros / everything >= 0.005:
            print(f'  {op_type:<32} {100 * micros / everything:5.1f}%  {micros / FLAGS.steps:9.0f} '
                  'us a step')
    print(json.dumps({'precision': FLAGS.precision, 'xla': FLAGS.xla, 'steps': FLAGS.steps,
                      'microseconds_by_op_type': totals}))


if __name__ == '__main__':
    flags.DEFINE_enum('precision', 'mixed_bfloat16', ('float32', 'mixed_bfloat16'),
                      'The policy, as the trainer\'s --precision.')
    flags.DEFINE_bool('xla', False, 'As the trainer\'s --xla.')
    flags.DEFINE_integer('batch_size', 100, 'Examples per step.', lower_bound=1)
    flags.DEFINE_integer('steps', 10, 'Steps traced.', lower_bound=1)
    flags.DEFINE_integer('warmup_steps', 10, 'Steps before tracing.', lower_bound=0)
    cli.run(main, own_modules=[])  # bad flags: one line, exit 2
