"""Hyperparameter tuning jobs: a Katib Experiment, and a Vertex AI HyperparameterTuningJob.

  python -m trainer.deploy katib --name=NAME --image=IMAGE --workers=1 --ps=1 \
      --evaluator --objective=accuracy:maximize --param=dropout_rate:double:0.1:0.6 \
      --param=learning_rate:double:1e-4:1e-2:log --max_trials=12 --parallel_trials=3 \
      -- --model_dir=gs://BUCKET/tuning --train_files=... --eval_files=...
  python -m trainer.deploy vertex --hptune --name=NAME --image=IMAGE ... \
      --base_output_dir=gs://BUCKET/tuning -- --train_files=... --eval_files=...

Each trial is the job `deploy tfjob` or `deploy vertex` prints for the same replica flags,
with every tuned param passed as its own trainer flag (--dropout_rate=0.3). The trial's
evaluator evaluates; its chief waits for the final evaluation and reports the ledger
(--wait_for_eval_secs, as every deployed chief with an evaluator), since a trial ends with
its chief and Katib reads the chief's output.
"""
import json
import re
import shlex
from typing import Dict, List

import yaml

from common.errors import UserError
from trainer.deploy import job_args, job_specs
from trainer.deploy.options import DeployOptions
from trainer.config import search_space

# Vertex AI's names; its default (ALGORITHM_UNSPECIFIED) is Bayesian optimization. No TPE.
VERTEX_ALGORITHMS = {'random': 'RANDOM_SEARCH', 'grid': 'GRID_SEARCH',
                     'bayesianoptimization': 'ALGORITHM_UNSPECIFIED'}
# Katib's conditions for a TFJob (gjson over the job's status).
SUCCEEDED = 'status.conditions.#(type=="Succeeded")#|#(status=="True")#'
FAILED = 'status.conditions.#(type=="Failed")#|#(status=="True")#'
CHIEF_POD = {'training.kubeflow.org/replica-type': 'chief'}
TRIAL_NAME = 'trialName'  # the trial parameter Katib fills with the trial's own name


def search(options: DeployOptions, trainer_flags: List[str]):
    """(model, [Param], Objective) from the flags, checked against the model and the trainer
    flags (a tuned param must not also be fixed there)."""
    # A model of the user's own: its params are checked here as each trial's trainer reads them.
    model = job_args.check_model_replicas(trainer_flags, options.workers, options.ps)
    params = search_space.parse_params(options.param, model)
    fixed = job_args.flag_value(trainer_flags, 'model_params') or ''
    for param in params:
        if (job_args.flag_value(trainer_flags, param.name) is not None
                or re.search(rf'(^|,)\s*{param.name}\s*=', fixed)):
            raise UserError(f'--param={param.name}: the trainer flags after -- set it too; drop '
                            'it there, each trial passes its own')
        if options.algorithm == 'grid' and param.kind == 'double':
            raise UserError(f'--algorithm=grid: --param={param.name} is a double range; grid '
                            'search takes int and categorical params')
    if options.parallel_trials > options.max_trials:
        raise UserError(f'--parallel_trials={options.parallel_trials} is above --max_trials='
                        f'{options.max_trials}; lower it')
    return model, params, search_space.parse_objective(options.objective, model)


def check_trial_replicas(options: DeployOptions) -> None:
    """A trial's metrics come from its evaluator; its chief, given --wait_for_eval_secs like
    any chief of a job with an evaluator, waits for the final evaluation, then reports the
    ledger (a trial ends with its chief, and Katib reads the chief's output)."""
    if not options.evaluators:
        raise UserError('--evaluator is required: a trial\'s metrics come from its evaluator '
                        '(on a cluster the chief trains and does not evaluate)')
    if not options.wait_for_eval_secs:
        raise UserError('--wait_for_eval_secs=0: a trial\'s chief must wait for the final '
                        'evaluation, or the trial ends without its metric; give it seconds')


# ------------------------------------------------------------------ Katib Experiment


def katib_parameter(param: search_space.Param) -> Dict:
    if param.kind == 'categorical':
        space = {'list': list(param.choices)}
    else:
        space = {'min': str(param.low), 'max': str(param.high)}
        if param.log:
            space['distribution'] = 'logUniform'  # Katib 0.18 and later; older ones ignore it
    return {'name': param.name, 'parameterType': param.kind, 'feasibleSpace': space}


