"""Mixed precision inside the model_fns, loss scaling, and --precision/--xla from the CLI."""
import json

import pytest
import tensorflow as tf

from helpers import run_module
from models import precision, registry
from trainer.cluster import devices

TRAIN = tf.estimator.ModeKeys.TRAIN


def build_graph(model_name, policy, mode=TRAIN):
    """The model_fn's EstimatorSpec and graph under a policy, on placeholder features."""
    spec = registry.get(model_name)
    graph = tf.Graph()
    with graph.as_default():
        if spec.input_kind == 'csv_features':
            features = {'inputs': tf.compat.v1.placeholder(tf.float32, [None, spec.num_features])}
        else:
            features = {'image': tf.compat.v1.placeholder(tf.float32, [None, *spec.image_shape])}
        labels = tf.compat.v1.placeholder(tf.int64, [None])
        model_fn = precision.with_policy(spec.model_fn, policy)
        estimator_spec = model_fn(features, labels, mode, dict(spec.default_params))
    return estimator_spec, graph


def op_types(graph, op_type):
    return {op.get_attr('T').name for op in graph.get_operations() if op.type == op_type}


@pytest.mark.parametrize('model_name, heavy_op', [('mnist_cnn', 'Conv2D'),
                                                  ('csv_mlp', 'MatMul')])
def test_bfloat16_computes_in_16_bits_with_float32_variables_logits_and_loss(model_name, heavy_op):
    estimator_spec, graph = build_graph(model_name, 'mixed_bfloat16')
    assert op_types(graph, heavy_op) >= {'bfloat16'}
    assert estimator_spec.loss.dtype == tf.float32
    assert graph.get_tensor_by_name('logits:0').dtype == tf.float32
    with graph.as_default():
        assert {v.dtype.base_dtype for v in tf.compat.v1.trainable_variables()} == {tf.float32}
    assert tf.keras.mixed_precision.global_policy().name == 'float32'  # restored afterwards


def test_float32_is_untouched_and_float16_scales_the_loss():
    _, graph = build_graph('mnist_cnn', 'float32')
    assert op_types(graph, 'Conv2D') == {'float32'}
    assert not any('loss_scale' in op.name for op in graph.get_operations())
    _, graph = build_graph('mnist_cnn', 'mixed_float16')
    assert op_types(graph, 'Conv2D') >= {'float16'}
    with graph.as_default():
        scale = [v.name for v in tf.compat.v1.global_variables() if 'loss_scale' in v.name]
    assert scale  # the dynamic loss scale and its good-steps counter


def test_cli_trains_with_xla_in_bfloat16_then_evaluates_and_exports_at_auto_precision(
        digit_shards, tmp_path):
    model_dir, export_dir = str(tmp_path / 'model'), str(tmp_path / 'export')
    common = [f'--model_dir={model_dir}', '--batch_size=16']
    trained = run_module('trainer.main', '--mode=train', '--xla', '--train_steps=4',
                         '--precision=mixed_bfloat16',
                         f'--train_files={digit_shards.train_pattern}', *common)
    assert 'devices: ' in trained.stderr and ' CPU cores' in trained.stderr
    assert 'precision: mixed_bfloat16; XLA: on' in trained.stderr
    checkpoint = tf.train.latest_checkpoint(model_dir)
    assert tf.train.load_variable(checkpoint, 'global_step') == 4
    kernel = [name for name, _ in tf.train.list_variables(checkpoint) if name.endswith('kernel')][0]
    assert tf.train.load_variable(checkpoint, kernel).dtype.name == 'float32'
    evaluated = run_module('trainer.main', '--mode=evaluate', '--precision=auto',
                           f'--eval_files={digit_shards.validation_pattern}',
                           f'--export_dir={export_dir}', *common)
    # float32 variables: a checkpoint trained at one precision evaluates at another
    assert f'precision: {devices.auto_precision(0)} (--precision=auto)' in evaluated.stderr
    metrics = json.loads(evaluated.stdout.splitlines()[-1])
    assert metrics['global_step'] == 4 and 0.0 <= metrics['accuracy'] <= 1.0
    loaded = tf.saved_model.load(f'{export_dir}/4')
    probabilities = loaded.signatures['predict_pixels'](pixels=tf.zeros([2, 28, 28, 1]))
    assert probabilities['probabilities'].dtype == tf.float32
