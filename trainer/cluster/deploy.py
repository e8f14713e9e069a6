"""Job specs that run the trainer as a TF_CONFIG cluster on Kubeflow or Vertex AI.

  python -m trainer.cluster.deploy tfjob --name=NAME --image=IMAGE --workers=2 --ps=1 --evaluator \
      [--gpus=1] [--network_policy] [--env_from_secret=SECRET] [--env=KEY=VALUE] \
      [--service_account=NAME] -- --model_dir=gs://BUCKET/run --train_files=... [trainer flags]
  python -m trainer.cluster.deploy vertex --name=NAME --image=IMAGE --workers=2 --ps=1 --evaluator \
      [--service_account=EMAIL] [--tensorboard=RESOURCE] [--env=KEY=VALUE] \
      -- --model_dir=gs://BUCKET/run --train_files=... [trainer flags]

`tfjob` prints a kubeflow.org/v1 TFJob (and with --network_policy a NetworkPolicy
that lets only the job's own pods reach its gRPC port: TensorFlow's runtime has no
authentication); `vertex` prints a Vertex AI CustomJob spec (JSON). Every replica
runs `python -m trainer.main` (the image's entry point) with the trainer flags
after `--` and `--mode=train_and_evaluate`; the operator or Vertex sets TF_CONFIG.
Both end the job when the chief ends (TFJob: a job with a Chief succeeds when the
chief does, and `cleanPodPolicy: Running` then deletes the pods still running;
Vertex AI: the primary replica, worker pool 0, reports the job's status), so with an
evaluator the chief gets `--wait_for_eval_secs` and waits for the final evaluation.
Nothing is sent anywhere: apply the output with `kubectl apply -f -`, or POST the
CustomJob to Vertex AI's customJobs.create (its jobSpec is what
`gcloud ai custom-jobs create --config=FILE` takes).
"""
import json
import re
import sys
from typing import Dict, List

import yaml
from absl import app, flags

FLAGS = flags.FLAGS
PORT = 2222  # the TFJob operator's default port, named tfjob-port
BUCKET_PREFIXES = ('gs://', 's3://')
JOB_LABEL = 'estimator-service/job'
# Vertex AI's worker pools, in its order: chief, workers, parameter servers, evaluator.
VERTEX_POOLS = ('chief', 'worker', 'ps', 'evaluator')
# Each replica's pod and service is named NAME-TYPE-INDEX, a DNS-1035 label of at most 63 characters.
DNS1035_LABEL = re.compile(r'[a-z]([-a-z0-9]*[a-z0-9])?$')
DNS_LABEL_MAX = 63
# Kubernetes names of Secrets and service accounts: DNS-1123 subdomains.
DNS1123_SUBDOMAIN = re.compile(r'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')
DNS1123_SUBDOMAIN_MAX = 253
ENV_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*$')
VERTEX_TENSORBOARD = re.compile(r'projects/[^/]+/locations/[^/]+/tensorboards/[^/]+$')
VERTEX_DISPLAY_NAME_MAX = 128
# Flags only one of the commands uses; given to the other they would silently do nothing.
COMMAND_FLAGS = {
    'tfjob': ('cpu', 'memory', 'namespace', 'network_policy', 'env_from_secret',
              'grace_period_secs', 'backoff_limit'),
    'vertex': ('machine_type', 'accelerator_type', 'base_output_dir', 'tensorboard',
               'job_timeout_secs', 'restart_job_on_worker_restart'),
}


class UsageError(ValueError):
    """A deploy command that cannot make a working job; the message says what to do."""


