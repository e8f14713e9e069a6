"""TFJob and Vertex AI specs: parsed, checked against the TFJob CRD's schema, and each replica's
TF_CONFIG -> role and file share.

The TF_CONFIG each replica gets is built here the way the TFJob operator and Vertex
AI build it, and read with common.tf_config.role, the function the loopback launcher
uses: what is deployed is what `./run.sh cluster` runs.
"""
import copy
import json
import os

import jsonschema
import pytest
import tensorflow as tf
import yaml
from absl import flags

from common import tf_config
from helpers import REPO, run_module
from input_fns.images import image_records
from input_fns.records import pipeline
from models import registry
from tests.containers.tfjob_operator import TFJobRun
from trainer.cluster import local_cluster, vertex_env
from trainer.deploy import tfjob as tfjob_spec, vertex_job

TRAINER_FLAGS = ['--model_dir=gs://bucket/runs/mnist', "--train_files=gs://bucket/mnist/train-*",
                 "--eval_files=gs://bucket/mnist/validation-*", '--train_steps=12000']
FILES = [f'gs://bucket/mnist/train-{i:05d}-of-00010.tfrecord' for i in range(10)]
ARGS = TRAINER_FLAGS + ['--mode=train_and_evaluate']
# The TFJob v1 CRD's openAPIV3Schema (tests/data/README.md says from where).
TFJOB_SCHEMA = os.path.join(REPO, 'tests', 'data', 'tfjob_v1_openapi_schema.json')


def print_spec(command, *deploy_flags, trainer_flags=TRAINER_FLAGS, check=True):
    return run_module('trainer.deploy', command, *deploy_flags, '--', *trainer_flags, check=check)


@pytest.fixture(scope='module')
def tfjob_output():
    return print_spec('tfjob', '--name=mnist', '--image=gcr.io/project/trainer:1', '--workers=2',
                      '--ps=1', '--evaluator', '--gpus=1', '--network_policy',
                      '--env_from_secret=s3-credentials', '--env_from_secret=extra.settings',
                      '--env=S3_ENDPOINT=https://s3.example:9000', '--env=AWS_REGION=eu-west-1',
                      '--service_account=trainer-sa', '--grace_period_secs=90',
                      '--backoff_limit=3').stdout


def operator_run(tfjob):
    """The emulated operator of `./run.sh test-container`; only its TF_CONFIG is used here."""
    return TFJobRun(tfjob, secrets={}, network='', log_dir='', say=print)


def operator_tf_configs(tfjob):
    """{(type, index): TF_CONFIG dict} as the operator sets them, the evaluator in `cluster` too."""
    run = operator_run(tfjob)
    return {(r.task_type, r.index): json.loads(run.tf_config(r)) for r in run.replicas}


def test_tf_config_is_the_operators_own():
    # Expected string: the operator's pkg/controller.v1/tensorflow/pod_test.go (release-1.9),
    # "should generate desired cluster spec", a TFJob with a worker, a ps and an evaluator.
    [tfjob] = tfjob_spec.tfjob_manifests('test-tfjob', 'image', [], workers=1, ps=1, evaluator=True)
    tfjob['metadata']['namespace'] = 'ns3'
    del tfjob['spec']['tfReplicaSpecs']['Chief']  # the operator's test job has none
    run = operator_run(tfjob)
    assert run.tf_config(run.replica('worker')) == (
        '{"cluster":{"evaluator":["test-tfjob-evaluator-0.ns3.svc:2222"],"ps":["test-tfjob-ps-0.'
        'ns3.svc:2222"],"worker":["test-tfjob-worker-0.ns3.svc:2222"]},"task":{"type":"worker",'
        '"index":0},"environment":"cloud"}')
    [alone] = tfjob_spec.tfjob_manifests('solo', 'image', [], workers=0, ps=0, evaluator=False)
    run = operator_run(alone)
    assert run.tf_config(run.replica('chief')) is None  # one replica: not distributed, no TF_CONFIG


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
    assert tfjob['spec']['runPolicy'] == {'cleanPodPolicy': 'Running', 'backoffLimit': 3}
    for kind, spec in specs.items():
        assert spec['restartPolicy'] == 'ExitCode'
        pod = spec['template']['spec']
        assert pod['terminationGracePeriodSeconds'] == 90
        assert pod['serviceAccountName'] == 'trainer-sa'
        [container] = pod['containers']
        assert container['name'] == 'tensorflow'
        assert container['image'] == 'gcr.io/project/trainer:1'
        # Only the chief waits for the evaluator: the job ends when the chief does.
        wait = ['--wait_for_eval_secs=600'] if kind == 'Chief' else []
        assert container['args'] == ARGS + wait
        assert container['ports'] == [{'name': 'tfjob-port', 'containerPort': 2222}]
        gpus = container['resources'].get('limits', {}).get('nvidia.com/gpu', 0)
        assert gpus == (1 if kind in ('Chief', 'Worker') else 0), kind
        assert {'cpu', 'memory'} <= set(container['resources']['requests'])
        assert container['envFrom'] == [{'secretRef': {'name': 's3-credentials'}},
                                        {'secretRef': {'name': 'extra.settings'}}]
        assert container['env'] == [{'name': 'S3_ENDPOINT', 'value': 'https://s3.example:9000'},
                                    {'name': 'AWS_REGION', 'value': 'eu-west-1'}]


