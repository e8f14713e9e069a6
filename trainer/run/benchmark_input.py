"""--mode=benchmark_input: is training input-bound, by how much, and which input stage is slowest?

Times the training input_fn alone, and its pipeline cut short after each earlier
stage, for --benchmark_batches batches; then the model's training step for
--benchmark_train_steps steps on one batch of that input held in memory. Both run
in graph mode as the Estimator runs them (warm-up, median of 3 repetitions).
On a machine without an accelerator the input pipeline and the training step
share the CPU, so in real training the margin is smaller than measured apart.
"""
import json
import shutil
import tempfile
from typing import List, Tuple

import tensorflow as tf

from common.errors import UserError
from input_fns.records import pipeline
from trainer.cluster import devices
from trainer.config.settings import Settings
from trainer.input_kinds import registry as input_kinds
from trainer.observe import timing
from trainer.run import data_schema

REPETITIONS = 3


def stage_costs(stage_rates: List[Tuple[str, float]]) -> List[Tuple[str, float]]:
    """Milliseconds each cumulative stage adds to a batch (never below zero)."""
    costs, previous = [], 0.0
    for name, per_sec in stage_rates:
        total = 1000.0 / per_sec
        costs.append((name, max(total - previous, 0.0)))
        previous = total
    return costs


def verdict(stage_rates: List[Tuple[str, float]], train_steps_per_sec: float) -> str:
    input_per_sec = stage_rates[-1][1]
    slowest, slowest_ms = max(stage_costs(stage_rates), key=lambda cost: cost[1])
    slowest_note = (f'slowest input stage: {slowest} (adds {slowest_ms:.2f} ms a batch; the '
                    f'input_fn takes {1000.0 / input_per_sec:.2f})')
    if input_per_sec < train_steps_per_sec:
        return (f'input-bound: the training step could take {train_steps_per_sec:.1f} batches/sec '
                f'but the input_fn delivers {input_per_sec:.1f} ({train_steps_per_sec / input_per_sec:.2f}x '
                f'short: the step would wait {1 - input_per_sec / train_steps_per_sec:.0%} of the '
                f'time); {slowest_note}')
    return (f'not input-bound: the input_fn delivers {input_per_sec / train_steps_per_sec:.2f}x the '
            f'batches the training step takes ({input_per_sec:.1f} vs {train_steps_per_sec:.1f} '
            f'per sec); {slowest_note}')


def in_memory_input_fn(input_fn):
    """One batch of input_fn's data, held in memory and repeated: the step's ideal input."""
    batch = next(iter(input_fn()))
    batch = tf.nest.map_structure(lambda tensor: tensor.numpy(), batch)
    return lambda: tf.data.Dataset.from_tensors(batch).repeat()


def run(settings: Settings, spec) -> dict:
    """Trains in a temporary folder, never settings.model_dir."""
    stages = input_kinds.for_model(spec).training_input_stages(
        spec, settings.train_files, '--train_files', settings.batch_size, settings.random_seed,
        settings.input_options)
    batches = max(1, settings.benchmark_batches // REPETITIONS)
    plan = devices.from_settings(settings)
    if plan.num_replicas > 1:
        raise UserError('--mode=benchmark_input times one device: drop --distribution=mirrored')
    precision = f'--precision={plan.precision}{" --xla" if plan.xla else ""}'
    print(f'benchmark_input: --model={spec.name} --batch_size={settings.batch_size} {precision}, '
          f'{batches * REPETITIONS} batches a stage (median of {REPETITIONS}), graph mode',
          flush=True)
    stage_rates = []
    for name, make_dataset in stages:
        # Every stage as the trainer reads the last (input_fns.records.pipeline.without_autotuner).
        rate = timing.dataset_rate(lambda make=make_dataset: pipeline.without_autotuner(make()),
                                   repetitions=REPETITIONS, steps=batches,
                                   warmup_steps=max(2, batches // 5))
        stage_rates.append((name, rate.per_sec))
        print(f'  {name:<40} {rate.per_sec:10.1f} batches/sec {1000 / rate.per_sec:9.2f} ms/batch',
              flush=True)

    model_dir = tempfile.mkdtemp(prefix='benchmark_input-')
    try:
        estimator = timing.timing_estimator(spec.model_fn,
                                            data_schema.estimator_params(settings, spec),
                                            model_dir, plan)
        steps = max(1, settings.benchmark_train_steps // REPETITIONS)
        train = timing.training_rate(estimator, in_memory_input_fn(stages[-1][1]), steps,
                                     REPETITIONS, warmup_steps=max(2, steps // 5))
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)  # local: the benchmark's own temporary folder
    print(f'  {"training step, input in memory":<40} {train.per_sec:10.1f} steps/sec   '
          f'{1000 / train.per_sec:9.2f} ms/step', flush=True)
    result = {
        'model': spec.name, 'batch_size': settings.batch_size, 'precision': plan.precision,
        'xla': plan.xla,
        'stages': [{'stage': name, 'batches_per_sec': per_sec, 'adds_ms': cost}
                   for (name, per_sec), (_, cost) in zip(stage_rates, stage_costs(stage_rates))],
        'train_steps_per_sec': train.per_sec,
        'input_bound': stage_rates[-1][1] < train.per_sec,
        'verdict': verdict(stage_rates, train.per_sec),
    }
    print(f'verdict: {result["verdict"]}')
    print(json.dumps(result), flush=True)
    return result