def define_flags():
    flags.DEFINE_string('name', None, 'Job name (Kubernetes: lowercase letters, digits, -).')
    flags.DEFINE_string('image', None, 'Container image built from the Dockerfile, '
                        'e.g. gcr.io/PROJECT/estimator-trainer:TAG.')
    flags.DEFINE_integer('workers', 1, 'Workers besides the chief.', lower_bound=0)
    flags.DEFINE_integer('ps', 1, 'Parameter servers.', lower_bound=0)
    flags.DEFINE_boolean('evaluator', False, 'Add an evaluator: the eval job, which evaluates '
                         'every checkpoint and exports from its ledger.')
    flags.DEFINE_integer('gpus', 0, 'GPUs for the chief and each worker.', lower_bound=0)
    flags.DEFINE_multi_string('env', [], 'KEY=VALUE: an environment variable of every replica '
                              '(repeatable), e.g. S3_ENDPOINT=https://... for an s3:// bucket.')
    flags.DEFINE_string('service_account', None, 'tfjob: the pods\' Kubernetes service account '
                        '(serviceAccountName); vertex: the email of the service account the job '
                        'runs as.')
    flags.DEFINE_integer('wait_for_eval_secs', 600, 'With --evaluator: how long the chief waits '
                         'after training for the evaluator to record the final checkpoint; the '
                         'job ends when the chief exits, and the evaluator with it (0: no wait).',
                         lower_bound=0)
    flags.DEFINE_string('cpu', '2', 'tfjob: CPU request of each replica.')
    flags.DEFINE_string('memory', '4Gi', 'tfjob: memory request of each replica.')
    flags.DEFINE_string('namespace', None, 'tfjob: Kubernetes namespace.')
    flags.DEFINE_boolean('network_policy', False, 'tfjob: also print a NetworkPolicy that lets '
                         'only this job\'s pods reach its gRPC port.')
    flags.DEFINE_multi_string('env_from_secret', [], 'tfjob: a Secret whose keys become '
                              'environment variables of every replica (envFrom.secretRef; '
                              'repeatable), e.g. the bucket\'s credentials.')
    flags.DEFINE_integer('grace_period_secs', 60, 'tfjob: terminationGracePeriodSeconds, the '
                         'seconds between SIGTERM and SIGKILL when a pod is stopped; the trainer '
                         'saves and exits within 30.', lower_bound=1)
    flags.DEFINE_integer('backoff_limit', 6, 'tfjob: runPolicy.backoffLimit, the restarts before '
                         'the operator fails the job (6, as for a Kubernetes Job).', lower_bound=0)
    flags.DEFINE_string('machine_type', 'n1-standard-4', 'vertex: machine type of each replica.')
    flags.DEFINE_string('accelerator_type', None, 'vertex: with --gpus, e.g. NVIDIA_TESLA_T4.')
    flags.DEFINE_string('base_output_dir', None, 'vertex: gs:// folder Vertex AI hands the trainer '
                        'as AIP_MODEL_DIR, AIP_CHECKPOINT_DIR and AIP_TENSORBOARD_LOG_DIR (used '
                        'when the trainer flags have no --model_dir).')
    flags.DEFINE_string('tensorboard', None, 'vertex: the Vertex AI TensorBoard, projects/P/'
                        'locations/L/tensorboards/ID, that the chief\'s summaries in '
                        'AIP_TENSORBOARD_LOG_DIR go to; needs --service_account and '
                        '--base_output_dir.')
    flags.DEFINE_integer('job_timeout_secs', None, 'vertex: scheduling.timeout, the longest the '
                         'job may run (unset: Vertex AI\'s 7 days).', lower_bound=1)
    flags.DEFINE_boolean('restart_job_on_worker_restart', False, 'vertex: scheduling.'
                         'restartJobOnWorkerRestart: restart every replica when one restarts.')


def flag_value(trainer_flags: List[str], name: str):
    """The last --name=value among the trainer flags, or None."""
    values = [arg.split('=', 1)[1] for arg in trainer_flags if arg.startswith(f'--{name}=')]
    return values[-1] if values else None


def trainer_args(trainer_flags: List[str], needs_model_dir: bool) -> List[str]:
    """The trainer's command-line flags for every replica, checked for a cluster."""
    mode = flag_value(trainer_flags, 'mode')
    if mode not in (None, 'train_and_evaluate'):
        raise UsageError(f'--mode={mode}: a cluster runs --mode=train_and_evaluate; drop --mode '
                         'from the trainer flags')
    model_dir = flag_value(trainer_flags, 'model_dir')
    if model_dir is None and needs_model_dir:
        raise UsageError('the trainer flags after -- need --model_dir=gs://BUCKET/PATH (or '
                         's3://): the folder every replica shares')
    if model_dir is not None and not model_dir.startswith(BUCKET_PREFIXES):
        raise UsageError(f'--model_dir={model_dir}: replicas run on different machines, so the '
                         'model_dir must be a bucket every one can reach (gs://... or s3://...)')
    if not flag_value(trainer_flags, 'train_files'):
        raise UsageError('the trainer flags after -- need --train_files=gs://BUCKET/shards/'
                         'train-* (and --eval_files for the evaluation)')
    if flag_value(trainer_flags, 'distribution') == 'mirrored':
        raise UsageError('--distribution=mirrored is for one machine; a cluster trains with '
                         'parameter servers: drop it from the trainer flags')
    if flag_value(trainer_flags, 'wait_for_eval_secs') is not None:
        raise UsageError('--wait_for_eval_secs is a deploy flag (before --): only the chief '
                         'waits, so deploy passes it to the chief alone')
    return [arg for arg in trainer_flags if not arg.startswith('--mode=')] + [
        '--mode=train_and_evaluate']


