"""A model_fn's mistakes named at its first call, not as a TensorFlow stack dump from inside
Estimator: no EstimatorSpec returned for a mode, an EstimatorSpec refused by its own checks
(a PREDICT spec without predictions...), an export with no signature to serve, or
--class_weights given to a model_fn whose loss ignores them."""
import os
import sys

import tensorflow as tf

from common.errors import UserError
from models import class_weights

ESTIMATOR_SPEC_FILE = sys.modules[tf.estimator.EstimatorSpec.__module__].__file__
# What each mode's EstimatorSpec needs, for the message.
NEEDS = {tf.estimator.ModeKeys.TRAIN: 'loss= and train_op=',
         tf.estimator.ModeKeys.EVAL: 'loss= (and eval_metric_ops=)',
         tf.estimator.ModeKeys.PREDICT: 'predictions= and export_outputs= (the signatures an '
                                        'export serves)'}


def checked(model_fn, model_name: str):
    """model_fn, whose EstimatorSpec mistakes are UserErrors naming the model and the mode."""
    where = (f'model {model_name} ({model_fn.__module__}.'
             f'{getattr(model_fn, "__qualname__", type(model_fn).__name__)})')

    def model_fn_checked(features, labels, mode, params):  # the argument names Estimator reads
        try:
            spec = model_fn(features, labels, mode, params)
        except (ValueError, TypeError) as error:
            if not _raised_by_estimator_spec(error):
                raise
            raise UserError(f'{where}, mode {mode}: tf.estimator.EstimatorSpec refused it: '
                            f'{error}; give {NEEDS[mode]}') from None
        if not isinstance(spec, tf.estimator.EstimatorSpec):
            raise UserError(f'{where} returned {type(spec).__name__} for mode {mode}; return '
                            f'a tf.estimator.EstimatorSpec for every mode (with {NEEDS[mode]})')
        if mode == tf.estimator.ModeKeys.PREDICT and not spec.export_outputs:
            raise UserError(f'{where}: its PREDICT EstimatorSpec has no export_outputs; give '
                            f'{NEEDS[mode]}')
        if (mode == tf.estimator.ModeKeys.TRAIN and params.get('class_weights')
                and not tf.compat.v1.get_collection(class_weights.APPLIED)):
            raise UserError(f'--class_weights={params["class_weights"]}: {where} does not weigh '
                            'its loss by class (the heads of api.classification_estimator_spec '
                            'and api.table_estimator_spec do); leave it out')
        return spec

    return model_fn_checked


def _raised_by_estimator_spec(error: Exception) -> bool:
    """Whether EstimatorSpec's constructor (or a check it calls) raised error."""
    trace = error.__traceback__
    while trace is not None:
        code = trace.tb_frame.f_code
        if code.co_name == '__new__' and os.path.samefile(code.co_filename, ESTIMATOR_SPEC_FILE):
            return True
        trace = trace.tb_next
    return False
