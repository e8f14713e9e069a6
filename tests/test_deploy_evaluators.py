"""Several evaluators: `deploy tfjob|vertex --evaluators=N` and `./run.sh cluster
--evaluators=N` (the same replica flags) start N eval jobs under one --eval_name, each with its index in
TF_CONFIG; contradicting or misplaced flags get one line (exit 2)."""
import json

import jsonschema
import pytest
import yaml

from common import tf_config
from helpers import assert_one_line_error, run_module
from test_deploy import (ARGS, TFJOB_SCHEMA, TRAINER_FLAGS, operator_tf_configs, print_spec)
from trainer.cluster import local_cluster


def test_tfjob_with_three_evaluators_gives_each_its_index():
    tfjob = yaml.safe_load(print_spec('tfjob', '--name=mnist', '--image=i', '--workers=1',
                                      '--ps=1', '--evaluators=3').stdout)
    specs = tfjob['spec']['tfReplicaSpecs']
    assert specs['Evaluator']['replicas'] == 3
    assert specs['Evaluator']['template']['spec']['containers'][0]['args'] == ARGS
    # The chief waits for the evaluators' ledger, as with one.
    assert specs['Chief']['template']['spec']['containers'][0]['args'] == ARGS + [
        '--wait_for_eval_secs=600']
    with open(TFJOB_SCHEMA) as f:
        assert list(jsonschema.Draft7Validator(json.load(f)).iter_errors(tfjob)) == []
    roles = {key: tf_config.role(config) for key, config in operator_tf_configs(tfjob).items()}
    evaluators = sorted(key for key in roles if key[0] == 'evaluator')
    assert evaluators == [('evaluator', 0), ('evaluator', 1), ('evaluator', 2)]
    assert all(roles[key].index == key[1] and not roles[key].trains for key in evaluators)


def test_vertex_evaluator_pool_takes_the_count():
    job = json.loads(print_spec('vertex', '--name=mnist', '--image=i', '--workers=1', '--ps=1',
                                '--evaluators=2').stdout)
    assert [pool['replicaCount'] for pool in job['jobSpec']['workerPoolSpecs']] == [1, 1, 1, 2]


def test_loopback_cluster_names_several_evaluators_by_index():
    launched = local_cluster.tasks(local_cluster.cluster_spec(1, 1), 2)
    labels = [label for label, _ in launched]
    assert labels == ['ps0', 'chief', 'worker0', 'evaluator0', 'evaluator1']
    assert [config['task'] for label, config in launched if label.startswith('evaluator')] == [
        {'type': 'evaluator', 'index': 0}, {'type': 'evaluator', 'index': 1}]
    assert [label for label, _ in local_cluster.tasks(local_cluster.cluster_spec(1, 1), True)][
        -1] == 'evaluator'  # one evaluator keeps its name


@pytest.mark.parametrize('deploy_flags, message', [
    (['--noevaluator', '--evaluators=2'], '--evaluators=2 contradicts --noevaluator; keep one'),
    (['--evaluator', '--evaluators=0'], '--evaluators=0 contradicts --evaluator; keep one'),
])
def test_contradicting_evaluator_flags_get_one_line(deploy_flags, message):
    result = print_spec('tfjob', '--name=j', '--image=i', *deploy_flags,
                        trainer_flags=TRAINER_FLAGS, check=False)
    assert result.stdout == ''
    assert_one_line_error(result, 2, message)


@pytest.mark.parametrize('launcher_flags, message', [
    (['--evaluators=2', '--mode=train'],
     '--evaluators=2 with --mode=train: evaluators run only beside --mode=train_and_evaluate'),
    (['--mode=train'], '--evaluator with --mode=train: evaluators run only beside '
     '--mode=train_and_evaluate; drop --mode=train, or give --noevaluator'),
    (['--evaluators=2', '--noevaluator'], '--evaluators=2 contradicts --noevaluator; keep one'),
])
def test_bad_launcher_evaluator_flags_get_one_line_before_any_task_starts(launcher_flags,
                                                                           message):
    result = run_module('trainer.cluster.local_cluster', '--model_dir=/nonexistent/m',
                        '--train_files=x', *launcher_flags, check=False, timeout=60)
    assert_one_line_error(result, 2, message)
    assert '[chief]' not in result.stdout