def test_tfjob_is_valid_under_the_crd_schema(tfjob_output):
    tfjob, _ = yaml.safe_load_all(tfjob_output)
    with open(TFJOB_SCHEMA) as f:
        schema = json.load(f)
    validator = jsonschema.Draft7Validator(schema)
    assert list(validator.iter_errors(tfjob)) == []
    # The CRD types restartPolicy as a string and lists the values in its description.
    restart = schema['properties']['spec']['properties']['tfReplicaSpecs'][
        'additionalProperties']['properties']['restartPolicy']['description']
    assert 'ExitCode' in restart
    # The same schema rejects a TFJob with the pod fields this command fills in mistyped.
    broken = copy.deepcopy(tfjob)
    pod = broken['spec']['tfReplicaSpecs']['Chief']['template']['spec']
    pod['terminationGracePeriodSeconds'] = '60'
    pod['containers'][0]['envFrom'] = [{'secretRef': 's3-credentials'}]
    pod['containers'][0]['env'] = [{'value': 'no name'}]
    messages = sorted(error.message for error in validator.iter_errors(broken))
    assert len(messages) == 3, messages
    assert "'name' is a required property" in messages


def test_chief_waits_for_the_evaluator_only_when_there_is_one():
    def chief_args(**settings):
        [tfjob] = tfjob_spec.tfjob_manifests('mnist', 'image', ARGS, workers=1, ps=1, **settings)
        return tfjob['spec']['tfReplicaSpecs']['Chief']['template']['spec']['containers'][0][
            'args']
    assert chief_args(evaluator=True) == ARGS + ['--wait_for_eval_secs=600']
    assert chief_args(evaluator=True, wait_for_eval_secs=1800) == ARGS + [
        '--wait_for_eval_secs=1800']
    assert chief_args(evaluator=True, wait_for_eval_secs=0) == ARGS
    assert chief_args(evaluator=False) == ARGS


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
    tfjob = yaml.safe_load(tfjob_spec.to_yaml(tfjob_spec.tfjob_manifests(
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
    # Pool 0, the primary replica, reports the job's status: it waits for the evaluator.
    assert [pool['containerSpec'] for pool in pools] == [
        {'imageUri': 'gcr.io/p/trainer:1', 'args': ARGS + ['--wait_for_eval_secs=600']}] + [
        {'imageUri': 'gcr.io/p/trainer:1', 'args': ARGS}] * 3
    assert 'scheduling' not in job['jobSpec'] and 'serviceAccount' not in job['jobSpec']
    assert [pool['machineSpec'].get('acceleratorCount', 0) for pool in pools] == [1, 1, 0, 0]
    # Vertex AI: pools 0-2 are chief, worker, ps in `cluster`; pool 3 is the evaluator, outside it.
    cluster = {kind: [f'{kind}-{i}:2222' for i in range(pool['replicaCount'])]
               for kind, pool in zip(vertex_job.VERTEX_POOLS[:3], pools)}
    roles, shares = roles_and_shares({
        (kind, i): {'cluster': cluster, 'task': {'type': kind, 'index': i}, 'environment': 'cloud'}
        for kind, pool in zip(vertex_job.VERTEX_POOLS, pools) for i in range(pool['replicaCount'])})
    assert [roles[key].label for key in sorted(roles)] == ['chief', 'evaluator', 'ps0', 'worker0',
                                                           'worker1']
    assert sorted(f for share in shares.values() for f in share) == FILES


def test_vertex_service_account_tensorboard_env_and_scheduling():
    job = json.loads(print_spec(
        'vertex', '--name=mnist', '--image=i', '--workers=1', '--ps=1',
        '--service_account=trainer@project.iam.gserviceaccount.com',
        '--tensorboard=projects/p/locations/europe-west4/tensorboards/123',
        '--base_output_dir=gs://bucket/out', '--env=S3_ENDPOINT=https://s3.example',
        '--job_timeout_secs=7200', '--restart_job_on_worker_restart').stdout)
    spec = job['jobSpec']
    assert spec['serviceAccount'] == 'trainer@project.iam.gserviceaccount.com'
    assert spec['tensorboard'] == 'projects/p/locations/europe-west4/tensorboards/123'
    assert spec['scheduling'] == {'timeout': '7200s', 'restartJobOnWorkerRestart': True}
    assert all(pool['containerSpec']['env'] == [{'name': 'S3_ENDPOINT',
                                                 'value': 'https://s3.example'}]
               for pool in spec['workerPoolSpecs'])


def test_vertex_without_model_dir_uses_its_base_output_dir():
    flags_without_model_dir = [f for f in TRAINER_FLAGS if not f.startswith('--model_dir')]
    job = json.loads(print_spec('vertex', '--name=m', '--image=i', '--workers=0', '--ps=0',
                                '--noevaluator', '--base_output_dir=gs://bucket/out',
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


# 51 characters: NAME-evaluator-0 is then 63, a DNS label's most.
LONGEST_NAME = 'a' * 51


@pytest.mark.parametrize('command, deploy_flags, trainer_flags, message', [
    ('tfjob', ['--name=j'], TRAINER_FLAGS, '--image is required'),
    ('tfjob', ['--name=j', '--image=i'], ['--model_dir=/tmp/run', '--train_files=x'],
     'must be a bucket'),
    ('tfjob', ['--name=j', '--image=i'], ['--train_files=x'], 'need --model_dir=gs://'),
    ('tfjob', ['--name=j', '--image=i'], TRAINER_FLAGS + ['--mode=evaluate'],
     'runs --mode=train_and'),
    ('tfjob', ['--name=j', '--image=i'], TRAINER_FLAGS + ['--distribution=mirrored'],
     'is for one machine'),
    ('tfjob', ['--name=My_Job', '--image=i'], TRAINER_FLAGS, '--name=My_Job: a TFJob name is a '
     'DNS-1035 label'),
    ('tfjob', ['--name=9lives', '--image=i'], TRAINER_FLAGS, 'starting with a letter'),
    ('tfjob', [f'--name={LONGEST_NAME}b', '--image=i', '--evaluator'], TRAINER_FLAGS,
     f'the replica {LONGEST_NAME}b-evaluator-0 would have 64 characters, over the 63 of a DNS '
     'label: use at most 51 characters'),
    ('tfjob', ['--name=j', '--image=i', '--env_from_secret=S3_Keys'], TRAINER_FLAGS,
     '--env_from_secret=S3_Keys: not a Secret name'),
    ('tfjob', ['--name=j', '--image=i', '--service_account=me@project.iam'], TRAINER_FLAGS,
     'not a service account name'),
    ('tfjob', ['--name=j', '--image=i', '--env=9X=1'], TRAINER_FLAGS, '--env=9X=1: give KEY=VALUE'),
    ('tfjob', ['--name=j', '--image=i', '--env=NOVALUE'], TRAINER_FLAGS, 'give KEY=VALUE'),
    ('tfjob', ['--name=j', '--image=i', '--env=TF_CONFIG={}'], TRAINER_FLAGS,
     'set TF_CONFIG for each replica themselves'),
    ('tfjob', ['--name=j', '--image=i', '--env=A=1', '--env=A=2'], TRAINER_FLAGS, 'given twice'),
    ('tfjob', ['--name=j', '--image=i', '--tensorboard=projects/p/locations/l/tensorboards/1'],
     TRAINER_FLAGS, '--tensorboard is a flag of `deploy vertex`, not of `deploy tfjob`'),
    ('tfjob', ['--name=j', '--image=i'], TRAINER_FLAGS + ['--wait_for_eval_secs=60'],
     'is a deploy flag (before --)'),
    ('vertex', ['--name=j', '--image=i', '--env_from_secret=s3'], TRAINER_FLAGS,
     '--env_from_secret is a flag of `deploy tfjob`'),
    ('vertex', ['--name=j', '--image=i', '--service_account=trainer-sa'], TRAINER_FLAGS,
     'Vertex AI takes the service account\'s email'),
    ('vertex', ['--name=j', '--image=i', '--tensorboard=my-board'], TRAINER_FLAGS,
     'give the resource name, projects/PROJECT/locations/REGION/tensorboards/ID'),
    ('vertex', ['--name=j', '--image=i', '--tensorboard=projects/p/locations/l/tensorboards/1',
                '--service_account=a@b'], TRAINER_FLAGS, '--tensorboard needs --service_account'),
])
def test_bad_deploy_commands_get_one_line(command, deploy_flags, trainer_flags, message):
    result = print_spec(command, *deploy_flags, trainer_flags=trainer_flags, check=False)
    assert result.returncode == 2 and result.stdout == ''
    [line] = result.stderr.strip().splitlines()
    assert line.startswith('error: ') and message in line


def test_the_longest_name_that_fits_is_accepted():
    result = print_spec('tfjob', f'--name={LONGEST_NAME}', '--image=i', '--evaluator')
    assert next(yaml.safe_load_all(result.stdout))['metadata']['name'] == LONGEST_NAME


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