def katib_experiment(options: DeployOptions, trainer_flags: List[str]) -> Dict:
    check_trial_replicas(options)  # the deploy flags' own mistakes before search starts TensorFlow
    _, params, objective = search(options, trainer_flags)
    args = job_args.trainer_args(trainer_flags, needs_model_dir=True)
    model_dir = job_args.flag_value(args, 'model_dir').rstrip('/')
    # Each trial trains in its own folder, so trials never share a training lease.
    args = [arg for arg in args if not arg.startswith('--model_dir=')] + [
        f'--model_dir={model_dir}/${{trialParameters.{TRIAL_NAME}}}'] + [
        f'--{param.name}=${{trialParameters.{param.name}}}' for param in params]
    # A NetworkPolicy, if asked for, is not a trial's.
    tfjob = job_specs.tfjob_spec(options, args)[0]
    # Katib runs the primary container's (the chief's) command and args as one `sh -c` line,
    # then `1>FILE 2>&1` for its StdOut collector: the command is given, so Katib need not ask
    # the registry for the image's entry point, and each argument is quoted for the shell
    # (double quotes where Katib puts a trial's value in).
    [chief] = tfjob['spec']['tfReplicaSpecs']['Chief']['template']['spec']['containers']
    chief['command'] = ['python', '-m', 'trainer.main']
    chief['args'] = [f'"{arg}"' if '${' in arg else shlex.quote(arg) for arg in chief['args']]
    objective_spec = {'type': objective.goal, 'objectiveMetricName': objective.metric}
    if options.goal is not None:
        objective_spec['goal'] = options.goal
    metadata = {'name': options.name,
                **({'namespace': options.namespace} if options.namespace else {})}
    return {
        'apiVersion': 'kubeflow.org/v1beta1', 'kind': 'Experiment', 'metadata': metadata,
        'spec': {
            'objective': objective_spec,
            'algorithm': {'algorithmName': options.algorithm},
            'parallelTrialCount': options.parallel_trials, 'maxTrialCount': options.max_trials,
            'maxFailedTrialCount': options.max_failed_trials,
            'metricsCollectorSpec': {'collector': {'kind': 'StdOut'}},
            'parameters': [katib_parameter(param) for param in params],
            'trialTemplate': {
                'primaryContainerName': 'tensorflow', 'primaryPodLabels': CHIEF_POD,
                'successCondition': SUCCEEDED, 'failureCondition': FAILED,
                'trialParameters': [
                    {'name': TRIAL_NAME, 'description': 'the trial\'s name: its model_dir',
                     'reference': '${trialSpec.Name}'}] + [
                    {'name': param.name, 'description': f'--{param.name}',
                     'reference': param.name} for param in params],
                'trialSpec': {key: tfjob[key] for key in ('apiVersion', 'kind', 'spec')},
            },
        },
    }


# ------------------------------------------------------------------ Vertex AI tuning job


def vertex_parameter(param: search_space.Param) -> Dict:
    if param.kind == 'categorical':
        return {'parameterId': param.name, 'categoricalValueSpec': {'values': list(param.choices)}}
    spec = ({'doubleValueSpec': {'minValue': param.low, 'maxValue': param.high}}
            if param.kind == 'double' else  # int64 fields: strings in Vertex AI's JSON
            {'integerValueSpec': {'minValue': str(param.low), 'maxValue': str(param.high)}})
    return {'parameterId': param.name, **spec,
            'scaleType': 'UNIT_LOG_SCALE' if param.log else 'UNIT_LINEAR_SCALE'}


def vertex_tuning_job(options: DeployOptions, trainer_flags: List[str]) -> Dict:
    # The deploy flags' own mistakes first, in a moment: search starts TensorFlow.
    if options.algorithm not in VERTEX_ALGORITHMS:
        raise UserError(f'--algorithm={options.algorithm}: Vertex AI offers '
                        f'{", ".join(VERTEX_ALGORITHMS)}')
    if options.goal is not None:
        raise UserError('--goal is Katib\'s: a Vertex AI study has no target value; drop it')
    if job_args.flag_value(trainer_flags, 'model_dir') or not options.base_output_dir:
        raise UserError('vertex --hptune: give --base_output_dir=gs://... and no --model_dir: '
                        'Vertex AI gives each trial its own folder under it (AIP_MODEL_DIR...)')
    if not options.base_output_dir.startswith('gs://'):
        raise UserError(f'--base_output_dir={options.base_output_dir}: Vertex AI needs a gs:// '
                        'folder')
    check_trial_replicas(options)
    _, params, objective = search(options, trainer_flags)
    args = job_args.trainer_args(trainer_flags, needs_model_dir=False) + [
        f'--hypertune_metric={objective.metric}']
    custom_job = job_specs.vertex_job_spec(options, args)
    return {
        'displayName': options.name,
        'studySpec': {
            'metrics': [{'metricId': objective.metric, 'goal': objective.goal.upper()}],
            'parameters': [vertex_parameter(param) for param in params],
            'algorithm': VERTEX_ALGORITHMS[options.algorithm],
        },
        'maxTrialCount': options.max_trials, 'parallelTrialCount': options.parallel_trials,
        'maxFailedTrialCount': options.max_failed_trials,
        'trialJobSpec': custom_job['jobSpec'],  # Vertex AI adds --NAME=VALUE per param
    }


def build(options: DeployOptions, trainer_flags: List[str]) -> str:
    """deploy's `katib` (YAML) and `vertex --hptune` (JSON)."""
    if options.platform == 'tfjob':
        return yaml.safe_dump(katib_experiment(options, trainer_flags), sort_keys=False)
    return json.dumps(vertex_tuning_job(options, trainer_flags), indent=2) + '\n'
