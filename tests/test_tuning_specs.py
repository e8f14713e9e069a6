"""`deploy katib` and `deploy vertex --hptune`: the Experiment validated against Katib's v1beta1
schema, its trials the TFJob `deploy tfjob` prints, and the command line Katib's shell runs.

tests/data/katib-v1beta1-swagger.json is pkg/apis/v1beta1/swagger.json of kubeflow/katib at
commit 33c8ff4e5d1814b59abd308e6819e839e9906bc2 (the OpenAPI schema of the Experiment's Go
types; the CRD manifest itself, manifests/v1beta1/components/crd/experiment.yaml, declares only
`x-kubernetes-preserve-unknown-fields`).
"""
import json
import os
import shlex
import subprocess
import sys

import jsonschema
import pytest
import yaml

from helpers import REPO, assert_one_line_error, run_module

KATIB_SCHEMA = os.path.join(REPO, 'tests', 'data', 'katib-v1beta1-swagger.json')
REPLICAS = ['--name=mnist-tune', '--image=gcr.io/project/trainer:1', '--workers=1', '--ps=1',
            '--evaluator']
SEARCH = ['--objective=accuracy:maximize', '--param=dropout_rate:double:0.1:0.6',
          '--param=learning_rate:double:1e-4:1e-2:log', '--max_trials=12', '--parallel_trials=3']
TRAINER = ["--train_files=gs://bucket/mnist/train-*", '--eval_files=gs://bucket/mnist/validation-*',
           '--train_steps=2000']


def deploy(command, *flags, trainer=TRAINER, check=True):
    return run_module('trainer.deploy', command, *flags, '--', *trainer, check=check)


def strict_schema():
    """Katib's definitions, each object closed to fields it does not name (so a misspelt field
    fails); Kubernetes' own types, which the file names but does not hold, as any object."""
    definitions = json.load(open(KATIB_SCHEMA))['definitions']
    for definition in definitions.values():
        if definition.get('type') == 'object' and 'properties' in definition:
            definition['additionalProperties'] = False
    for name in ('v1.ObjectMeta', 'v1.ListMeta', 'v1.Time', 'v1.Container', 'v1.HTTPGetAction',
                 'v1.unstructured.Unstructured'):
        definitions.setdefault(name, {'type': 'object'})
    return {'$ref': '#/definitions/v1beta1.Experiment', 'definitions': definitions}


@pytest.fixture(scope='module')
def experiment():
    return yaml.safe_load(deploy('katib', *REPLICAS, *SEARCH, '--goal=0.99', trainer=[
        '--model_dir=gs://bucket/tuning/mnist/', *TRAINER]).stdout)


