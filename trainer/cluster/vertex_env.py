"""The folders Vertex AI hands a custom job, used when the trainer's flags name none.

Vertex AI sets AIP_CHECKPOINT_DIR, AIP_MODEL_DIR and AIP_TENSORBOARD_LOG_DIR
(under the job's baseOutputDirectory). Without --model_dir, checkpoints go to
AIP_CHECKPOINT_DIR (else AIP_MODEL_DIR); without --export_dir, exports go to
AIP_MODEL_DIR; training summaries are also written to AIP_TENSORBOARD_LOG_DIR.
"""
import os

import tensorflow as tf
from absl import flags


def default_dirs(environ=None) -> dict:
    """{flag name: folder} for the trainer flags Vertex AI's variables stand in for."""
    environ = os.environ if environ is None else environ
    defaults = {}
    model_dir = environ.get('AIP_CHECKPOINT_DIR') or environ.get('AIP_MODEL_DIR')
    if model_dir:
        defaults['model_dir'] = model_dir
    if environ.get('AIP_MODEL_DIR'):
        defaults['export_dir'] = environ['AIP_MODEL_DIR']
    return defaults


def set_flag_defaults(flag_values=flags.FLAGS, environ=None):
    for name, folder in default_dirs(environ).items():
        flag_values.set_default(name, folder)


class SummariesToHook(tf.estimator.SummarySaverHook):
    """Writes the training summaries to one more folder (Vertex AI's TensorBoard folder)."""

    def __init__(self, output_dir: str, every_n_steps: int):
        super().__init__(save_steps=every_n_steps, output_dir=output_dir,
                         scaffold=tf.compat.v1.train.Scaffold())

    def begin(self):
        self._summary_op = tf.compat.v1.summary.merge_all()  # the graph exists only now
        super().begin()


def tensorboard_hooks(every_n_steps: int, is_chief: bool, environ=None):
    environ = os.environ if environ is None else environ
    log_dir = environ.get('AIP_TENSORBOARD_LOG_DIR')
    return [SummariesToHook(log_dir, every_n_steps)] if log_dir and is_chief else []
