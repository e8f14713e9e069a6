"""A training run's flags and model params in TensorBoard's HParams dashboard.

The chief's training run writes a session start (the hyperparameters) into
MODEL_DIR's events when its session starts, and a session end when training
ends; the dashboard finds the metrics by itself: every scalar of the run and of
its eval_NAME runs, latest value first (so the final metrics of a run).
Point TensorBoard at a folder holding several model_dirs to compare runs.
"""
from typing import Dict, Union

import tensorflow as tf
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import summary as hparams_summary

HParamValue = Union[bool, int, float, str]


def run_hparams(flag_values: Dict[str, object], model_fn_params: Dict[str, object]) -> Dict[str, HParamValue]:
    """The values to log: the flags that were set, and the params the model really used.

    The model's params win over the flags of the same name (--learning_rate unset means
    the model's own rate, which is what ran). None is left out; other types become text.
    """
    values = {name: value for name, value in flag_values.items() if value is not None}
    values.update({name: value for name, value in model_fn_params.items() if value is not None})
    return {name: value if isinstance(value, (bool, int, float, str)) else str(value)
            for name, value in sorted(values.items())}


class HParamsHook(tf.estimator.SessionRunHook):
    """Writes the session start (hparams) at the first step, and a successful end when training ends."""

    def __init__(self, model_dir: str, hparams: Dict[str, HParamValue]):
        self._model_dir = model_dir
        self._hparams = hparams

    def begin(self):
        self._global_step = tf.compat.v1.train.get_global_step()
        self._writer = tf.compat.v1.summary.FileWriterCache.get(self._model_dir)

    def after_create_session(self, session, coord):
        self._writer.add_summary(hparams_summary.session_start_pb(self._hparams),
                                 int(session.run(self._global_step)))

    def end(self, session):  # not called when training fails: the session is left open
        self._writer.add_summary(hparams_summary.session_end_pb(api_pb2.STATUS_SUCCESS),
                                 int(session.run(self._global_step)))
        self._writer.flush()
