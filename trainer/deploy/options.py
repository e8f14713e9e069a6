"""deploy's flags, read once into DeployOptions: every spec is built from that object, and a
flag that contradicts another, or belongs to the other platform, is refused here in one line."""
import dataclasses
from typing import List, Optional

from absl import flags

from common.errors import UserError
from trainer.cluster import replicas
from trainer.config import search_space

FLAGS = flags.FLAGS
ALGORITHMS = ('random', 'bayesianoptimization', 'tpe', 'grid')
# Flags only one platform uses; given to the other they would silently do nothing.
PLATFORM_FLAGS = {
    'tfjob': ('cpu', 'memory', 'namespace', 'network_policy', 'env_from_secret',
              'grace_period_secs', 'backoff_limit'),
    'vertex': ('machine_type', 'accelerator_type', 'base_output_dir', 'tensorboard',
               'job_timeout_secs', 'restart_job_on_worker_restart'),
}


def define_flags():
    replicas.define_flags()
    define_job_flags()
    define_tuning_flags()


def define_job_flags():
    """The flags of every job deploy prints, and of each platform's."""
    flags.DEFINE_string('name', None, 'Job name (Kubernetes: lowercase letters, digits, -).')
    flags.DEFINE_string('image', None, 'Container image built from the Dockerfile, '
                        'e.g. gcr.io/PROJECT/estimator-trainer:TAG.')
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


def define_tuning_flags():
    """katib's and vertex --hptune's own flags."""
    flags.DEFINE_multi_string('param', [], 'katib, vertex --hptune: a param to tune, '
                              f'repeatable: {search_space.PARAM_FORMS}.')
    flags.DEFINE_string('objective', None, 'katib, vertex --hptune: METRIC:maximize or '
                        'METRIC:minimize, a metric of the model\'s evaluation.')
    flags.DEFINE_float('goal', None, 'katib: stop once a trial reaches this objective value.')
    flags.DEFINE_enum('algorithm', 'random', ALGORITHMS, 'katib, vertex --hptune: the search '
                      'algorithm (Vertex AI has no tpe; bayesianoptimization is its default).')
    flags.DEFINE_integer('max_trials', 12, 'Trials in all.', lower_bound=1)
    flags.DEFINE_integer('parallel_trials', 3, 'Trials at once.', lower_bound=1)
    flags.DEFINE_integer('max_failed_trials', 3, 'Failed trials before the search stops.',
                         lower_bound=0)
    flags.DEFINE_boolean('hptune', False, 'vertex: print a HyperparameterTuningJob whose trials '
                         'are the CustomJob, rather than the CustomJob.')



@dataclasses.dataclass(frozen=True)
class DeployOptions:
    """What deploy's flags ask for, checked. platform: tfjob (also katib's trials) or vertex;
    tuning: katib or vertex --hptune."""
    platform: str
    tuning: bool
    name: str
    image: str
    workers: int
    ps: int  # 0 with sync
    evaluators: int
    sync: bool
    gpus: int
    env: List[str]
    service_account: Optional[str]
    wait_for_eval_secs: int
    # tfjob
    cpu: str
    memory: str
    namespace: Optional[str]
    network_policy: bool
    env_from_secret: List[str]
    grace_period_secs: int
    backoff_limit: int
    # vertex
    machine_type: str
    accelerator_type: Optional[str]
    base_output_dir: Optional[str]
    tensorboard: Optional[str]
    job_timeout_secs: Optional[int]
    restart_job_on_worker_restart: bool
    # katib, vertex --hptune
    hptune: bool
    param: List[str]
    objective: Optional[str]
    goal: Optional[float]
    algorithm: str
    max_trials: int
    parallel_trials: int
    max_failed_trials: int

    @classmethod
    def from_flags(cls, command: str, flag_values: flags.FlagValues = FLAGS) -> 'DeployOptions':
        """The options of `deploy COMMAND` (tfjob, vertex or katib) from the parsed flags."""
        platform = 'vertex' if command == 'vertex' else 'tfjob'
        tuning = command == 'katib' or (command == 'vertex' and flag_values.hptune)
        if tuning and flag_values.sync:
            raise UserError('--sync is for one tfjob or vertex job; tuning trials train with '
                            'parameter servers: drop --sync')
        check_required(flag_values.name, flag_values.image)
        check_platform_flags(platform, flag_values)
        values = {field.name: flag_values[field.name].value for field in dataclasses.fields(cls)
                  if field.name in flag_values}
        return cls(**{**values, 'platform': platform, 'tuning': tuning,
                      **dataclasses.asdict(replicas.Replicas.from_flags(flag_values))})


def check_required(name, image):
    if not image:
        raise UserError('--image is required: the container image every replica runs (build '
                        'it from the Dockerfile and push it, e.g. gcr.io/PROJECT/trainer:TAG)')
    if not name:
        raise UserError('--name is required: the job\'s name (lowercase letters, digits and -)')


def check_platform_flags(platform: str, flag_values: flags.FlagValues):
    for other, names in PLATFORM_FLAGS.items():
        given = [flag for flag in names if other != platform and flag_values[flag].present]
        if given:
            raise UserError(f'--{given[0]} is a flag of `deploy {other}`, not of '
                            f'`deploy {platform}`; drop it')

