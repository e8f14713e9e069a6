"""The trainer's flags for each replica of a cluster job, checked before any spec is printed."""
import re
from typing import Dict, List

from common import paths
from common.errors import UserError

ENV_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*$')
SYNC_DISTRIBUTION = 'multi_worker_mirrored'


def flag_value(trainer_flags: List[str], name: str):
    """The last --name=value among the trainer flags, or None."""
    values = [arg.split('=', 1)[1] for arg in trainer_flags if arg.startswith(f'--{name}=')]
    return values[-1] if values else None


def trainer_args(trainer_flags: List[str], needs_model_dir: bool, sync: bool = False) -> List[str]:
    """The trainer's command-line flags for every replica, checked for a cluster; with sync,
    --distribution=multi_worker_mirrored."""
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
                        'parameter servers, or all-reduce with deploy --sync: drop it from the '
                        'trainer flags')
    distribution = flag_value(trainer_flags, 'distribution')
    if sync and distribution not in (None, SYNC_DISTRIBUTION):
        raise UserError(f'--sync trains with --distribution={SYNC_DISTRIBUTION}; drop '
                        f'--distribution={distribution} from the trainer flags')
    if distribution == SYNC_DISTRIBUTION and not sync:
        raise UserError(f'--distribution={SYNC_DISTRIBUTION} needs a job without parameter '
                        'servers: give deploy --sync (before --), which sets it')
    if flag_value(trainer_flags, 'wait_for_eval_secs') is not None:
        raise UserError('--wait_for_eval_secs is a deploy flag (before --): only the chief '
                        'waits, so deploy passes it to the chief alone')
    sync_flag = [f'--distribution={SYNC_DISTRIBUTION}'] if sync and distribution is None else []
    return [arg for arg in trainer_flags if not arg.startswith('--mode=')] + [
        '--mode=train_and_evaluate'] + sync_flag


def check_model_replicas(trainer_flags: List[str], workers: int, ps: int) -> str:
    """The trainer flags' model (its --usr_dir imported), refused where it trains in one process
    and the job asks for workers or parameter servers: else the trainer would refuse at start."""
    from models import registry  # TensorFlow: only where a model must be known
    from trainer.config.flags import defaults
    from trainer.usr_dir import command_line as usr_dir
    model = flag_value(trainer_flags, 'model') or defaults()['model']
    usr_dir.import_for_command(['deploy', *trainer_flags], read_model_dir=False)
    if registry.get(model).single_process and (workers or ps):
        raise UserError(f'--workers={workers} --ps={ps}: {model} trains in one process; give '
                        '--workers=0 --ps=0 (a chief, and an evaluator beside it)')
    return model


def replica_counts(workers: int, ps: int, evaluator: int) -> Dict[str, int]:
    """Replicas per task type, in TF_CONFIG's lowercase names; evaluator: a count (True: one)."""
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
            raise UserError(f'--env={pair}: give KEY=VALUE with a KEY of letters, digits and _ '
                            'that does not start with a digit')
        if key == 'TF_CONFIG':
            raise UserError('--env=TF_CONFIG=...: the operator and Vertex AI set TF_CONFIG for '
                            'each replica themselves; drop it')
        if key in [var['name'] for var in env]:
            raise UserError(f'--env={key}=... is given twice; keep one')
        env.append({'name': key, 'value': value})
    return env
