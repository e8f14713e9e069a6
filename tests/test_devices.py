"""Devices, distribution and their checks; MirroredStrategy on two CPU devices."""
import json

import numpy as np
import pytest
import tensorflow as tf

from common.errors import UserError
from helpers import run_module
from input_fns.images import image_records
from models import registry
from trainer.cluster import devices

CPU_ONLY = devices.Devices(cpu_cores=2, gpus=())
TWO_GPUS = devices.Devices(cpu_cores=8, gpus=('GPU A', 'GPU B'))


@pytest.mark.parametrize('kwargs, message', [
    (dict(distribution='mirrored'), '--distribution=mirrored needs at least two devices'),
    (dict(precision='mixed_float16'), '--precision=mixed_float16 needs a GPU'),
    (dict(num_gpus=1), '--num_gpus=1, but 0 GPU'),
    (dict(distribution='mirrored', cpu_replicas=2, batch_size=33), 'split evenly over 2'),
    (dict(cpu_replicas=2), '--cpu_replicas only applies with --distribution=mirrored'),
])
def test_flags_that_do_not_fit_the_devices_say_what_to_do(kwargs, message):
    with pytest.raises(UserError, match=message):
        devices.plan(devices=CPU_ONLY, **kwargs)


def test_mirrored_refuses_a_tf_config_cluster(monkeypatch):
    monkeypatch.setenv('TF_CONFIG', json.dumps({'cluster': {'chief': ['h:1'], 'ps': ['h:2']},
                                                'task': {'type': 'chief', 'index': 0}}))
    with pytest.raises(UserError, match='for one machine'):
        devices.plan('mirrored', devices=TWO_GPUS)


@pytest.mark.parametrize('bfloat16_units, on, expected', [
    (True, CPU_ONLY, 'mixed_bfloat16'), (False, CPU_ONLY, 'float32'), (None, CPU_ONLY, 'float32'),
    (True, TWO_GPUS, 'float32'),
])
def test_auto_precision_takes_bfloat16_only_on_a_cpu_that_does_it_in_hardware(
        monkeypatch, bfloat16_units, on, expected):
    monkeypatch.setattr(devices, 'cpu_has_bfloat16_units', lambda: bfloat16_units)
    chosen = devices.plan(precision='auto', devices=on)
    assert chosen.precision == expected
    assert f'precision: {expected} (--precision=auto)' in chosen.describe()
    assert '(--precision=auto)' not in devices.plan(precision=expected, devices=on).describe()


def test_emulated_bfloat16_warns_and_names_the_fix(monkeypatch, caplog):
    monkeypatch.setattr(devices, 'cpu_has_bfloat16_units', lambda: False)
    devices.log_plan(devices.plan(precision='mixed_bfloat16', devices=CPU_ONLY))
    assert 'bfloat16 is emulated' in caplog.text and 'use --precision=auto' in caplog.text
    caplog.clear()
    monkeypatch.setattr(devices, 'cpu_has_bfloat16_units', lambda: True)
    devices.log_plan(devices.plan(precision='mixed_bfloat16', devices=CPU_ONLY))
    assert 'emulated' not in caplog.text


def test_gpu_plans():
    mirrored = devices.plan('mirrored', batch_size=64, devices=TWO_GPUS)
    assert mirrored.replica_devices == ('/gpu:0', '/gpu:1') and mirrored.per_replica_batch(64) == 32
    assert mirrored.session_config(None).gpu_options.allow_growth
    one = devices.plan(num_gpus=1, precision='mixed_float16', devices=TWO_GPUS).session_config(None)
    assert one.gpu_options.visible_device_list == '0'
    assert devices.plan(num_gpus=0, devices=TWO_GPUS).session_config(None).device_count['GPU'] == 0


def test_session_config_keeps_the_cluster_settings_and_adds_xla():
    base = tf.compat.v1.ConfigProto(device_filters=['/job:ps', '/job:chief'])
    config = devices.plan(xla=True, devices=CPU_ONLY).session_config(base)
    assert list(config.device_filters) == ['/job:ps', '/job:chief']
    assert config.graph_options.optimizer_options.global_jit_level == (
        tf.compat.v1.OptimizerOptions.ON_1)
    assert devices.plan(devices=CPU_ONLY).session_config(base) is base  # nothing to add


