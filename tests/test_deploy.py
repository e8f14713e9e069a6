"""TFJob and Vertex AI specs: parsed, and each replica's TF_CONFIG -> role and file share.

The TF_CONFIG each replica gets is built here the way the TFJob operator and Vertex
AI build it, and read with common.tf_config.role, the function the loopback launcher
uses: what is deployed is what `./run.sh cluster` runs.
"""
import json

import pytest
import tensorflow as tf
import yaml
from absl import flags

from common import tf_config
from conftest import run_module
from input_fns import image_records, pipeline
from models import registry
from trainer.cluster import deploy, local_cluster, vertex_env

TRAINER_FLAGS = ['--model_dir=gs://bucket/runs/mnist', "--train_files=gs://bucket/mnist/train-*",
                 "--eval_files=gs://bucket/mnist/validation-*", '--train_steps=12000']
FILES = [f'gs://bucket/mnist/train-{i:05d}-of-00010.tfrecord' for i in range(10)]


def print_spec(command, *deploy_flags, trainer_flags=TRAINER_FLAGS, check=True):
    return run_module('trainer.cluster.deploy', command, *deploy_flags, '--', *trainer_flags, check=check)


@pytest.fixture(scope='module')
def tfjob_output():
    return print_spec('tfjob', '--name=mnist', '--image=gcr.io/project/trainer:1', '--workers=2',
                      '--ps=1', '--evaluator', '--gpus=1', '--network_policy').stdout


def operator_tf_configs(tfjob, name='mnist', namespace='default'):
    """{(type, index): TF_CONFIG} as the TFJob operator sets them: lowercase types, every replica
    type but the evaluator in `cluster`, each task at its service's DNS name."""
    replicas = {kind.lower(): spec['replicas']
                for kind, spec in tfjob['spec']['tfReplicaSpecs'].items()}
    cluster = {kind: [f'{name}-{kind}-{i}.{namespace}.svc:2222' for i in range(count)]
               for kind, count in replicas.items() if kind != 'evaluator'}
    return {(kind, i): {'cluster': cluster, 'task': {'type': kind, 'index': i},
                        'environment': 'cloud'}
            for kind, count in replicas.items() for i in range(count)}


def roles_and_shares(tf_configs):
    roles = {key: tf_config.role(json.dumps(config)) for key, config in tf_configs.items()}
    return roles, {key: pipeline.worker_share(FILES, role.readers, role.reader_index) for key, role in roles.items() if role.trains}


def test_tfjob_replicas_containers_ports_and_resources(tfjob_output):
    tfjob, policy = yaml.safe_load_all(tfjob_output)
    assert (tfjob['apiVersion'], tfjob['kind'], tfjob['metadata']['name']) == (
        'kubeflow.org/v1', 'TFJob', 'mnist')
    specs = tfjob['spec']['tfReplicaSpecs']
    assert {kind: spec['replicas'] for kind, spec in specs.items()} == {
        'Chief': 1, 'Worker': 2, 'PS': 1, 'Evaluator': 1}
    for kind, spec in specs.items():
        assert spec['restartPolicy'] == 'OnFailure'
        [container] = spec['template']['spec']['containers']
        assert container['name'] == 'tensorflow'
        assert container['image'] == 'gcr.io/project/trainer:1'
        assert container['args'] == TRAINER_FLAGS + ['--mode=train_and_evaluate']
        assert container['ports'] == [{'name': 'tfjob-port', 'containerPort': 2222}]
        gpus = container['resources'].get('limits', {}).get('nvidia.com/gpu', 0)
        assert gpus == (1 if kind in ('Chief', 'Worker') else 0), kind
        assert {'cpu', 'memory'} <= set(container['resources']['requests'])


def test_network_policy_admits_only_the_jobs_own_pods_on_its_port(tfjob_output):
    tfjob, policy = yaml.safe_load_all(tfjob_output)
    assert policy['kind'] == 'NetworkPolicy' and policy['spec']['policyTypes'] == ['Ingress']
    pod_labels = [spec['template']['metadata']['labels']
                  for spec in tfjob['spec']['tfReplicaSpecs'].values()]
    selector = policy['spec']['podSelector']['matchLabels']
    assert all(selector.items() <= labels.items() for labels in pod_labels)
    [rule] = policy['spec']['ingress']
    assert rule['from'] == [{'podSelector': {'matchLabels': selector}}]
    assert rule['ports'] == [{'protocol': 'TCP', 'port': 2222}]


def test_each_tfjob_replica_gets_its_role_and_its_own_files(tfjob_output):
    tfjob, _ = yaml.safe_load_all(tfjob_output)
    roles, shares = roles_and_shares(operator_tf_configs(tfjob))
    assert roles[('chief', 0)].is_chief and roles[('chief', 0)].reader_index == 0
    assert [roles[('worker', i)].reader_index for i in range(2)] == [1, 2]
    assert all(role.readers == 3 for role in roles.values() if role.trains)
    assert not roles[('ps', 0)].trains and not roles[('evaluator', 0)].trains
    assert sorted(f for share in shares.values() for f in share) == FILES  # each file once
    assert [roles[key].label for key in sorted(roles)] == ['chief', 'evaluator', 'ps0', 'worker0',
                                                           'worker1']


def test_loopback_launcher_derives_the_same_roles():
    launched = local_cluster.tasks(local_cluster.cluster_spec(2, 1), evaluator=True)
    tfjob = yaml.safe_load(deploy.to_yaml(deploy.tfjob_manifests(
        'mnist', 'image', [], workers=2, ps=1, evaluator=True)))
    deployed, _ = roles_and_shares(operator_tf_configs(tfjob))
    local = {label: tf_config.role(json.dumps(config)) for label, config in launched}
    assert local == {role.label: role for role in deployed.values()}


