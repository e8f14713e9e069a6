"""Which metrics a model's evaluation reports, known before any evaluation runs.

A tuner's objective must name one of them: `deploy katib`, `deploy vertex --hptune` and
`./run.sh sweep` check it up front rather than after a trial has trained. The model's own
metrics come from its model_fn, called in EVAL mode on its serving features in a graph of
their own (nothing runs); the input kind's (LFW's protocol) from the kind.
"""
import dataclasses
import functools
from typing import Optional, Tuple

import tensorflow as tf

from common.errors import UserError
from input_fns import shards
from models import registry
from trainer.input_kinds import registry as input_kinds
from trainer.input_kinds.base import InputOptions


@functools.lru_cache(maxsize=None)
def objective_metrics(model: str, train_files: Optional[str] = None) -> Tuple[str, ...]:
    """The scalar metrics of the model's evaluation, sorted, as the ledger and the Katib line
    name them (global_step aside). A model built from its data's schema is built from the
    schema of train_files (the trainer flags' --train_files): its metrics may name the data's
    classes (accuracy_of_class/NAME)."""
    spec = registry.get(model)
    params = dict(spec.default_params)
    if spec.schema_kind:
        if not train_files:
            raise UserError(f'--model={model} is built from its data\'s schema: give the trainer '
                            'flags --train_files, whose manifest holds it')
        schema = shards.read_schema(train_files, '--train_files')
        if schema['kind'] != spec.schema_kind:
            raise UserError(f'--train_files={train_files}: its manifest holds {schema["kind"]!r} '
                            f'data; --model={model} takes {spec.schema_kind!r} data')
        spec = dataclasses.replace(spec, schema=schema)
        params['schema'] = schema
    kind = input_kinds.for_model(spec)
    with tf.Graph().as_default():
        features = kind.serving_receiver_fn(spec, InputOptions())().features
        labels = tf.compat.v1.placeholder(tf.int64, [None])  # binary heads cast them to float
        estimator_spec = spec.model_fn(features, labels, tf.estimator.ModeKeys.EVAL, params)
        own = {name for name, (value, _) in estimator_spec.eval_metric_ops.items()
               if value.dtype != tf.string}  # a string is a picture's summary
    return tuple(sorted(own | {'loss'} | set(kind.extra_metric_names)))
