"""Training FLOPs per example, counted two ways that tests/test_flops.py checks against each other.

From the graph: TensorFlow's profiler (`float_ops`) over the ops one training step runs,
the model_fn built in TRAIN mode on a batch of known shape (the profiler skips ops whose
shapes are not fully known).
From the layer shapes: one multiply-add per weight use, times 2 FLOPs, for every Conv2D and
Dense layer; training does it 3 times: forward, the input gradient and the weight gradient,
except the first layer's input gradient, which nothing needs. tf.gradients builds that one
too, held only by the v1 optimizers' gradient gates (GATE_OP, `.../tuple/group_deps`), but
a traced MNIST CNN step shows it never runs (benchmarks/step_profile.py), so neither
count has it.
Both leave out what costs about one FLOP per activation (bias, ReLU, pooling, batch norm)
as small beside the convolutions; the profiler counts some of those, not all.
"""
from typing import Dict, List, Tuple

import numpy as np
import tensorflow as tf

from models import face_embedding, face_siamese, mnist_cnn, registry

# The op types that hold the multiply-adds the layer-shape count covers.
DENSE_MATH_OPS = ('Conv2D', 'Conv2DBackpropInput', 'Conv2DBackpropFilter', 'MatMul')
TRAINING_PASSES = 3  # forward, input gradient, weight gradient
GRADIENT_GATE = '/tuple/group_deps'


def _training_features(spec, batch_size: int):
    image = [batch_size, *spec.image_shape]
    if spec.input_kind == 'face_pairs':
        return ({'image_a': tf.compat.v1.placeholder(tf.float32, image),
                 'image_b': tf.compat.v1.placeholder(tf.float32, image)},
                tf.compat.v1.placeholder(tf.float32, [batch_size]))
    return ({'image': tf.compat.v1.placeholder(tf.float32, image)},
            tf.compat.v1.placeholder(tf.int32, [batch_size]))


def graph_float_ops(model_name: str, batch_size: int) -> Dict[str, int]:
    """{op type: the profiler's float_ops in one training step of batch_size examples}."""
    spec = registry.get(model_name)
    with tf.Graph().as_default() as graph:
        features, labels = _training_features(spec, batch_size)
        train_op = spec.model_fn(features, labels, tf.estimator.ModeKeys.TRAIN,
                                 spec.default_params).train_op
        step = ops_the_step_runs(graph.as_graph_def(), train_op.name)
    with tf.Graph().as_default() as step_graph:
        tf.graph_util.import_graph_def(step, name='')
        options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
        options['output'] = 'none'
        profile = tf.compat.v1.profiler.profile(step_graph, cmd='op', options=options)
    by_type, nodes = {}, list(profile.children)
    while nodes:  # the op view nests each type under the one before it
        node = nodes.pop()
        by_type[node.name] = node.float_ops
        nodes += node.children
    return by_type


def ops_the_step_runs(graph_def, train_op_name: str):
    """The ops train_op needs, without those only a gradient gate holds: Keras also builds
    ops it never runs (its own symbolic model, on inputs of unknown batch)."""
    nodes = {node.name: node for node in graph_def.node}
    kept, to_visit = set(), [train_op_name]
    while to_visit:
        name = to_visit.pop()
        if name in kept or name.endswith(GRADIENT_GATE):
            continue
        kept.add(name)
        to_visit += [source.lstrip('^').split(':')[0] for source in nodes[name].input]
    step = tf.compat.v1.GraphDef()
    for node in graph_def.node:
        if node.name in kept:
            copy = step.node.add()
            copy.CopyFrom(node)
            del copy.input[:]
            copy.input.extend(source for source in node.input
                              if source.lstrip('^').split(':')[0] in kept)
    return step


def sequential_macs(model: tf.keras.Sequential, input_shape) -> List[Tuple[str, int]]:
    """[(layer name, multiply-adds per example)] for the Conv2D and Dense layers of model."""
    shape, counted = tf.TensorShape([1, *input_shape]), []
    for layer in model.layers:
        output = layer.compute_output_shape(shape)
        if isinstance(layer, tf.keras.layers.Conv2D):
            kernel = np.prod(layer.kernel_size) * shape[-1]
            counted.append((layer.name, int(np.prod(output[1:]) * kernel)))
        elif isinstance(layer, tf.keras.layers.Dense):
            counted.append((layer.name, int(shape[-1] * layer.units)))
        shape = output
    return counted


def training_macs(layer_macs: List[Tuple[str, int]]) -> int:
    """Multiply-adds of a training step on an input nothing trains: every pass of every
    layer, but the first layer's input gradient."""
    return TRAINING_PASSES * sum(m for _, m in layer_macs) - layer_macs[0][1]


def exact_training_flops(model_name: str, batch_size: int) -> int:
    """Training FLOPs per example from the layer shapes (a face pair is the example)."""
    if model_name == 'mnist_cnn':
        network = mnist_cnn.build_network(mnist_cnn.DEFAULT_PARAMS)
        return 2 * training_macs(sequential_macs(network, spec_shape(model_name)))
    if model_name == 'face_embedding':
        params = face_embedding.DEFAULT_PARAMS
        tower = face_siamese.build_tower(params)
        per_photo = training_macs(sequential_macs(tower, spec_shape(model_name)))
        # Every a_i against every b_j: a [B, E] x [E, B] matmul, per pair B x E multiply-adds,
        # and both its input gradients.
        cosines = TRAINING_PASSES * batch_size * params['embedding_size']
        return 2 * (2 * per_photo + cosines)
    raise ValueError(f'no layer-shape count for {model_name}')


def spec_shape(model_name: str):
    return registry.get(model_name).image_shape


def dense_math_flops(by_type: Dict[str, int]) -> int:
    return sum(by_type.get(op_type, 0) for op_type in DENSE_MATH_OPS)
