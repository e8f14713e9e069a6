"""Job specs that run the trainer as a TF_CONFIG cluster on Kubeflow or Vertex AI.

  python -m trainer.cluster.deploy tfjob --name=NAME --image=IMAGE --workers=2 --ps=1 --evaluator \
      [--gpus=1] [--network_policy] -- --model_dir=gs://BUCKET/run --train_files=... [trainer flags]
  python -m trainer.cluster.deploy vertex --name=NAME --image=IMAGE --workers=2 --ps=1 --evaluator \
      -- --model_dir=gs://BUCKET/run --train_files=... [trainer flags]

`tfjob` prints a kubeflow.org/v1 TFJob (and with --network_policy a NetworkPolicy
that lets only the job's own pods reach its gRPC port: TensorFlow's runtime has no
authentication); `vertex` prints a Vertex AI CustomJob spec (JSON). Every replica
runs `python -m trainer.main` (the image's entry point) with the trainer flags
after `--` and `--mode=train_and_evaluate`; the operator or Vertex sets TF_CONFIG.
Nothing is sent anywhere: apply the output with `kubectl apply -f -`, or POST the
CustomJob to Vertex AI's customJobs.create (its jobSpec is what
`gcloud ai custom-jobs create --config=FILE` takes).
"""
import json
from typing import Dict, List

import yaml
from absl import flags

from common import cli, paths
from common.errors import UserError

FLAGS = flags.FLAGS
PORT = 2222  # the TFJob operator's default port, named tfjob-port
JOB_LABEL = 'estimator-service/job'
# Vertex AI's worker pools, in its order: chief, workers, parameter servers, evaluator.
VERTEX_POOLS = ('chief', 'worker', 'ps', 'evaluator')


def define_flags():
    flags.DEFINE_string('name', None, 'Job name (Kubernetes: lowercase letters, digits, -).')
    flags.DEFINE_string('image', None, 'Container image built from the Dockerfile, '
                        'e.g. gcr.io/PROJECT/estimator-trainer:TAG.')
    flags.DEFINE_integer('workers', 1, 'Workers besides the chief.', lower_bound=0)
    flags.DEFINE_integer('ps', 1, 'Parameter servers.', lower_bound=0)
    flags.DEFINE_boolean('evaluator', False, 'Add an evaluator: the eval job, which evaluates '
                         'every checkpoint and exports from its ledger.')
    flags.DEFINE_integer('gpus', 0, 'GPUs for the chief and each worker.', lower_bound=0)
    flags.DEFINE_string('cpu', '2', 'tfjob: CPU request of each replica.')
    flags.DEFINE_string('memory', '4Gi', 'tfjob: memory request of each replica.')
    flags.DEFINE_string('namespace', None, 'tfjob: Kubernetes namespace.')
    flags.DEFINE_boolean('network_policy', False, 'tfjob: also print a NetworkPolicy that lets '
                         'only this job\'s pods reach its gRPC port.')
    flags.DEFINE_string('machine_type', 'n1-standard-4', 'vertex: machine type of each replica.')
    flags.DEFINE_string('accelerator_type', None, 'vertex: with --gpus, e.g. NVIDIA_TESLA_T4.')
    flags.DEFINE_string('base_output_dir', None, 'vertex: gs:// folder Vertex AI hands the trainer '
                        'as AIP_MODEL_DIR, AIP_CHECKPOINT_DIR and AIP_TENSORBOARD_LOG_DIR (used '
                        'when the trainer flags have no --model_dir).')


def flag_value(trainer_flags: List[str], name: str):
    """The last --name=value among the trainer flags, or None."""
    values = [arg.split('=', 1)[1] for arg in trainer_flags if arg.startswith(f'--{name}=')]
    return values[-1] if values else None


def trainer_args(trainer_flags: List[str], needs_model_dir: bool) -> List[str]:
    """The trainer's command-line flags for every replica, checked for a cluster."""
    mode = flag_value(trainer_flags, 'mode')
    if mode not in (None, 'train_and_evaluate'):
        raise UserError(f'--mode={mode}: a cluster runs --mode=train_and_evaluate; drop --mode '
                        'from the trainer flags')
    model_dir = flag_value(trainer_flags, 'model_dir')
    if model_dir is None and needs_model_dir:
        raise UserError('the trainer flags after -- need --model_dir=gs://BUCKET/PATH (or '
                        's3://): the folder every replica shares')
    if model_dir is not None and not model_dir.startswith(paths.OBJECT_STORE_SCHEMES):
        raise UserError(f'--model_dir={model_dir}: replicas run on different machines, so the '
                        'model_dir must be a bucket every one can reach (gs://... or s3://...)')
    if not flag_value(trainer_flags, 'train_files'):
        raise UserError('the trainer flags after -- need --train_files=gs://BUCKET/shards/'
                        'train-* (and --eval_files for the evaluation)')
    if flag_value(trainer_flags, 'distribution') == 'mirrored':
        raise UserError('--distribution=mirrored is for one machine; a cluster trains with '
                        'parameter servers: drop it from the trainer flags')
    return [arg for arg in trainer_flags if not arg.startswith('--mode=')] + [
        '--mode=train_and_evaluate']


