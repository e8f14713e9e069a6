"""boosted_trees_classifier and _regressor over a prepared table, through the CLI: they learn an
interaction the linear models cannot, stop once every tree is grown (also when resumed), the eval
job exports them and the export serves every signature; bad params and distribution are one line.
(Predict on CSV and JSON lines runs an export's signatures whatever the model: test_canned.py.)"""
import json
import os

import pytest
import tensorflow as tf
import yaml

from common.errors import UserError
from helpers import assert_one_line_error, run_module, trainer_user_error
from input_fns.tables import table_records
from models.tables import boosted_trees
from serving_loader_checks import assert_same_answers, check_against_python, replayed_warmup
from test_canned import files_flags, loader_lines, prepared, trainer

# 180 training rows in batches of 32; a layer from 5 batches; (6 trees x 3 layers + the bias)
# x 5 = 95 steps.
TREES = ['--batch_size=32', '--n_trees=6', '--max_depth=3', '--n_batches_per_layer=5',
         '--learning_rate=0.5', '--save_checkpoints_steps=40', '--log_every_n_steps=40',
         '--eval_throttle_secs=0']
ALL_GROWN = 95


def rich(age, color, x):
    """Old, or else red: an interaction of a number and a text column."""
    return 'rich' if (age > 45) != (color == 'red') else 'poor'


@pytest.fixture(scope='module')
def grown(tmp_path_factory):
    """Trained to step 42 (mid-layer, as if stopped there), then resumed to the end, evaluated."""
    folder = prepared(tmp_path_factory, 'trees', rich, weight_column='weight')
    common = ['--model=boosted_trees_classifier', f'--model_dir={folder}/run',
              *files_flags(folder), *TREES]
    trainer(*common, '--mode=train', '--train_steps=42')
    assert tf.train.latest_checkpoint(f'{folder}/run').endswith('-42')
    resumed = trainer(*common, '--mode=train_and_evaluate', '--train_steps=1000')
    return folder, common, resumed


def evaluated(folder):
    """train_and_evaluate's evaluation of the last step."""
    path = f'{folder}/run/eval_default/results/step-{ALL_GROWN:09d}.json'
    return json.load(open(path))['metrics']


def test_training_stops_when_every_tree_is_grown_and_resumes_to_the_same_end(grown):
    folder, common, resumed = grown
    assert f'all 6 trees are grown (step {ALL_GROWN}); training ends' in resumed.stderr
    finished = json.load(open(f'{folder}/run/train_finished.json'))
    assert (finished['step'], finished['reason']) == (ALL_GROWN, 'the model ended training')
    reader = tf.train.load_checkpoint(f'{folder}/run')
    assert reader.get_tensor('boosted_trees/phases_done') == 6 * 3 + 1
    metrics = evaluated(folder)
    assert metrics['global_step'] == ALL_GROWN and metrics['accuracy'] >= 0.9, metrics
    trainer(*common, '--mode=train', '--train_steps=1000')  # all grown: nothing changes
    assert tf.train.latest_checkpoint(f'{folder}/run').endswith(f'-{ALL_GROWN}')


def test_the_eval_job_exports_the_best_and_it_serves_every_signature(grown, serving_loader):
    folder, common, _ = grown
    export_dir = f'{folder}/exports'
    trainer(*common, '--mode=continuous_eval', '--eval_name=validation',
            f'--export_dir={export_dir}', '--export_metric=accuracy')
    ledger = json.load(open(f'{folder}/run/eval_validation/results/step-{ALL_GROWN:09d}.json'))
    assert {'accuracy', 'auc', 'precision', 'recall'} <= set(ledger['metrics'])
    version = f'{export_dir}/{open(f"{export_dir}/best").read().strip()}'
    signatures = tf.saved_model.load(version).signatures
    assert sorted(signatures) == ['classify', 'predict_examples', 'regress', 'serving_default']
    assert sorted(replayed_warmup(version)) == sorted(signatures)
    rest = signatures['serving_default'](age=tf.constant([70, 20, 70], tf.int64),
                                         color=tf.constant(['blue', 'red', 'red']),
                                         x=tf.constant([0.5, 0.5, 0.5]))
    assert rest['classes'].numpy()[:, 0].tolist() == [b'rich', b'rich', b'poor']
    examples = [table_records.encode_example(['age', 'color'], ['int', 'string'], [75, 'green']),
                table_records.encode_example(['age'], ['int'], [19])]  # color missing: OOV
    classified = signatures['classify'](inputs=tf.constant(examples))
    best = classified['scores'].numpy().argmax(axis=1)
    assert [classified['classes'].numpy()[row, column] for row, column in enumerate(best)] == [
        b'rich', b'poor']
    # As TF Serving runs it, in C++ (ordinary ops only): every warm-up request, and the REST
    # body of the rows above.
    body = f'{folder}/rest_body.json'
    with open(body, 'w') as f:
        json.dump({'instances': [{'age': 70, 'color': 'blue', 'x': 0.5},
                                 {'age': 20, 'color': 'red', 'x': 0.5},
                                 {'age': 70, 'color': 'red', 'x': 0.5}]}, f)
    lines = check_against_python(serving_loader, version, rest_body=body)
    assert_same_answers(loader_lines(lines, 'rest_body')[body],
                        {key: value.numpy() for key, value in rest.items()})


