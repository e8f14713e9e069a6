"""A model given as a Keras network (ModelSpec keras_model=BUILD): the service makes its model_fn.

BUILD(params, inputs) returns an uncompiled tf.keras.Model: inputs is {feature name:
tf.TensorSpec of one example}, what the input kind feeds (`image` [28, 28, 1] for the digits;
a table's columns). The model_fn builds it in each mode's graph, calls it on the features (the
one tensor where the input kind feeds one feature, else the dict, which a functional model's
named tf.keras.Input layers or a DenseFeatures layer take) and hands its output, the logits,
to the service's head: so loss, metrics, evaluation pictures, signatures, the optimizer and
schedule flags, precision, weight averaging, checkpoints and best exports are those of a
model_fn model. The layers' regularization losses are added to the training loss (the table
head, tf.estimator's canned one, adds them to evaluation's too and reports
regularization_loss) and their updates (batch norm's moving statistics) run with each
training step.

Uncompiled, because compile's loss, optimizer and metrics would be ignored here (the head and
--optimizer are the service's); a compiled model is refused rather than silently retrained
otherwise. Not tf.keras.estimator.model_to_estimator: that trains with compile's loss and
optimizer, serves the raw model outputs without the heads' signatures (classify, class names)
and writes object-based checkpoints, whose names a model_fn's checkpoints and warm starts do
not share.
"""
import dataclasses
from typing import Callable, Dict

import tensorflow as tf

from common.errors import UserError
from models import heads

# The head a Keras model gets where its ModelSpec names none.
KIND_HEADS = {'image_classification': 'classification', 'table': 'table',
              'csv_features': 'binary', 'face_pairs': 'binary'}


def completed(spec, module: str):
    """spec with the model_fn made from its keras_model, or a UserError naming module."""
    where = f'{module} registers model {spec.name!r}'
    if spec.model_fn is not None:
        raise UserError(f'{where} with both model_fn and keras_model; give one of them')
    head = spec.head or KIND_HEADS.get(spec.input_kind)
    if head not in HEAD_SPECS:
        raise UserError(f'{where} with head={head!r} over input kind {spec.input_kind!r}; name '
                        f'its head: {", ".join(HEAD_SPECS)}')
    missing = [name for name in ('learning_rate', 'optimizer') if name not in spec.default_params]
    if missing:
        raise UserError(f'{where} whose default_params lack {", ".join(missing)}; start them '
                        'from api.TRAINING_PARAMS (the service trains a Keras model)')
    return dataclasses.replace(spec, model_fn=keras_model_fn(spec.keras_model, head, spec.name),
                               head=head)


def keras_model_fn(build: Callable, head: str, name: str) -> Callable:
    """model_fn(features, labels, mode, params) over the network build(params, inputs) returns."""
    def model_fn(features, labels, mode, params):
        inputs = {key: tf.TensorSpec(tensor.shape[1:], tensor.dtype)
                  for key, tensor in features.items()}
        network = built_network(build, params, inputs, name)
        # What was made before the call (a functional model's tf.keras.Input placeholders and
        # the updates and losses of its construction) is not the features' and must not run.
        made_before = set(tf.compat.v1.get_default_graph().get_operations())
        logits = network(features if len(features) > 1 else next(iter(features.values())),
                         training=mode == tf.estimator.ModeKeys.TRAIN)
        update_ops = [op for op in network.updates if _op(op) not in made_before]
        regularization = [loss for loss in network.losses if loss.op not in made_before]
        return HEAD_SPECS[head](features, labels, mode, params, logits, update_ops,
                                regularization)

    # Errors about the model_fn name the user's function, not this one.
    model_fn.__module__, model_fn.__qualname__ = build.__module__, build.__qualname__
    return model_fn


def _op(update):
    return update if isinstance(update, tf.Operation) else update.op


def built_network(build: Callable, params: Dict, inputs: Dict, name: str) -> tf.keras.Model:
    network = build(params, inputs)
    where = f'model {name} ({build.__module__}.{build.__qualname__})'
    if not isinstance(network, tf.keras.Model):
        raise UserError(f'{where} returned {type(network).__name__}; return a tf.keras.Model')
    if getattr(network, 'optimizer', None) is not None:
        raise UserError(f'{where} returned a compiled model; return it uncompiled: the service '
                        'trains it with its own head, loss and --optimizer')
    return network


def _classification(features, labels, mode, params, logits, update_ops, regularization):
    images = features.get('image')
    class_names = (params.get('schema') or {}).get('classes')
    return heads.classification_estimator_spec(
        logits, labels, mode, params, images=images if images is not None and
        images.shape.rank == 4 else None, class_names=class_names, update_ops=update_ops,
        regularization_losses=regularization)


def _binary(features, labels, mode, params, logits, update_ops, regularization):
    return heads.binary_estimator_spec(logits, labels, mode, params, update_ops=update_ops,
                                             regularization_losses=regularization)


def _table(features, labels, mode, params, logits, update_ops, regularization):
    return heads.table_estimator_spec(features, labels, mode, logits, params,
                                           update_ops=update_ops,
                                           regularization_losses=regularization)


# ModelSpec.head's choices: what each makes of the logits.
HEAD_SPECS = {'classification': _classification, 'binary': _binary, 'table': _table}