def test_main_called_from_python_builds_the_experiment_too(experiment):
    """deploy's main() is the same whether `python -m` runs it or a program imports it (the
    tuning specs were once imported only under `__main__`: katib from Python was a NameError)."""
    code = ('import sys; from absl import flags; from trainer.deploy import options; '
            'from trainer.deploy.__main__ import main; options.define_flags(); '
            'sys.exit(main(flags.FLAGS(sys.argv)))')
    result = subprocess.run(
        [sys.executable, '-c', code, 'katib', *REPLICAS, *SEARCH, '--goal=0.99', '--',
         '--model_dir=gs://bucket/tuning/mnist/', *TRAINER],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert yaml.safe_load(result.stdout) == experiment


def test_the_experiment_is_valid_against_katibs_schema(experiment):
    jsonschema.Draft4Validator(strict_schema()).validate(experiment)
    broken = json.loads(json.dumps(experiment))
    broken['spec']['objective']['objectiveMetric'] = 'accuracy'  # a misspelt field
    with pytest.raises(jsonschema.ValidationError, match='objectiveMetric'):
        jsonschema.Draft4Validator(strict_schema()).validate(broken)


def test_the_experiment_searches_the_params_for_the_objective(experiment):
    spec = experiment['spec']
    assert (experiment['apiVersion'], experiment['kind']) == ('kubeflow.org/v1beta1', 'Experiment')
    assert spec['objective'] == {'type': 'maximize', 'objectiveMetricName': 'accuracy', 'goal': 0.99}
    assert spec['parameters'] == [
        {'name': 'dropout_rate', 'parameterType': 'double',
         'feasibleSpace': {'min': '0.1', 'max': '0.6'}},
        {'name': 'learning_rate', 'parameterType': 'double',
         'feasibleSpace': {'min': '0.0001', 'max': '0.01', 'distribution': 'logUniform'}}]
    assert (spec['maxTrialCount'], spec['parallelTrialCount'], spec['maxFailedTrialCount']) == (12, 3, 3)
    assert spec['algorithm'] == {'algorithmName': 'random'}
    assert spec['metricsCollectorSpec'] == {'collector': {'kind': 'StdOut'}}
    template = spec['trialTemplate']
    assert template['primaryContainerName'] == 'tensorflow'
    assert template['primaryPodLabels'] == {'training.kubeflow.org/replica-type': 'chief'}
    assert template['successCondition'] == 'status.conditions.#(type=="Succeeded")#|#(status=="True")#'
    assert template['failureCondition'] == 'status.conditions.#(type=="Failed")#|#(status=="True")#'
    assert {p['name']: p['reference'] for p in template['trialParameters']} == {
        'trialName': '${trialSpec.Name}', 'dropout_rate': 'dropout_rate',
        'learning_rate': 'learning_rate'}


def katib_runs(container, values):
    """The argv of the chief's trainer as Katib runs it: trial values put in, then the command
    and args joined into one `sh -c` line (its StdOut collector's redirection after them)."""
    line = ' '.join(container['command'] + container['args'])
    for name, value in values.items():
        line = line.replace(f'${{trialParameters.{name}}}', value)
    return shlex.split(line + ' 1>/var/log/katib/metrics.log 2>&1')[:-2]


def test_each_trial_is_the_tfjob_with_its_params_as_flags_and_its_own_model_dir(experiment):
    [tfjob] = yaml.safe_load_all(deploy('tfjob', *REPLICAS, trainer=[
        '--model_dir=gs://bucket/tuning/mnist', *TRAINER]).stdout)
    trial = experiment['spec']['trialTemplate']['trialSpec']
    assert (trial['apiVersion'], trial['kind']) == (tfjob['apiVersion'], tfjob['kind'])
    trial_flags = ['--mode=train_and_evaluate',
                   '--model_dir=gs://bucket/tuning/mnist/${trialParameters.trialName}',
                   '--dropout_rate=${trialParameters.dropout_rate}',
                   '--learning_rate=${trialParameters.learning_rate}']
    for kind, replica in trial['spec']['tfReplicaSpecs'].items():
        [container] = replica['template']['spec']['containers']
        [plain] = tfjob['spec']['tfReplicaSpecs'][kind]['template']['spec']['containers']
        if kind == 'Chief':  # Katib's sh -c line: the quoted args read back as the others'
            values = {'trialName': 'mnist-tune-x7k2', 'dropout_rate': '0.25',
                      'learning_rate': '0.003'}
            assert katib_runs(container, values) == ['python', '-m', 'trainer.main'] + [
                arg.replace('${trialParameters.trialName}', 'mnist-tune-x7k2')
                   .replace('${trialParameters.dropout_rate}', '0.25')
                   .replace('${trialParameters.learning_rate}', '0.003')
                for arg in TRAINER + trial_flags + ['--wait_for_eval_secs=600']]
            container = {key: value for key, value in container.items() if key != 'command'}
        else:
            assert container['args'] == TRAINER + trial_flags
        assert {**container, 'args': None} == {**plain, 'args': None}
        assert {**replica, 'template': None} == {**tfjob['spec']['tfReplicaSpecs'][kind],
                                                 'template': None}


def test_vertex_hptune_prints_a_tuning_job_whose_trials_are_the_custom_job():
    flags = [*REPLICAS, '--base_output_dir=gs://bucket/vertex/mnist-tune']
    job = json.loads(deploy('vertex', '--hptune', *flags, *SEARCH, '--param=embedding_size:int:32:256',
                            trainer=['--model=face_embedding', *TRAINER]).stdout)
    custom_job = json.loads(deploy('vertex', *flags, trainer=['--model=face_embedding', *TRAINER]).stdout)
    assert job['displayName'] == 'mnist-tune'
    assert job['studySpec'] == {
        'metrics': [{'metricId': 'accuracy', 'goal': 'MAXIMIZE'}],
        'parameters': [
            {'parameterId': 'dropout_rate', 'doubleValueSpec': {'minValue': 0.1, 'maxValue': 0.6},
             'scaleType': 'UNIT_LINEAR_SCALE'},
            {'parameterId': 'learning_rate',
             'doubleValueSpec': {'minValue': 0.0001, 'maxValue': 0.01}, 'scaleType': 'UNIT_LOG_SCALE'},
            {'parameterId': 'embedding_size', 'integerValueSpec': {'minValue': '32', 'maxValue': '256'},
             'scaleType': 'UNIT_LINEAR_SCALE'}],
        'algorithm': 'RANDOM_SEARCH'}
    assert (job['maxTrialCount'], job['parallelTrialCount'], job['maxFailedTrialCount']) == (12, 3, 3)
    trial = job['trialJobSpec']
    assert trial['baseOutputDirectory'] == custom_job['jobSpec']['baseOutputDirectory']
    for pool, plain in zip(trial['workerPoolSpecs'], custom_job['jobSpec']['workerPoolSpecs']):
        # --hypertune_metric before the chief's own --wait_for_eval_secs (deploy's chief_args)
        plain_args = [arg for arg in plain['containerSpec']['args']
                      if not arg.startswith('--wait_for_eval_secs=')]
        waits = [arg for arg in plain['containerSpec']['args'] if arg not in plain_args]
        assert pool['containerSpec']['args'] == plain_args + [
            '--hypertune_metric=accuracy'] + waits
        assert {**pool, 'containerSpec': None} == {**plain, 'containerSpec': None}


@pytest.mark.parametrize('command, flags, trainer, fragments', [
    # In the slow suite (./run.sh test-slow): test_search_space reads this --param's mistake,
    # and the next case shows katib's one line for a --param in the default suite.
    pytest.param('katib', ['--param=margin:double:0.1:0.5'], ['--model_dir=gs://b/m'],
                 ["--param=margin:double:0.1:0.5: mnist_cnn has no param 'margin'"],
                 marks=pytest.mark.slow),
    ('katib', [], ['--model_dir=gs://b/m', '--dropout_rate=0.3'],
     ['--param=dropout_rate: the trainer flags after -- set it too']),
    ('vertex', ['--hptune', '--algorithm=tpe', '--base_output_dir=gs://b/v'], [],
     ['--algorithm=tpe: Vertex AI offers random, grid, bayesianoptimization']),
    ('vertex', ['--hptune', '--base_output_dir=gs://b/v'], ['--model_dir=gs://b/m'],
     ['vertex --hptune: give --base_output_dir=gs://... and no --model_dir']),
])
def test_bad_search_flags_are_one_line_errors(command, flags, trainer, fragments):
    search = ['--objective=accuracy:maximize', '--param=dropout_rate:double:0.1:0.5']
    result = deploy(command, *REPLICAS, *search, *flags, trainer=trainer + TRAINER, check=False)
    assert_one_line_error(result, 2, *fragments)


def test_a_trial_needs_an_evaluator():
    result = deploy('katib', *REPLICAS[:-1], '--noevaluator', '--objective=accuracy:maximize',
                    '--param=dropout_rate:double:0.1:0.5', trainer=['--model_dir=gs://b/m', *TRAINER],
                    check=False)
    assert_one_line_error(result, 2, '--evaluator is required: a trial\'s metrics come from its '
                                     'evaluator')


def test_no_trials_is_a_flag_error():
    result = deploy('katib', *REPLICAS, '--max_trials=0', trainer=['--model_dir=gs://b/m', *TRAINER],
                    check=False)
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == 'error: flag --max_trials=0: 0 is not a positive integer'