def replica_counts(workers: int, ps: int, evaluator: bool) -> Dict[str, int]:
    """Replicas per task type, in TF_CONFIG's lowercase names."""
    counts = {'chief': 1, 'worker': workers, 'ps': ps, 'evaluator': int(evaluator)}
    return {task_type: count for task_type, count in counts.items() if count}


def chief_args(args: List[str], evaluator: bool, wait_for_eval_secs: int) -> List[str]:
    """The chief's flags: with an evaluator it waits for the final evaluation, since the job
    (and every replica still running) ends when the chief does."""
    if evaluator and wait_for_eval_secs:
        return args + [f'--wait_for_eval_secs={wait_for_eval_secs}']
    return list(args)


def env_list(pairs: List[str]) -> List[dict]:
    """--env KEY=VALUE flags as a container's env, in the order given."""
    env = []
    for pair in pairs:
        key, equals, value = pair.partition('=')
        if not equals or not ENV_NAME.match(key):
            raise UsageError(f'--env={pair}: give KEY=VALUE with a KEY of letters, digits and _ '
                             'that does not start with a digit')
        if key == 'TF_CONFIG':
            raise UsageError('--env=TF_CONFIG=...: the operator and Vertex AI set TF_CONFIG for '
                             'each replica themselves; drop it')
        if key in [var['name'] for var in env]:
            raise UsageError(f'--env={key}=... is given twice; keep one')
        env.append({'name': key, 'value': value})
    return env


def check_kubernetes_name(flag: str, value: str, what: str):
    if len(value) > DNS1123_SUBDOMAIN_MAX or not DNS1123_SUBDOMAIN.match(value):
        raise UsageError(f'--{flag}={value}: not a {what} name; Kubernetes names are lowercase '
                         'letters, digits, - and ., starting and ending with a letter or digit')


def check_tfjob_name(name: str, counts: Dict[str, int]):
    """As the training operator's webhook (a DNS-1035 label), and short enough that every replica's
    pod and service name, NAME-TYPE-INDEX, is a DNS label too."""
    if not DNS1035_LABEL.match(name):
        raise UsageError(f'--name={name}: a TFJob name is a DNS-1035 label: lowercase letters, '
                         'digits and -, starting with a letter and ending with a letter or digit')
    longest = max((f'{name}-{task_type}-{count - 1}' for task_type, count in counts.items()),
                  key=len)
    if len(longest) > DNS_LABEL_MAX:
        allowed = DNS_LABEL_MAX - (len(longest) - len(name))
        raise UsageError(f'--name={name}: too long; the replica {longest} would have '
                         f'{len(longest)} characters, over the {DNS_LABEL_MAX} of a DNS label: use '
                         f'at most {allowed} characters')


def check_common(command, name, image):
    if not image:
        raise UsageError('--image is required: the container image every replica runs (build '
                         'it from the Dockerfile and push it, e.g. gcr.io/PROJECT/trainer:TAG)')
    if not name:
        raise UsageError('--name is required: the job\'s name (lowercase letters, digits and -)')
    for other, names in COMMAND_FLAGS.items():
        given = [flag for flag in names if other != command and FLAGS[flag].present]
        if given:
            raise UsageError(f'--{given[0]} is a flag of `deploy {other}`, not of '
                             f'`deploy {command}`; drop it')


# ------------------------------------------------------------------ Kubeflow TFJob


