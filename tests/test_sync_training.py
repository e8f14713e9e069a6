"""--distribution=multi_worker_mirrored: its checks, and the ps-less jobs deploy --sync prints.

Training itself runs in tests/test_cluster_sync.py (a loopback cluster: slow).
"""
import json

import jsonschema
import pytest
import yaml

from common.errors import UserError
from helpers import run_module
from test_deploy import (FILES, TFJOB_SCHEMA, TRAINER_FLAGS, operator_tf_configs, print_spec,
                         roles_and_shares)
from trainer.cluster import devices, multi_worker
from trainer.config.settings import Settings
from trainer.deploy import vertex_job

CPU_ONLY = devices.Devices(cpu_cores=2, gpus=())
SYNC = '--distribution=multi_worker_mirrored'


def tf_config(cluster, task_type='chief', index=0):
    return json.dumps({'cluster': cluster, 'task': {'type': task_type, 'index': index}})


@pytest.mark.parametrize('cluster, message', [
    (None, 'needs a TF_CONFIG cluster of a chief and workers: start one with ./run.sh cluster '
           '--sync'),
    ({'chief': ['h:1'], 'worker': ['h:2'], 'ps': ['h:3']}, "cluster has 1 ps task"),
    ({'master': ['h:1'], 'worker': ['h:2']}, 'names the chief "master"'),
])
def test_sync_training_refuses_a_cluster_it_cannot_run_on(monkeypatch, cluster, message):
    if cluster:
        monkeypatch.setenv('TF_CONFIG', tf_config(cluster, next(iter(cluster))))
    else:
        monkeypatch.delenv('TF_CONFIG', raising=False)
    with pytest.raises(UserError, match=message):
        devices.plan('multi_worker_mirrored', devices=CPU_ONLY)


def test_the_global_batch_is_shared_among_the_workers(monkeypatch):
    cluster = {'chief': ['h:1'], 'worker': ['h:2', 'h:3']}
    monkeypatch.setenv('TF_CONFIG', tf_config(cluster, 'worker', 1))
    plan = devices.plan('multi_worker_mirrored', batch_size=96, devices=CPU_ONLY)
    assert (plan.sync_workers, plan.num_replicas, plan.per_replica_batch(96)) == (3, 3, 32)
    assert 'synchronous all-reduce over 3 replicas on 3 workers' in plan.describe()
    with pytest.raises(UserError, match='must split evenly over 3 replicas'):
        devices.plan('multi_worker_mirrored', batch_size=100, devices=CPU_ONLY)


def test_sync_training_on_a_cpu_keeps_float32(monkeypatch):
    monkeypatch.setenv('TF_CONFIG', tf_config({'chief': ['h:1'], 'worker': ['h:2']}))
    monkeypatch.setattr(devices, 'cpu_has_bfloat16_units', lambda: True)
    assert devices.plan('multi_worker_mirrored', precision='auto',
                        devices=CPU_ONLY).precision == 'float32'
    with pytest.raises(UserError, match='use --precision=float32'):
        devices.plan('multi_worker_mirrored', precision='mixed_bfloat16', devices=CPU_ONLY)


def test_the_evaluator_of_a_sync_cluster_evaluates_on_one_device(monkeypatch):
    monkeypatch.setenv('TF_CONFIG', tf_config({'chief': ['h:1'], 'worker': ['h:2']}, 'evaluator'))
    plan = devices.plan('multi_worker_mirrored', devices=CPU_ONLY)
    assert plan.strategy() is None  # no collective-ops server in the eval job


@pytest.mark.parametrize('settings, message', [
    (dict(mode='train'), 'runs in --mode=train_and_evaluate'),
    (dict(mode='train_and_evaluate', early_stopping_eval_name='val'), 'stop at different steps'),
])
def test_sync_training_refuses_modes_and_early_stopping_it_cannot_do(settings, message):
    with pytest.raises(UserError, match=message):
        multi_worker.check_settings(Settings(distribution='multi_worker_mirrored', **settings))


