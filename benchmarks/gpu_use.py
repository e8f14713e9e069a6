"""How busy the GPU was while a training row was timed, from `nvidia-smi` (the bench on a GPU).

An input-bound step shows as a GPU that waits: utilization tells an input bottleneck from
a slow kernel where examples/sec alone cannot.
"""
import shutil
import subprocess
import time
from typing import List, Optional

import tensorflow as tf

QUERY = ('--query-gpu=utilization.gpu', '--format=csv,noheader,nounits')


def parse_samples(output: str) -> List[float]:
    """Percent values from nvidia-smi's lines (one a GPU a sample); a line that is not a number
    ('[N/A]', a driver message) is left out."""
    samples = []
    for line in output.splitlines():
        try:
            samples.append(float(line.strip()))
        except ValueError:
            continue
    return samples


class UtilizationHook(tf.estimator.SessionRunHook):
    """Samples GPU utilization every `interval_ms` from the end of step `after_steps` (the
    warm-up) to the end of training; mean() is the mean of the samples, over every GPU."""

    def __init__(self, after_steps: int, interval_ms: int = 100, command: str = 'nvidia-smi'):
        self.after_steps, self.interval_ms, self.command = after_steps, interval_ms, command
        self.steps, self.process, self.samples = 0, None, []

    def after_run(self, run_context, run_values):
        self.steps += 1
        if self.steps == self.after_steps and self.process is None:
            self.process = subprocess.Popen(
                [self.command, *QUERY, f'--loop-ms={self.interval_ms}'],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def end(self, session):
        if self.process is None:
            return
        time.sleep(self.interval_ms / 1000)  # at least one sample on a short run
        self.process.terminate()
        output, _ = self.process.communicate(timeout=10)
        self.samples = parse_samples(output)

    def mean(self) -> Optional[float]:
        return sum(self.samples) / len(self.samples) if self.samples else None


def available(command: str = 'nvidia-smi') -> bool:
    return shutil.which(command) is not None
