"""Which metrics a model's evaluation reports, known before any evaluation runs.

A tuner's objective must name one of them: `deploy katib`, `deploy vertex --hptune` and
`./run.sh sweep` check it up front rather than after a trial has trained. The model's own
metrics come from its model_fn, called in EVAL mode on its serving features in a graph of
their own (nothing runs); the input kind's (LFW's protocol) from the kind.
"""
import dataclasses
import functools
from typing import Set, Tuple

import tensorflow as tf

from common.errors import UserError
from models import eval_pictures, registry
from trainer.input_kinds import registry as input_kinds
from trainer.input_kinds.base import InputOptions


@functools.lru_cache(maxsize=None)
def objective_metrics(model: str) -> Tuple[str, ...]:
    """The scalar metrics of the model's evaluation, sorted, as the ledger and the Katib line
    name them (global_step aside). A model built from its data's schema is built on each of its
    input kind's example schemas (binary, multi-class, regression...): the metrics of any."""
    spec = registry.get(model)
    kind = input_kinds.for_model(spec)
    if not spec.schema_kind:
        return tuple(sorted(_eval_metrics(spec, kind, dict(spec.default_params))
                            | {'loss'} | set(kind.extra_metric_names)))
    reported = set()
    for schema in kind.example_schemas():
        built = dataclasses.replace(spec, schema=schema)
        try:
            found = _eval_metrics(built, kind, {**spec.default_params, 'schema': schema})
        except UserError:  # a schema this model does not take (a regression label...)
            continue
        # Per-class metrics are named by the example's classes, not the user's.
        reported |= {name for name in found
                     if not name.startswith(eval_pictures.PER_CLASS_ACCURACY)}
    return tuple(sorted(reported | {'loss'} | set(kind.extra_metric_names)))


def _eval_metrics(spec, kind, params) -> Set[str]:
    with tf.Graph().as_default():
        features = kind.serving_receiver_fn(spec, InputOptions())().features
        labels = tf.compat.v1.placeholder(kind.example_label_dtype(spec), [None])
        estimator_spec = spec.model_fn(features, labels, tf.estimator.ModeKeys.EVAL, params)
        return {name for name, (value, _) in estimator_spec.eval_metric_ops.items()
                if value.dtype != tf.string}  # a string is a picture's summary