def replica_counts(workers: int, ps: int, evaluator: bool) -> Dict[str, int]:
    """Replicas per task type, in TF_CONFIG's lowercase names."""
    counts = {'chief': 1, 'worker': workers, 'ps': ps, 'evaluator': int(evaluator)}
    return {task_type: count for task_type, count in counts.items() if count}


def check_common(name, image):
    if not image:
        raise UserError('--image is required: the container image every replica runs (build '
                        'it from the Dockerfile and push it, e.g. gcr.io/PROJECT/trainer:TAG)')
    if not name:
        raise UserError('--name is required: the job\'s name (lowercase letters, digits and -)')


# ------------------------------------------------------------------ Kubeflow TFJob


def tfjob_manifests(name: str, image: str, args: List[str], workers: int, ps: int,
                    evaluator: bool, gpus: int = 0, cpu: str = '2', memory: str = '4Gi',
                    namespace: str = None, network_policy: bool = False) -> List[dict]:
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
            'args': list(args),
            'ports': [{'name': 'tfjob-port', 'containerPort': PORT}],
            'resources': {'requests': requests, **({'limits': limits} if limits else {})},
        }
        replica_specs[{'ps': 'PS'}.get(task_type, task_type.capitalize())] = {
            'replicas': count,
            # The trainer resumes from the last checkpoint, the eval job from its ledger.
            'restartPolicy': 'OnFailure',
            'template': {'metadata': {'labels': {JOB_LABEL: name}},
                         'spec': {'containers': [container]}},
        }
    manifests = [{'apiVersion': 'kubeflow.org/v1', 'kind': 'TFJob', 'metadata': metadata,
                  'spec': {'runPolicy': {'cleanPodPolicy': 'Running'},
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
               machine_type: str = 'n1-standard-4', gpus: int = 0, accelerator_type: str = None,
               base_output_dir: str = None) -> dict:
    """A CustomJob spec: workerPoolSpecs in Vertex AI's order (an absent pool is {})."""
    if gpus and not accelerator_type:
        raise UserError('--gpus on Vertex AI needs --accelerator_type, e.g. NVIDIA_TESLA_T4')
    counts = replica_counts(workers, ps, evaluator)
    pools = []
    for task_type in VERTEX_POOLS:
        if not counts.get(task_type):
            pools.append({})
            continue
        machine = {'machineType': machine_type}
        if gpus and task_type in ('chief', 'worker'):
            machine.update(acceleratorType=accelerator_type, acceleratorCount=gpus)
        pools.append({'machineSpec': machine, 'replicaCount': counts[task_type],
                      'containerSpec': {'imageUri': image, 'args': list(args)}})
    while pools and not pools[-1]:
        pools.pop()
    job_spec = {'workerPoolSpecs': pools}
    if base_output_dir:
        job_spec['baseOutputDirectory'] = {'outputUriPrefix': base_output_dir}
    return {'displayName': name, 'jobSpec': job_spec}


def build(command: str, trainer_flags: List[str]) -> str:
    check_common(FLAGS.name, FLAGS.image)
    if command == 'tfjob':
        args = trainer_args(trainer_flags, needs_model_dir=True)
        return to_yaml(tfjob_manifests(
            FLAGS.name, FLAGS.image, args, FLAGS.workers, FLAGS.ps, FLAGS.evaluator, FLAGS.gpus,
            FLAGS.cpu, FLAGS.memory, FLAGS.namespace, FLAGS.network_policy))
    if FLAGS.base_output_dir and not FLAGS.base_output_dir.startswith('gs://'):
        raise UserError(f'--base_output_dir={FLAGS.base_output_dir}: Vertex AI needs a gs:// '
                        'folder')
    args = trainer_args(trainer_flags, needs_model_dir=not FLAGS.base_output_dir)
    return json.dumps(vertex_job(
        FLAGS.name, FLAGS.image, args, FLAGS.workers, FLAGS.ps, FLAGS.evaluator,
        FLAGS.machine_type, FLAGS.gpus, FLAGS.accelerator_type, FLAGS.base_output_dir), indent=2)


def main(argv):
    command, trainer_flags = (argv[1], argv[2:]) if len(argv) > 1 else (None, [])
    if command not in ('tfjob', 'vertex', 'katib'):
        raise UserError('give a command: tfjob (Kubeflow), katib (a Katib Experiment) or vertex '
                        '(Vertex AI; --hptune: a tuning job), then the flags, then -- and the '
                        'trainer flags')
    if command == 'katib' or (command == 'vertex' and FLAGS.hptune):  # tuning_specs.py
        print(tuning_specs.build(command, trainer_flags), end='')
        return cli.EXIT_OK
    print(build(command, trainer_flags), end='' if command == 'tfjob' else '\n')
    return cli.EXIT_OK


if __name__ == '__main__':
    from trainer.cluster import tuning_specs  # it builds on this module's specs
    define_flags()
    tuning_specs.define_flags()
    cli.run(main, own_modules=[tuning_specs.__name__], user_errors=(UserError,),
            unknown_flag_hint='trainer flags go after --')
