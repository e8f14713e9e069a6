"""A Vertex AI CustomJob spec (the body of customJobs.create)."""
import re
from typing import List

from common.errors import UserError
from trainer.deploy.job_args import chief_args, replica_counts

# Vertex AI's worker pools, in its order: chief, workers, parameter servers, evaluator.
VERTEX_POOLS = ('chief', 'worker', 'ps', 'evaluator')
VERTEX_TENSORBOARD = re.compile(r'projects/[^/]+/locations/[^/]+/tensorboards/[^/]+$')
VERTEX_DISPLAY_NAME_MAX = 128


def vertex_job(name: str, image: str, args: List[str], workers: int, ps: int, evaluator: bool,
               *, machine_type: str = 'n1-standard-4', gpus: int = 0,
               accelerator_type: str = None, base_output_dir: str = None, env: List[dict] = (),
               service_account: str = None, tensorboard: str = None,
               job_timeout_secs: int = None, restart_job_on_worker_restart: bool = False,
               wait_for_eval_secs: int = 600) -> dict:
    """A CustomJob spec: workerPoolSpecs in Vertex AI's order (an absent pool is {})."""
    if gpus and not accelerator_type:
        raise UserError('--gpus on Vertex AI needs --accelerator_type, e.g. NVIDIA_TESLA_T4')
    if service_account is not None and not re.match(r'[^@\s]+@[^@\s]+$', service_account):
        raise UserError(f'--service_account={service_account}: Vertex AI takes the service '
                        'account\'s email, e.g. trainer@PROJECT.iam.gserviceaccount.com')
    if tensorboard is not None:
        if not VERTEX_TENSORBOARD.match(tensorboard):
            raise UserError(f'--tensorboard={tensorboard}: give the resource name, '
                            'projects/PROJECT/locations/REGION/tensorboards/ID')
        # Vertex AI uploads from AIP_TENSORBOARD_LOG_DIR, set only with a baseOutputDirectory,
        # and its TensorBoard integration requires a service account.
        if not (service_account and base_output_dir):
            raise UserError('--tensorboard needs --service_account (Vertex AI\'s TensorBoard '
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
