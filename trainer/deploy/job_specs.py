"""The TFJob and Vertex AI CustomJob specs `python -m trainer.deploy tfjob|vertex` prints: its
flags, their checks, and the specs built from them (docs: trainer/deploy/__main__.py)."""
import json
from typing import List

from absl import flags

from common.errors import UserError
from trainer.deploy import job_args, tfjob, vertex_job

FLAGS = flags.FLAGS
# Flags only one of the commands uses; given to the other they would silently do nothing.
COMMAND_FLAGS = {
    'tfjob': ('cpu', 'memory', 'namespace', 'network_policy', 'env_from_secret',
              'grace_period_secs', 'backoff_limit'),
    'vertex': ('machine_type', 'accelerator_type', 'base_output_dir', 'tensorboard',
               'job_timeout_secs', 'restart_job_on_worker_restart'),
}


def define_flags():
    flags.DEFINE_string('name', None, 'Job name (Kubernetes: lowercase letters, digits, -).')
    flags.DEFINE_string('image', None, 'Container image built from the Dockerfile, '
                        'e.g. gcr.io/PROJECT/estimator-trainer:TAG.')
    flags.DEFINE_integer('workers', 1, 'Workers besides the chief.', lower_bound=0)
    flags.DEFINE_integer('ps', 1, 'Parameter servers (0 with --sync).', lower_bound=0)
    flags.DEFINE_boolean('sync', False, 'Synchronous training: the chief and workers all-reduce '
                         'every step (--distribution=multi_worker_mirrored), no parameter servers.')
    flags.DEFINE_boolean('evaluator', False, 'Add an evaluator: the eval job, which evaluates '
                         'every checkpoint and exports from its ledger.')
    flags.DEFINE_integer('evaluators', None, 'How many evaluators (instead of --evaluator): eval '
                         'jobs sharing --eval_name, each checkpoint evaluated by one of them; '
                         'each replica gets its index in TF_CONFIG.', lower_bound=0)
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


def check_common(command, name, image):
    if not image:
        raise UserError('--image is required: the container image every replica runs (build '
                        'it from the Dockerfile and push it, e.g. gcr.io/PROJECT/trainer:TAG)')
    if not name:
        raise UserError('--name is required: the job\'s name (lowercase letters, digits and -)')
    for other, names in COMMAND_FLAGS.items():
        given = [flag for flag in names if other != command and FLAGS[flag].present]
        if given:
            raise UserError(f'--{given[0]} is a flag of `deploy {other}`, not of '
                            f'`deploy {command}`; drop it')


def evaluator_count() -> int:
    """--evaluators=N, else one evaluator with --evaluator."""
    if FLAGS.evaluators is None:
        return int(FLAGS.evaluator)
    if FLAGS['evaluator'].present and FLAGS.evaluator != bool(FLAGS.evaluators):
        raise UserError(f'--evaluators={FLAGS.evaluators} contradicts '
                        f'--{"" if FLAGS.evaluator else "no"}evaluator; keep one')
    return FLAGS.evaluators


def _shared_job_options() -> dict:
    return dict(env=job_args.env_list(FLAGS.env), service_account=FLAGS.service_account,
                gpus=FLAGS.gpus, wait_for_eval_secs=FLAGS.wait_for_eval_secs)


def tfjob_from_flags(args: List[str]) -> List[dict]:
    """The TFJob (and NetworkPolicy) the flags ask for, running the trainer with args."""
    tfjob.check_tfjob_name(FLAGS.name, job_args.replica_counts(FLAGS.workers, num_ps(),
                                                               evaluator_count()))
    for secret in FLAGS.env_from_secret:
        tfjob.check_kubernetes_name('env_from_secret', secret, 'Secret')
    if FLAGS.service_account is not None:
        tfjob.check_kubernetes_name('service_account', FLAGS.service_account, 'service account')
    return tfjob.tfjob_manifests(
        FLAGS.name, FLAGS.image, args, FLAGS.workers, num_ps(), evaluator_count(),
        cpu=FLAGS.cpu, memory=FLAGS.memory, namespace=FLAGS.namespace,
        network_policy=FLAGS.network_policy, env_from_secrets=FLAGS.env_from_secret,
        grace_period_secs=FLAGS.grace_period_secs, backoff_limit=FLAGS.backoff_limit,
        **_shared_job_options())


def vertex_job_from_flags(args: List[str]) -> dict:
    """The Vertex AI CustomJob the flags ask for, running the trainer with args."""
    if len(FLAGS.name) > vertex_job.VERTEX_DISPLAY_NAME_MAX:
        raise UserError(f'--name: {len(FLAGS.name)} characters; a Vertex AI displayName has at '
                        f'most {vertex_job.VERTEX_DISPLAY_NAME_MAX}')
    if FLAGS.base_output_dir and not FLAGS.base_output_dir.startswith('gs://'):
        raise UserError(f'--base_output_dir={FLAGS.base_output_dir}: Vertex AI needs a gs:// '
                        'folder')
    return vertex_job.vertex_job(
        FLAGS.name, FLAGS.image, args, FLAGS.workers, num_ps(), evaluator_count(),
        machine_type=FLAGS.machine_type, accelerator_type=FLAGS.accelerator_type,
        base_output_dir=FLAGS.base_output_dir, tensorboard=FLAGS.tensorboard,
        job_timeout_secs=FLAGS.job_timeout_secs,
        restart_job_on_worker_restart=FLAGS.restart_job_on_worker_restart,
        **_shared_job_options())


def num_ps() -> int:
    """--ps, or none with --sync: all-reduce across the chief and workers needs no ps."""
    if FLAGS.sync and FLAGS['ps'].present and FLAGS.ps:
        raise UserError(f'--sync trains without parameter servers: drop --ps={FLAGS.ps}')
    return 0 if FLAGS.sync else FLAGS.ps


def build(command: str, trainer_flags: List[str]) -> str:
    check_common(command, FLAGS.name, FLAGS.image)
    if command == 'tfjob':
        args = job_args.trainer_args(trainer_flags, needs_model_dir=True, sync=FLAGS.sync)
        return tfjob.to_yaml(tfjob_from_flags(args))
    args = job_args.trainer_args(trainer_flags, needs_model_dir=not FLAGS.base_output_dir,
                                 sync=FLAGS.sync)
    return json.dumps(vertex_job_from_flags(args), indent=2)