def test_three_classes(tmp_path_factory):
    three = prepared(tmp_path_factory, 'three_trees',
                     lambda age, color, x: 'a' if age < 38 else 'b' if age < 60 else 'c')
    trainer('--model=boosted_trees_classifier', f'--model_dir={three}/run', *files_flags(three),
            *TREES, '--mode=train_and_evaluate', '--train_steps=1000')
    metrics = evaluated(three)
    assert metrics['accuracy'] >= 0.9 and 'accuracy_of_class/c' in metrics, metrics


def test_a_number_label(tmp_path_factory):
    number = prepared(tmp_path_factory, 'number_trees',
                      lambda age, color, x: round(age * 0.1 + (2 if color == 'red' else 0), 3))
    trainer('--model=boosted_trees_regressor', f'--model_dir={number}/run', *files_flags(number),
            *TREES, '--mode=train_and_evaluate', '--train_steps=1000')
    metrics = evaluated(number)
    assert metrics['average_loss'] < 0.5, metrics  # the label's variance is about 4


def test_bad_params_and_distribution_are_one_line(grown, tmp_path):
    folder, _, _ = grown
    for params, error in (({'max_depth': 0}, '--max_depth=0: give 1 or more'),
                          ({'max_depth': 13}, '--max_depth=13: at most 12'),
                          ({'min_node_weight': -1.0}, '--min_node_weight=-1.0: give 0 or more'),
                          ({'learning_rate': 0.0}, '--learning_rate=0.0: give a positive')):
        with pytest.raises(UserError, match=error):
            boosted_trees.check_params({**boosted_trees.PARAMS, **params})
    assert trainer_user_error(
        '--model=boosted_trees_classifier', f'--model_dir={tmp_path}/run', *files_flags(folder),
        '--mode=train', '--distribution=mirrored', '--cpu_replicas=2').startswith(
        'error: --distribution=mirrored: boosted_trees_classifier trains in one process')
    assert not os.path.exists(f'{tmp_path}/run/flags.txt')


@pytest.mark.parametrize('platform', ['tfjob', 'vertex'])
def test_cluster_jobs_refuse_workers_for_a_model_of_one_process(platform):
    trainer_flags = ['--', '--model=boosted_trees_classifier', '--model_dir=gs://b/trees',
                     '--train_files=gs://b/data/train-*', '--eval_files=gs://b/data/validation-*']
    result = run_module('trainer.deploy', platform, '--name=trees', '--image=i', '--workers=2',
                        '--ps=0', *trainer_flags, check=False)
    assert_one_line_error(result, 2, '--workers=2 --ps=0: boosted_trees_classifier trains in one '
                          'process; give --workers=0 --ps=0')
    alone = run_module('trainer.deploy', platform, '--name=trees', '--image=i', '--workers=0',
                       '--ps=0', '--evaluator', *trainer_flags).stdout
    if platform == 'tfjob':
        tfjob = next(doc for doc in yaml.safe_load_all(alone) if doc['kind'] == 'TFJob')
        replicas = tfjob['spec']['tfReplicaSpecs']
        assert set(replicas) == {'Chief', 'Evaluator'}
    else:  # pools: chief, workers, parameter servers, evaluator
        pools = json.loads(alone)['jobSpec']['workerPoolSpecs']
        assert [pool.get('replicaCount') for pool in pools] == [1, None, None, 1]


def test_katib_tunes_its_params_with_trials_of_a_chief_alone():
    replicas = ['--name=trees', '--image=gcr.io/project/trainer:1', '--evaluator']
    search = ['--objective=auc:maximize', '--param=max_depth:int:2:6',
              '--param=l2_regularization:double:0.001:1:log', '--max_trials=4']
    trainer_flags = ['--', '--model=boosted_trees_classifier', '--model_dir=gs://b/trees',
                     '--train_files=gs://b/data/train-*', '--eval_files=gs://b/data/validation-*']
    result = run_module('trainer.deploy', 'katib', *replicas, '--workers=1', '--ps=1', *search,
                        *trainer_flags, check=False)
    assert_one_line_error(result, 2, '--workers=1 --ps=1: boosted_trees_classifier trains in one '
                          'process; give --workers=0 --ps=0')
    experiment = yaml.safe_load(run_module('trainer.deploy', 'katib', *replicas, '--workers=0',
                                           '--ps=0', *search, *trainer_flags).stdout)
    names = [parameter['name'] for parameter in experiment['spec']['parameters']]
    assert names == ['max_depth', 'l2_regularization']
    trial = yaml.safe_dump(experiment['spec']['trialTemplate'])
    assert '--max_depth=${trialParameters.max_depth}' in trial and 'Worker' not in trial
