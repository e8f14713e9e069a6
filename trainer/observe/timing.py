"""Rates measured as the Estimator runs things: graph mode, warm-up, then the median of repetitions."""
import dataclasses
import statistics
import time
from typing import Callable, List, Optional

import tensorflow as tf

from models import precision


@dataclasses.dataclass
class Rate:
    per_sec: float  # the median over repetitions
    repetitions: List[float]


def _run_for(run_once: Callable, steps: Optional[int], seconds: float) -> float:
    """Calls per second of run_once, over `steps` calls, or (steps=None) about `seconds`."""
    start, done = time.perf_counter(), 0
    while (done < steps) if steps else (time.perf_counter() - start < seconds):
        run_once()
        done += 1
    return done / (time.perf_counter() - start)


def median_rate(run_once: Callable, repetitions: int = 5, steps: Optional[int] = None,
                seconds: float = 1.0, warmup_steps: int = 5, warmup_seconds: float = 0.0) -> Rate:
    """Warm-up (at least warmup_steps calls and warmup_seconds), then timed repetitions."""
    start, done = time.perf_counter(), 0
    while done < warmup_steps or time.perf_counter() - start < warmup_seconds:
        run_once()
        done += 1
    rates = [_run_for(run_once, steps, seconds) for _ in range(repetitions)]
    return Rate(statistics.median(rates), rates)


def consume_op(elements):
    """An op that needs every tensor of elements computed, and fetches none of them."""
    return tf.group(tf.nest.flatten(elements))


def dataset_rate(make_dataset: Callable[[], tf.data.Dataset], **timing) -> Rate:
    """Elements (batches) per second a dataset delivers to a graph-mode session."""
    with tf.Graph().as_default():
        elements = tf.compat.v1.data.make_one_shot_iterator(make_dataset()).get_next()
        consume = consume_op(elements)
        with tf.compat.v1.Session() as session:
            return median_rate(lambda: session.run(consume), **timing)


class StepTimes(tf.estimator.SessionRunHook):
    """The time at the end of each training step."""

    def __init__(self):
        self.times = []

    def after_run(self, run_context, run_values):
        self.times.append(time.perf_counter())


def timing_estimator(model_fn, params, model_dir: str, plan=None) -> tf.estimator.Estimator:
    """An Estimator that writes no checkpoints or summaries while it is timed.

    plan (trainer.cluster.devices.Plan): the precision, XLA and devices to time it with.
    """
    config = tf.estimator.RunConfig(model_dir=model_dir, save_checkpoints_steps=None,
                                    save_checkpoints_secs=None, save_summary_steps=0,
                                    log_step_count_steps=None)
    if plan is not None:
        config = plan.run_config(config)
        model_fn = precision.with_policy(model_fn, plan.precision)
    return tf.estimator.Estimator(model_fn, config=config, params=params)


def training_rate(estimator: tf.estimator.Estimator, input_fn, steps: int, repetitions: int = 3,
                  warmup_steps: int = 5, hooks=()) -> Rate:
    """Training steps per second: warm-up steps, then `repetitions` runs of `steps` steps."""
    warmup_steps = max(warmup_steps, 1)  # timing starts at the end of a step
    step_times = StepTimes()
    estimator.train(input_fn, steps=warmup_steps + steps * repetitions,
                    hooks=[step_times, *hooks])
    times = step_times.times[warmup_steps - 1:]
    rates = [steps / (times[(i + 1) * steps] - times[i * steps]) for i in range(repetitions)]
    return Rate(statistics.median(rates), rates)
