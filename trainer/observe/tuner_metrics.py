"""Each evaluation's metrics where hyperparameter tuners read them.

- Katib's StdOut collector: one line of name=value pairs, `accuracy=0.98125 global_step=400
  loss=0.0613`, which its default regex reads. It goes to stdout, except in --mode=evaluate,
  whose stdout is one JSON object per checkpoint: there it goes to stderr (Katib's collector
  reads both: its webhook runs the trial's command with `1>FILE 2>&1`).
- Katib's TensorFlowEvent collector (before Katib 0.18 it reads only tensor summaries): a
  scalar tensor summary per metric in the eval folder, tagged NAME/tensor (Katib takes every
  tag that starts with the metric's name). Neither Estimator's own tag nor plugin metadata:
  TensorBoard, which already draws Estimator's scalar, would draw every point twice.
- Vertex AI: in a trial (CLOUD_ML_TRIAL_ID set), cloudml-hypertune writes --hypertune_metric
  (every metric when not given) to CLOUD_ML_HP_METRIC_FILE, tagged with the trial and step.
"""
import math
import os
from typing import Dict, Optional, TextIO

import hypertune
import tensorflow as tf

from common.errors import UserError
from trainer.model_dir.ledger import LedgerEntry

TRIAL_VARIABLE = 'CLOUD_ML_TRIAL_ID'  # set by Vertex AI in each trial of a tuning job
TENSOR_TAG_SUFFIX = 'tensor'


def scalar_metrics(metrics: Dict) -> Dict[str, float]:
    """The numbers among an evaluation's metrics, by name; a nested report's as OUTER_INNER
    (lfw_protocol_auc), since Katib's regex reads names of letters, digits, _ and - only."""
    scalars = {}
    for name, value in metrics.items():
        if isinstance(value, dict):
            scalars.update({f'{name}_{inner}': number
                            for inner, number in scalar_metrics(value).items()})
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            scalars[name] = value
    return dict(sorted(scalars.items()))


def katib_line(metrics: Dict) -> str:
    """'accuracy=0.98125 global_step=400 loss=0.0613'; NaN and infinities are left out (Katib's
    regex would read an empty value)."""
    return ' '.join(f'{name}={value:.6g}' if isinstance(value, float) else f'{name}={value}'
                    for name, value in scalar_metrics(metrics).items() if math.isfinite(value))


def write_tensor_summaries(eval_dir: str, metrics: Dict, step: int) -> None:
    summary = tf.compat.v1.Summary(value=[
        tf.compat.v1.Summary.Value(tag=f'{name}/{TENSOR_TAG_SUFFIX}', tensor=tf.make_tensor_proto(value, tf.float32))
        for name, value in scalar_metrics(metrics).items()])
    with tf.Graph().as_default():  # the v1 writer refuses to be made in eager mode
        writer = tf.compat.v1.summary.FileWriterCache.get(eval_dir)
    writer.add_summary(summary, step)
    writer.flush()


class TunerReport:
    """Reports each ledger entry of an evaluation to Katib and, in a Vertex AI trial, to Vertex."""

    def __init__(self, stream: TextIO, hypertune_metric: Optional[str] = None):
        self._stream = stream
        self._hypertune_metric = hypertune_metric
        self._hypertune = None  # one per process: it rewrites its file with every report so far

    def report(self, entry: LedgerEntry, eval_dir: Optional[str] = None) -> None:
        """entry: a ledger entry ('evaluated'); eval_dir: where to write the tensor summaries
        (None: they are there already)."""
        metrics = entry.metrics
        print(katib_line(metrics), file=self._stream, flush=True)
        if eval_dir:
            write_tensor_summaries(eval_dir, metrics, entry.step)
        if os.environ.get(TRIAL_VARIABLE):
            self._report_to_vertex(scalar_metrics(metrics), entry)

    def _report_to_vertex(self, metrics: Dict, entry: LedgerEntry) -> None:
        names = [self._hypertune_metric] if self._hypertune_metric else [
            name for name in metrics if name != 'global_step']
        if self._hypertune_metric and self._hypertune_metric not in metrics:
            raise UserError(f'--hypertune_metric={self._hypertune_metric}: the evaluation has no '
                            f'such metric; it has {", ".join(metrics)}')
        self._hypertune = self._hypertune or hypertune.HyperTune()
        for name in names:
            self._hypertune.report_hyperparameter_tuning_metric(
                name, metrics[name], global_step=entry.step, checkpoint_path=entry.checkpoint)