def tfjob_manifests(name: str, image: str, args: List[str], workers: int, ps: int,
                    evaluator: bool, *, gpus: int = 0, cpu: str = '2', memory: str = '4Gi',
                    namespace: str = None, network_policy: bool = False, env: List[dict] = (),
                    env_from_secrets: List[str] = (), service_account: str = None,
                    grace_period_secs: int = 60, backoff_limit: int = 6,
                    wait_for_eval_secs: int = 600) -> List[dict]:
    """The TFJob, and with network_policy a NetworkPolicy for its port."""
    metadata = {'name': name, **({'namespace': namespace} if namespace else {})}
    replica_specs = {}
    for task_type, count in replica_counts(workers, ps, evaluator).items():
        requests = {'cpu': cpu, 'memory': memory}
        limits = {}
        if gpus and task_type in ('chief', 'worker'):
            requests['nvidia.com/gpu'] = limits['nvidia.com/gpu'] = gpus
        container = {
            'name': 'tensorflow',  # the operator finds the TF container by this name
            'image': image,
            'args': (chief_args(args, evaluator, wait_for_eval_secs) if task_type == 'chief'
                     else list(args)),
            'ports': [{'name': 'tfjob-port', 'containerPort': PORT}],
            'resources': {'requests': requests, **({'limits': limits} if limits else {})},
        }
        if env:
            container['env'] = [dict(var) for var in env]
        if env_from_secrets:
            container['envFrom'] = [{'secretRef': {'name': secret}} for secret in env_from_secrets]
        pod_spec = {'containers': [container], 'terminationGracePeriodSeconds': grace_period_secs}
        if service_account:
            pod_spec['serviceAccountName'] = service_account
        replica_specs[{'ps': 'PS'}.get(task_type, task_type.capitalize())] = {
            'replicas': count,
            # The operator restarts a pod that exits 128-255 (SIGTERM 143, SIGKILL 137: it
            # resumes from its checkpoint or ledger) and fails the job on 1-127 (bad flags
            # or data exit 2), so a mistake fails once instead of restarting for ever.
            'restartPolicy': 'ExitCode',
            'template': {'metadata': {'labels': {JOB_LABEL: name}}, 'spec': pod_spec},
        }
    manifests = [{'apiVersion': 'kubeflow.org/v1', 'kind': 'TFJob', 'metadata': metadata,
                  'spec': {'runPolicy': {'cleanPodPolicy': 'Running',
                                         'backoffLimit': backoff_limit},
                           'tfReplicaSpecs': replica_specs}}]
    if network_policy:
        same_job = lambda: {'matchLabels': {JOB_LABEL: name}}  # noqa: E731 (no YAML aliases)
        manifests.append({
            'apiVersion': 'networking.k8s.io/v1', 'kind': 'NetworkPolicy',
            'metadata': {**metadata, 'name': f'{name}-tfjob-port'},
            'spec': {'podSelector': same_job(), 'policyTypes': ['Ingress'],
                     'ingress': [{'from': [{'podSelector': same_job()}],
                                  'ports': [{'protocol': 'TCP', 'port': PORT}]}]},
        })
    return manifests


def to_yaml(manifests: List[dict]) -> str:
    return yaml.safe_dump_all(manifests, sort_keys=False, default_flow_style=False)


# ------------------------------------------------------------------ Vertex AI CustomJob


def vertex_job(name: str, image: str, args: List[str], workers: int, ps: int, evaluator: bool,
               *, machine_type: str = 'n1-standard-4', gpus: int = 0,
               accelerator_type: str = None, base_output_dir: str = None, env: List[dict] = (),
               service_account: str = None, tensorboard: str = None,
               job_timeout_secs: int = None, restart_job_on_worker_restart: bool = False,
               wait_for_eval_secs: int = 600) -> dict:
    """A CustomJob spec: workerPoolSpecs in Vertex AI's order (an absent pool is {})."""
    if gpus and not accelerator_type:
        raise UsageError('--gpus on Vertex AI needs --accelerator_type, e.g. NVIDIA_TESLA_T4')
    if service_account is not None and not re.match(r'[^@\s]+@[^@\s]+$', service_account):
        raise UsageError(f'--service_account={service_account}: Vertex AI takes the service '
                         'account\'s email, e.g. trainer@PROJECT.iam.gserviceaccount.com')
    if tensorboard is not None:
        if not VERTEX_TENSORBOARD.match(tensorboard):
            raise UsageError(f'--tensorboard={tensorboard}: give the resource name, '
                             'projects/PROJECT/locations/REGION/tensorboards/ID')
        # Vertex AI uploads from AIP_TENSORBOARD_LOG_DIR, set only with a baseOutputDirectory,
        # and its TensorBoard integration requires a service account.
        if not (service_account and base_output_dir):
            raise UsageError('--tensorboard needs --service_account (Vertex AI\'s TensorBoard '
                             'requires one) and --base_output_dir (its logs/ folder is what is '
                             'uploaded)')
    counts = replica_counts(workers, ps, evaluator)
    pools = []
    for task_type in VERTEX_POOLS:
        if not counts.get(task_type):
            pools.append({})
            continue
        machine = {'machineType': machine_type}
        if gpus and task_type in ('chief', 'worker'):
            machine.update(acceleratorType=accelerator_type, acceleratorCount=gpus)
        container = {'imageUri': image, 'args': (
            chief_args(args, evaluator, wait_for_eval_secs) if task_type == 'chief'
            else list(args))}
        if env:
            container['env'] = [dict(var) for var in env]
        pools.append({'machineSpec': machine, 'replicaCount': counts[task_type],
                      'containerSpec': container})
    while pools and not pools[-1]:
        pools.pop()
    job_spec = {'workerPoolSpecs': pools}
    if base_output_dir:
        job_spec['baseOutputDirectory'] = {'outputUriPrefix': base_output_dir}
    if service_account:
        job_spec['serviceAccount'] = service_account
    if tensorboard:
        job_spec['tensorboard'] = tensorboard
    scheduling = {**({'timeout': f'{job_timeout_secs}s'} if job_timeout_secs else {}),
                  **({'restartJobOnWorkerRestart': True} if restart_job_on_worker_restart
                     else {})}
    if scheduling:
        job_spec['scheduling'] = scheduling
    return {'displayName': name, 'jobSpec': job_spec}


