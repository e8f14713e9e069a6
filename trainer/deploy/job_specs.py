"""The TFJob and Vertex AI CustomJob that `python -m trainer.deploy tfjob|vertex` prints, built
from DeployOptions (trainer/deploy/__main__.py says what each holds)."""
import json
from typing import List

from common.errors import UserError
from trainer.deploy import job_args, tfjob, vertex_job
from trainer.deploy.options import DeployOptions


def _shared_job_options(options: DeployOptions) -> dict:
    return dict(env=job_args.env_list(options.env), service_account=options.service_account,
                gpus=options.gpus, wait_for_eval_secs=options.wait_for_eval_secs)


def tfjob_spec(options: DeployOptions, args: List[str]) -> List[dict]:
    """The TFJob (and NetworkPolicy) the options ask for, running the trainer with args."""
    tfjob.check_tfjob_name(options.name, job_args.replica_counts(options.workers, options.ps,
                                                                 options.evaluators))
    for secret in options.env_from_secret:
        tfjob.check_kubernetes_name('env_from_secret', secret, 'Secret')
    if options.service_account is not None:
        tfjob.check_kubernetes_name('service_account', options.service_account, 'service account')
    return tfjob.tfjob_manifests(
        options.name, options.image, args, options.workers, options.ps, options.evaluators,
        cpu=options.cpu, memory=options.memory, namespace=options.namespace,
        network_policy=options.network_policy, env_from_secrets=options.env_from_secret,
        grace_period_secs=options.grace_period_secs, backoff_limit=options.backoff_limit,
        **_shared_job_options(options))


def vertex_job_spec(options: DeployOptions, args: List[str]) -> dict:
    """The Vertex AI CustomJob the options ask for, running the trainer with args."""
    if len(options.name) > vertex_job.VERTEX_DISPLAY_NAME_MAX:
        raise UserError(f'--name: {len(options.name)} characters; a Vertex AI displayName has at '
                        f'most {vertex_job.VERTEX_DISPLAY_NAME_MAX}')
    if options.base_output_dir and not options.base_output_dir.startswith('gs://'):
        raise UserError(f'--base_output_dir={options.base_output_dir}: Vertex AI needs a gs:// '
                        'folder')
    return vertex_job.vertex_job(
        options.name, options.image, args, options.workers, options.ps, options.evaluators,
        machine_type=options.machine_type, accelerator_type=options.accelerator_type,
        base_output_dir=options.base_output_dir, tensorboard=options.tensorboard,
        job_timeout_secs=options.job_timeout_secs,
        restart_job_on_worker_restart=options.restart_job_on_worker_restart,
        **_shared_job_options(options))


def build(options: DeployOptions, trainer_flags: List[str]) -> str:
    """deploy's `tfjob` (YAML) and `vertex` (JSON). The flag checks come first, the model's
    last: knowing the model imports TensorFlow (seconds), a mistyped flag is answered at once."""
    if options.platform == 'tfjob':
        args = job_args.trainer_args(trainer_flags, needs_model_dir=True, sync=options.sync)
        spec = tfjob.to_yaml(tfjob_spec(options, args))
    else:
        args = job_args.trainer_args(trainer_flags, needs_model_dir=not options.base_output_dir,
                                     sync=options.sync)
        spec = json.dumps(vertex_job_spec(options, args), indent=2)
    if options.workers or options.ps:  # a chief alone needs no model check (nor TensorFlow)
        job_args.check_model_replicas(trainer_flags, options.workers, options.ps)
    return spec