class ReplicaLosses(tf.estimator.SessionRunHook):
    """Each replica's loss at every step, and the device each replica's loss ran on."""

    def begin(self):
        graph = tf.compat.v1.get_default_graph()
        self.tensors = {name: graph.get_tensor_by_name(name)
                        for name in ('cross_entropy:0', 'replica_1/cross_entropy:0')}
        self.devices = {name: tensor.device for name, tensor in self.tensors.items()}
        self.losses = []

    def before_run(self, run_context):
        return tf.estimator.SessionRunArgs(self.tensors)

    def after_run(self, run_context, run_values):
        self.losses.append(run_values.results)


def train_and_evaluate(digit_shards, model_dir, plan, steps=25, batch_size=32):
    spec = registry.get('mnist_cnn')
    config = plan.run_config(tf.estimator.RunConfig(
        model_dir=str(model_dir), tf_random_seed=0, save_checkpoints_steps=steps,
        log_step_count_steps=None))
    estimator = tf.estimator.Estimator(spec.model_fn, config=config, params=spec.default_params)
    train_fn = image_records.make_input_fn(digit_shards.train_pattern, spec.image_shape,
                                           plan.per_replica_batch(batch_size), True, seed=0)
    hooks = [ReplicaLosses()] if plan.num_replicas == 2 else []
    estimator.train(train_fn, max_steps=steps, hooks=hooks)
    eval_fn = image_records.make_input_fn(digit_shards.validation_pattern, spec.image_shape,
                                          batch_size, False)
    return estimator.evaluate(eval_fn), hooks


def test_mirrored_on_two_cpu_devices_trains_both_replicas_like_one_device(digit_shards, tmp_path):
    mirrored = devices.plan('mirrored', cpu_replicas=2, batch_size=32, devices=CPU_ONLY)
    assert mirrored.replica_devices == ('/cpu:0', '/cpu:1')
    two, [replicas] = train_and_evaluate(digit_shards, tmp_path / 'two', mirrored)
    one, _ = train_and_evaluate(digit_shards, tmp_path / 'one', devices.plan(devices=CPU_ONLY))

    assert replicas.devices['cross_entropy:0'].endswith('CPU:0')
    assert replicas.devices['replica_1/cross_entropy:0'].endswith('CPU:1')
    losses = np.array([[step['cross_entropy:0'], step['replica_1/cross_entropy:0']]
                       for step in replicas.losses])
    assert len(losses) == 25 and np.isfinite(losses).all()
    assert (losses[:, 0] != losses[:, 1]).mean() > 0.9  # each replica had its own half-batch
    assert losses[-5:].mean() < losses[:5].mean() / 2  # both learned: shared, synced weights
    assert two['global_step'] == one['global_step'] == 25
    assert two['accuracy'] > 0.85 and abs(two['accuracy'] - one['accuracy']) < 0.1
    assert two['loss'] < 3 * one['loss'] + 0.1 and one['loss'] < 3 * two['loss'] + 0.1


def test_cli_refuses_mirroring_one_device_in_one_line(tmp_path, digit_shards):
    result = run_module('trainer.main', '--mode=train', f'--model_dir={tmp_path}',
                        f'--train_files={digit_shards.train_pattern}', '--distribution=mirrored',
                        check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith(
        'error: --distribution=mirrored needs at least two devices')
    assert 'Traceback' not in result.stderr


def test_thread_flags_reach_the_estimators_session_config_and_the_log(tmp_path, caplog):
    from trainer.config.settings import Settings
    from trainer.run import experiment
    caplog.set_level('INFO', logger='absl')
    settings = Settings(model_dir=str(tmp_path), intra_op_threads=3, inter_op_threads=2)
    plan = devices.from_settings(settings)
    estimator = experiment.build_estimator(settings, registry.get('mnist_cnn'), plan)
    config = estimator.config.session_config
    assert (config.intra_op_parallelism_threads, config.inter_op_parallelism_threads) == (3, 2)
    assert 'threads: intra-op 3, inter-op 2' in caplog.text
    assert config.allow_soft_placement  # the rest of Estimator's default session config stays
    default = devices.plan(devices=CPU_ONLY).session_config(None)
    assert default is None  # unset: RunConfig's own, TensorFlow decides
    assert 'intra-op 0 (TensorFlow decides)' in devices.plan(devices=CPU_ONLY).describe()