def test_the_trainer_without_a_cluster_says_so_in_one_line(tmp_path, digit_shards):
    result = run_module('trainer.main', '--mode=train_and_evaluate', f'--model_dir={tmp_path}',
                        f'--train_files={digit_shards.train_pattern}',
                        f'--eval_files={digit_shards.validation_pattern}', SYNC, check=False)
    assert result.returncode == 2 and 'Traceback' not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(
        'error: --distribution=multi_worker_mirrored needs a TF_CONFIG cluster')


@pytest.fixture(scope='module')
def sync_tfjob():
    output = print_spec('tfjob', '--sync', '--name=mnist', '--image=gcr.io/p/trainer:1',
                        '--workers=2', '--evaluator').stdout
    [tfjob] = yaml.safe_load_all(output)
    return tfjob


def test_tfjob_sync_has_no_ps_and_every_replica_trains_synchronously(sync_tfjob):
    with open(TFJOB_SCHEMA) as f:
        jsonschema.validate(sync_tfjob, json.load(f))
    specs = sync_tfjob['spec']['tfReplicaSpecs']
    assert {kind: spec['replicas'] for kind, spec in specs.items()} == {
        'Chief': 1, 'Worker': 2, 'Evaluator': 1}
    args = {kind: spec['template']['spec']['containers'][0]['args'] for kind, spec in specs.items()}
    assert all(SYNC in replica_args for replica_args in args.values())
    assert args['Chief'][-1] == '--wait_for_eval_secs=600'


def test_each_sync_replica_passes_the_trainers_checks_and_reads_its_share(sync_tfjob, monkeypatch):
    """The operator puts the evaluator in every replica's cluster too."""
    configs = operator_tf_configs(sync_tfjob)
    roles, shares = roles_and_shares(configs)
    assert [roles[key].reader_index for key in [('chief', 0), ('worker', 0), ('worker', 1)]] == [
        0, 1, 2]
    assert sorted(f for share in shares.values() for f in share) == FILES
    for config in configs.values():
        monkeypatch.setenv('TF_CONFIG', json.dumps(config))
        assert devices.plan('multi_worker_mirrored', batch_size=99,
                            devices=CPU_ONLY).sync_workers == 3


def test_vertex_sync_leaves_the_ps_pool_empty():
    job = json.loads(print_spec('vertex', '--sync', '--name=mnist', '--image=i', '--workers=2',
                                '--evaluator').stdout)
    pools = job['jobSpec']['workerPoolSpecs']
    assert [pool.get('replicaCount', 0) for pool in pools] == [1, 2, 0, 1]
    assert pools[2] == {} and len(vertex_job.VERTEX_POOLS) == len(pools)
    assert all(SYNC in pool['containerSpec']['args'] for pool in pools if pool)


@pytest.mark.parametrize('command, deploy_flags, trainer_flags, message', [
    ('tfjob', ['--sync', '--ps=1'], TRAINER_FLAGS, '--sync trains without parameter servers'),
    ('tfjob', [], TRAINER_FLAGS + [SYNC], 'give deploy --sync'),
    ('vertex', ['--sync'], TRAINER_FLAGS + ['--distribution=none'], 'drop --distribution=none'),
    ('katib', ['--sync'], TRAINER_FLAGS, 'tuning trials train with parameter servers'),
])
def test_bad_sync_deploy_commands_get_one_line(command, deploy_flags, trainer_flags, message):
    result = print_spec(command, '--name=m', '--image=i', *deploy_flags,
                        trainer_flags=trainer_flags, check=False)
    assert result.returncode == 2 and result.stdout == ''
    [line] = result.stderr.strip().splitlines()
    assert message in line


def test_the_loopback_launcher_refuses_sync_with_parameter_servers():
    result = run_module('trainer.cluster.local_cluster', '--sync', '--ps=1',
                        '--nocluster_private_network', check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        'error: --sync trains without parameter servers: drop --ps=1 (or give --ps=0)')