def test_a_master_reads_the_chiefs_share_not_every_file():
    cluster = {'master': ['m:2222'], 'worker': ['w0:2222', 'w1:2222'], 'ps': ['p:2222']}
    roles, shares = roles_and_shares({
        (kind, i): {'cluster': cluster, 'task': {'type': kind, 'index': i}, 'environment': 'cloud'}
        for kind in ('master', 'worker') for i in range(len(cluster[kind]))})
    assert roles[('master', 0)].is_chief and roles[('master', 0)].label == 'master'
    assert [roles[key].reader_index for key in sorted(roles)] == [0, 1, 2]
    assert sorted(f for share in shares.values() for f in share) == FILES


def test_vertex_worker_pools_and_their_roles():
    job = json.loads(print_spec('vertex', '--name=mnist', '--image=gcr.io/p/trainer:1',
                                '--workers=2', '--ps=1', '--evaluator', '--gpus=1',
                                '--accelerator_type=NVIDIA_TESLA_T4').stdout)
    pools = job['jobSpec']['workerPoolSpecs']
    assert [pool['replicaCount'] for pool in pools] == [1, 2, 1, 1]
    assert all(pool['containerSpec'] == {'imageUri': 'gcr.io/p/trainer:1',
                                         'args': TRAINER_FLAGS + ['--mode=train_and_evaluate']}
               for pool in pools)
    assert [pool['machineSpec'].get('acceleratorCount', 0) for pool in pools] == [1, 1, 0, 0]
    # Vertex AI: pools 0-2 are chief, worker, ps in `cluster`; pool 3 is the evaluator, outside it.
    cluster = {kind: [f'{kind}-{i}:2222' for i in range(pool['replicaCount'])]
               for kind, pool in zip(deploy.VERTEX_POOLS[:3], pools)}
    roles, shares = roles_and_shares({
        (kind, i): {'cluster': cluster, 'task': {'type': kind, 'index': i}, 'environment': 'cloud'}
        for kind, pool in zip(deploy.VERTEX_POOLS, pools) for i in range(pool['replicaCount'])})
    assert [roles[key].label for key in sorted(roles)] == ['chief', 'evaluator', 'ps0', 'worker0',
                                                           'worker1']
    assert sorted(f for share in shares.values() for f in share) == FILES


def test_vertex_without_model_dir_uses_its_base_output_dir():
    flags_without_model_dir = [f for f in TRAINER_FLAGS if not f.startswith('--model_dir')]
    job = json.loads(print_spec('vertex', '--name=m', '--image=i', '--workers=0', '--ps=0',
                                '--base_output_dir=gs://bucket/out',
                                trainer_flags=flags_without_model_dir).stdout)
    assert job['jobSpec']['baseOutputDirectory'] == {'outputUriPrefix': 'gs://bucket/out'}
    assert len(job['jobSpec']['workerPoolSpecs']) == 1
    defaults = vertex_env.default_dirs({'AIP_MODEL_DIR': 'gs://bucket/out/model',
                                        'AIP_CHECKPOINT_DIR': 'gs://bucket/out/checkpoints'})
    assert defaults == {'model_dir': 'gs://bucket/out/checkpoints',
                        'export_dir': 'gs://bucket/out/model'}
    flag_values = flags.FlagValues()
    flags.DEFINE_string('model_dir', None, '', flag_values=flag_values)
    flags.DEFINE_string('export_dir', None, '', flag_values=flag_values)
    vertex_env.set_flag_defaults(flag_values, {'AIP_MODEL_DIR': 'gs://bucket/out/model'})
    flag_values(['trainer'])
    assert flag_values.model_dir == flag_values.export_dir == 'gs://bucket/out/model'
    assert vertex_env.default_dirs({}) == {}


@pytest.mark.parametrize('deploy_flags, trainer_flags, message', [
    (['--name=j'], TRAINER_FLAGS, '--image is required'),
    (['--name=j', '--image=i'], ['--model_dir=/tmp/run', '--train_files=x'],
     'must be a bucket'),
    (['--name=j', '--image=i'], ['--train_files=x'], 'need --model_dir=gs://'),
    (['--name=j', '--image=i'], TRAINER_FLAGS + ['--mode=evaluate'], 'runs --mode=train_and'),
    (['--name=j', '--image=i'], TRAINER_FLAGS + ['--distribution=mirrored'], 'is for one machine'),
])
def test_bad_deploy_commands_get_one_line(deploy_flags, trainer_flags, message):
    result = print_spec('tfjob', *deploy_flags, trainer_flags=trainer_flags, check=False)
    assert result.returncode == 2 and result.stdout == ''
    [line] = result.stderr.strip().splitlines()
    assert line.startswith('error: ') and message in line


def test_vertex_tensorboard_folder_gets_the_training_summaries(digit_shards, tmp_path):
    spec = registry.get('mnist_cnn')
    estimator = tf.estimator.Estimator(spec.model_fn, str(tmp_path / 'model'),
                                       params=spec.default_params)
    log_dir = tmp_path / 'tensorboard'
    hooks = vertex_env.tensorboard_hooks(1, True, {'AIP_TENSORBOARD_LOG_DIR': str(log_dir)})
    assert vertex_env.tensorboard_hooks(1, False, {'AIP_TENSORBOARD_LOG_DIR': 'x'}) == []
    estimator.train(image_records.make_input_fn(digit_shards.train_pattern, spec.image_shape, 8,
                                                True), max_steps=2, hooks=hooks)
    [events] = log_dir.iterdir()
    tags = {value.tag for event in tf.compat.v1.train.summary_iterator(str(events))
            for value in event.summary.value}
    assert {'loss', 'accuracy', 'learning_rate'} <= set(tags)