def build(command: str, trainer_flags: List[str]) -> str:
    check_common(command, FLAGS.name, FLAGS.image)
    env = env_list(FLAGS.env)
    shared = dict(env=env, service_account=FLAGS.service_account, gpus=FLAGS.gpus,
                  wait_for_eval_secs=FLAGS.wait_for_eval_secs)
    if command == 'tfjob':
        check_tfjob_name(FLAGS.name, replica_counts(FLAGS.workers, FLAGS.ps, FLAGS.evaluator))
        for secret in FLAGS.env_from_secret:
            check_kubernetes_name('env_from_secret', secret, 'Secret')
        if FLAGS.service_account is not None:
            check_kubernetes_name('service_account', FLAGS.service_account, 'service account')
        args = trainer_args(trainer_flags, needs_model_dir=True)
        return to_yaml(tfjob_manifests(
            FLAGS.name, FLAGS.image, args, FLAGS.workers, FLAGS.ps, FLAGS.evaluator,
            cpu=FLAGS.cpu, memory=FLAGS.memory, namespace=FLAGS.namespace,
            network_policy=FLAGS.network_policy, env_from_secrets=FLAGS.env_from_secret,
            grace_period_secs=FLAGS.grace_period_secs, backoff_limit=FLAGS.backoff_limit,
            **shared))
    if len(FLAGS.name) > VERTEX_DISPLAY_NAME_MAX:
        raise UsageError(f'--name: {len(FLAGS.name)} characters; a Vertex AI displayName has at '
                         f'most {VERTEX_DISPLAY_NAME_MAX}')
    if FLAGS.base_output_dir and not FLAGS.base_output_dir.startswith('gs://'):
        raise UsageError(f'--base_output_dir={FLAGS.base_output_dir}: Vertex AI needs a gs:// '
                         'folder')
    args = trainer_args(trainer_flags, needs_model_dir=not FLAGS.base_output_dir)
    return json.dumps(vertex_job(
        FLAGS.name, FLAGS.image, args, FLAGS.workers, FLAGS.ps, FLAGS.evaluator,
        machine_type=FLAGS.machine_type, accelerator_type=FLAGS.accelerator_type,
        base_output_dir=FLAGS.base_output_dir, tensorboard=FLAGS.tensorboard,
        job_timeout_secs=FLAGS.job_timeout_secs,
        restart_job_on_worker_restart=FLAGS.restart_job_on_worker_restart, **shared), indent=2)


def main(argv):
    command, trainer_flags = (argv[1], argv[2:]) if len(argv) > 1 else (None, [])
    try:
        if command not in ('tfjob', 'vertex'):
            raise UsageError('give a command: tfjob (Kubeflow) or vertex (Vertex AI), then the '
                             'flags, then -- and the trainer flags')
        print(build(command, trainer_flags), end='' if command == 'tfjob' else '\n')
    except UsageError as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    return 0


def parse_flags(argv):
    try:
        return FLAGS(argv)
    except flags.UnrecognizedFlagError as e:
        print(f'error: {e}; trainer flags go after --', file=sys.stderr)
        sys.exit(2)
    except flags.Error as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(2)


if __name__ == '__main__':
    define_flags()
    app.run(main, flags_parser=parse_flags)
