"""--usr_dir (issue 37): the three example modules of docs/your-model.md run end to end from a
copy (train -> eval job -> best export -> predict -> TF Serving REST bodies -> TF Serving's C++
loader, issue 38); flags.txt records
the folder and its hash and later commands import it again; each mistake is one line; a bucket
folder is copied to the cache; the built-in models use trainer/api.py's names only."""
import ast
import json
import os
import re
import runpy
import shutil
import subprocess
import sys

import pytest

from helpers import REPO, assert_one_line_error, run_module
from serving_loader_checks import check_against_python
from trainer.observe.status import read_snapshot, render_text, summarize
from trainer.serving import predict

EXAMPLES = os.path.join(REPO, 'docs', 'your-model')
REST_REQUEST = re.compile(r'^`POST /v1/models/(\w+):(\w+)`\n```json\n(.*?)\n```',
                          re.MULTILINE | re.DOTALL)


def documented_bodies(model):
    """{verb: body} of docs/your-model.md's REST requests for model."""
    with open(os.path.join(REPO, 'docs', 'your-model.md')) as f:
        return {verb: json.loads(body) for name, verb, body in REST_REQUEST.findall(f.read())
                if name == model}


def copy_example(name, tmp_path):
    destination = tmp_path / 'code' / name
    shutil.copytree(os.path.join(EXAMPLES, name), destination)
    return str(destination)


def trainer(*args, check=True):
    return run_module('trainer.main', *args, check=check)


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith('{')]


def write_bodies(bodies, folder):
    paths = []
    for verb, body in sorted(bodies.items()):
        paths.append(str(folder / f'{verb}.json'))
        with open(paths[-1], 'w') as f:
            json.dump(body, f)
    return paths


def test_small_cnn_over_the_digits_end_to_end(digit_shards, tmp_path, serving_loader):
    usr_dir = copy_example('small_cnn', tmp_path)
    model_dir, exports = str(tmp_path / 'model'), str(tmp_path / 'exports')
    trainer(f'--usr_dir={usr_dir}', '--model=small_cnn', '--mode=train', f'--model_dir={model_dir}',
            f'--train_files={digit_shards.train_pattern}', '--train_steps=60',
            '--save_checkpoints_steps=60', '--batch_size=20', '--small_cnn_filters=8')
    with open(os.path.join(model_dir, 'flags.txt')) as f:
        recorded = f.read()
    assert f'--usr_dir={usr_dir}\n' in recorded and '--small_cnn_filters=8\n' in recorded
    assert re.search(rf'^# --usr_dir={re.escape(usr_dir)}: sha256 [0-9a-f]{{64}} of its files$',
                     recorded, re.MULTILINE)
    # The eval job names no --usr_dir: flags.txt's is imported again.
    trainer('--model=small_cnn', '--mode=continuous_eval', f'--model_dir={model_dir}',
            f'--eval_files={digit_shards.validation_pattern}', '--eval_name=validation',
            f'--export_dir={exports}', '--export_metric=accuracy')
    with open(os.path.join(model_dir, 'eval_validation', 'results', 'step-000000060.json')) as f:
        assert json.load(f)['metrics']['accuracy'] > 0.5  # chance is 0.1
    # What `python -m trainer.observe.status` prints, here (the command is test_eval_job's).
    status = render_text(summarize(read_snapshot(model_dir)))
    assert re.search(rf'^usr_dir     {re.escape(usr_dir)} \(sha256 [0-9a-f]{{12}}\)$', status,
                     re.MULTILINE) and 'model       small_cnn' in status
    image = str(tmp_path / 'digit.png')
    import tensorflow as tf
    tf.io.write_file(image, tf.io.encode_png(digit_shards.validation[0][0][..., None]))
    bodies = write_bodies(documented_bodies('small_cnn'), tmp_path)
    # An image through what --mode=predict runs on one (the command runs the REST bodies below).
    [predicted] = predict.predict_files(f'{exports}/best', [image])
    assert predicted['classes'] == digit_shards.validation[1][0]
    [classified] = json_lines(trainer('--mode=predict', f'--saved_model={exports}/best',
                                      *bodies).stdout)
    assert classified['classes'] == [str(digit) for digit in range(10)]
    assert abs(sum(classified['scores']) - 1) < 1e-4
    with open(os.path.join(exports, 'best')) as f:  # as TF Serving loads it, in C++
        check_against_python(serving_loader, os.path.join(exports, f.read().strip()))


def test_house_prices_own_input_kind_and_regress_signature_end_to_end(tmp_path, serving_loader,
                                                                       monkeypatch):
    usr_dir = copy_example('house_prices', tmp_path)
    data, model_dir, exports = (str(tmp_path / name) for name in ('data', 'model', 'exports'))
    # `python make_houses.py DATA 1000`, in this process (TensorFlow is started here already).
    monkeypatch.setattr(sys, 'argv', ['make_houses.py', data, '1000'])
    runpy.run_path(os.path.join(EXAMPLES, 'make_houses.py'), run_name='__main__')
    trainer(f'--usr_dir={usr_dir}', '--model=house_prices', '--mode=train',
            f'--model_dir={model_dir}', f'--train_files={data}/train-*', '--train_steps=200',
            '--save_checkpoints_steps=200', '--batch_size=50')
    trainer('--model=house_prices', '--mode=continuous_eval', f'--model_dir={model_dir}',
            f'--eval_files={data}/validation-*', '--eval_name=validation',
            f'--export_dir={exports}', '--export_metric=root_mean_squared_error')
    with open(os.path.join(exports, 'best')) as f:
        best = f.read().strip()
    with open(os.path.join(model_dir, 'eval_validation', 'results', f'step-{int(best):09d}.json')) as f:
        assert json.load(f)['metrics']['root_mean_squared_error'] < 0.2  # the prices span 1 to 6
    bodies = documented_bodies('house_prices')
    assert sorted(bodies) == ['predict', 'regress']
    predict_body, regress_body = write_bodies(bodies, tmp_path)
    predicted, regressed = json_lines(trainer('--mode=predict', f'--saved_model={exports}/best',
                                              predict_body, regress_body).stdout)
    assert predicted['request'].endswith('predict.json')
    # As TF Serving loads it, in C++: the warm-up it replays first, then the REST predict body.
    lines = check_against_python(serving_loader, os.path.join(exports, best), rest_body=predict_body)
    warmed_up = {line['signature']: line['outputs'] for line in lines if 'warmup' in line}
    assert sorted(warmed_up) == ['regress', 'serving_default']
    assert warmed_up['regress']['outputs']['shape'] == [1]
    [answered] = [line for line in lines if 'rest_body' in line]
    assert abs(answered['outputs']['price']['values'][0] - predicted['price']) < 1e-5
    # The documented house's price by the rule make_houses.py made the prices with: 2.755.
    assert abs(regressed['outputs'] - 2.755) < 0.3
    assert abs(predicted['price'] - regressed['outputs']) < 1e-5


def write_table(path, label, rows=600):
    """x, a number; color, text; the label: 'low', 'mid' or 'high' by x (kind), or a number
    made of both (price)."""
    import numpy as np
    rng = np.random.default_rng(0)
    with open(path, 'w') as f:
        f.write(f'x,color,{label}\n')
        for x, color in zip(rng.normal(size=rows), rng.choice(['red', 'green', 'blue'], rows)):
            value = (('low' if x < -0.4 else 'high' if x > 0.4 else 'mid') if label == 'kind'
                     else f'{2 * x + (color == "red"):.3f}')
            f.write(f'{x:.3f},{color},{value}\n')
    return str(path)


@pytest.mark.parametrize('label', ['kind', 'price'])
def test_table_net_over_a_prepared_csv_takes_the_canned_head(tmp_path, label):
    """docs/your-model/table_net: a network of the user's over `prepare csv` shards, with the
    canned models' head: three classes (accuracy, each class's, classify) or a number
    (average loss, regress), and predict on CSV rows."""
    from helpers import run_prepare
    from input_fns.tables import prepare_csv
    usr_dir = copy_example('table_net', tmp_path)
    data, model_dir, exports = (str(tmp_path / name) for name in ('data', 'model', 'exports'))
    run_prepare(prepare_csv.prepare_csv, source=write_table(tmp_path / 'table.csv', label),
                output_dir=data, label=label, column_types=None, task=None,
                max_vocabulary=100, na_values=[''], weight_column=None, num_eval_shards=1)
    trainer(f'--usr_dir={usr_dir}', '--model=table_net', '--mode=train_and_evaluate',
            f'--model_dir={model_dir}', f'--train_files={data}/train-*',
            f'--eval_files={data}/validation-*', '--train_steps=300', '--batch_size=32',
            '--save_checkpoints_steps=300', f'--export_dir={exports}')
    with open(os.path.join(model_dir, 'eval_default', 'results', 'step-000000300.json')) as f:
        metrics = json.load(f)['metrics']
    if label == 'kind':
        assert metrics['accuracy'] > 0.8 and 'accuracy_of_class/mid' in metrics, metrics
    else:
        assert metrics['average_loss'] < 0.3, metrics  # the price's variance is about 4.2
    import tensorflow as tf
    signatures = tf.saved_model.load(os.path.join(exports, '300')).signatures
    assert sorted(signatures) == sorted(['classify' if label == 'kind' else 'regress',
                                         'predict_examples', 'serving_default'])
    rows = tmp_path / 'rows.csv'
    rows.write_text('x,color\n-2.0,red\n2.0,blue\n')
    low, high = predict.predict_files(exports, [str(rows)])
    if label == 'kind':
        assert (low['classes'], high['classes']) == ('low', 'high')
    else:
        assert low['predictions'] < 0 < high['predictions'], (low, high)


def test_helpshort_lists_the_user_params_and_models(tmp_path):
    usr_dir = copy_example('small_cnn', tmp_path)
    shown = ' '.join(trainer(f'--usr_dir={usr_dir}', '--helpshort').stdout.split())
    assert '--small_cnn_filters: Model param (default: small_cnn 16)' in shown
    assert re.search(r'--model: Registered model: [a-z_, ]*small_cnn', shown)


def user_module(tmp_path, text, name='mine'):
    folder = tmp_path / 'usr'
    folder.mkdir(exist_ok=True)
    (folder / f'{name}.py').write_text(text)
    return str(folder)


def test_a_folder_that_is_not_there_and_a_module_that_raises(tmp_path):
    assert_one_line_error(trainer(f'--usr_dir={tmp_path}/none', '--helpshort', check=False), 2,
                          f'--usr_dir={tmp_path}/none: no such folder')
    usr_dir = user_module(tmp_path, 'import os\n\n\ndef broken():\n    raise ValueError("oops")\n'
                                    '\n\nbroken()\n')
    result = trainer(f'--usr_dir={usr_dir}', '--helpshort', check=False)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and lines[-1] == (
        f'error: --usr_dir={usr_dir}: importing mine ({usr_dir}/mine.py) raised ValueError: oops; '
        'fix it (the traceback above is from your module)')
    # Their traceback starts at their module: none of the service's frames.
    assert lines[0] == 'Traceback (most recent call last):' and f'{usr_dir}/mine.py' in lines[1]
    assert 'trainer/' not in result.stderr.replace(f'{usr_dir}', '')


def test_registration_mistakes_name_the_module(tmp_path):
    taken = user_module(tmp_path, 'from trainer import api\nfrom models import mnist_cnn\n'
                                  'api.register_model(api.ModelSpec("mnist_cnn", '
                                  'lambda f, l, m, p: None, {}, "image_classification"))\n')
    assert_one_line_error(trainer(f'--usr_dir={taken}', '--helpshort', check=False), 2,
                          f'--usr_dir={taken}: mine registers model \'mnist_cnn\', which '
                          'models.mnist_cnn registered first; rename one of them')
    unknown = user_module(tmp_path, 'from trainer import api\n\n\ndef model_fn(f, l, m, p):\n'
                                    '    pass\n\n\napi.register_model(api.ModelSpec("mine", '
                                    'model_fn, {}, "tables"))\n')
    assert_one_line_error(trainer(f'--usr_dir={unknown}', '--helpshort', check=False), 2,
                          "model mine (mine) names input_kind 'tables', which no module "
                          'registers; registered: csv_features, face_pairs, image_classification')
    shadowing = user_module(tmp_path, 'x = 1\n', name='json')
    assert_one_line_error(trainer(f'--usr_dir={shadowing}', '--helpshort', check=False), 2,
                          f'--usr_dir={shadowing}: its module json ({shadowing}/json.py) has the '
                          'name of ', '; rename it')


BAD_MODEL_FN = '''import tensorflow as tf
from trainer import api


def model_fn(features, labels, mode, params):
    logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(features['image']))
    if mode == tf.estimator.ModeKeys.PREDICT:  # forgot the predictions
        return tf.estimator.EstimatorSpec(mode)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
    if mode == tf.estimator.ModeKeys.TRAIN:
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=api.train_op(loss, params))


api.register_model(api.ModelSpec('bad', model_fn, dict(api.TRAINING_PARAMS),
                                 'image_classification', image_shape=(28, 28, 1)))
'''


def test_model_fn_mistakes_are_named_at_the_first_call(digit_shards, tmp_path):
    usr_dir = user_module(tmp_path, BAD_MODEL_FN)
    model_dir = str(tmp_path / 'model')
    common = [f'--usr_dir={usr_dir}', '--model=bad', f'--model_dir={model_dir}']
    trainer(*common, '--mode=train', f'--train_files={digit_shards.train_pattern}',
            '--train_steps=2', '--batch_size=10')
    assert_one_line_error(
        trainer(*common, '--mode=evaluate', f'--eval_files={digit_shards.validation_pattern}',
                check=False), 2,
        'model bad (mine.model_fn) returned NoneType for mode eval; return a '
        'tf.estimator.EstimatorSpec for every mode (with loss= (and eval_metric_ops=))')
    assert_one_line_error(
        trainer(*common, '--mode=export', f'--export_dir={tmp_path}/exports', check=False), 2,
        'model bad (mine.model_fn), mode infer: tf.estimator.EstimatorSpec refused it: Missing '
        'predictions.; give predictions= and export_outputs=')


def test_a_changed_folder_warns_and_a_missing_one_says_which_flag_to_add(tmp_path):
    usr_dir = copy_example('small_cnn', tmp_path)
    model_dir = tmp_path / 'model'
    model_dir.mkdir()
    (model_dir / 'flags.txt').write_text(
        f'--model=small_cnn\n--usr_dir={usr_dir}\n# --usr_dir={usr_dir}: sha256 {"0" * 64} of '
        'its files\n')
    changed = trainer('--model=small_cnn', f'--model_dir={model_dir}', '--mode=export',
                      f'--export_dir={tmp_path}/exports', check=False)
    warnings = [line for line in changed.stderr.splitlines() if line.startswith('warning: ')]
    assert warnings == [f'warning: --usr_dir={usr_dir}: its files changed since {model_dir}/'
                        'flags.txt recorded them (sha256 000000000000, now '
                        f'{warnings[0].split("now ")[1][:12]}); the model is built from them as '
                        'they are now'] if warnings else False
    moved = str(tmp_path / 'elsewhere' / 'small_cnn')
    shutil.move(usr_dir, moved)
    given_elsewhere = trainer(f'--usr_dir={moved}', '--model=small_cnn', f'--model_dir={model_dir}',
                              '--mode=export', f'--export_dir={tmp_path}/exports', check=False)
    assert (f'warning: --usr_dir={moved}: its files differ from those of --usr_dir={usr_dir} '
            f'that {model_dir}/flags.txt recorded them (sha256 000000000000, now '
            f'{warnings[0].split("now ")[1][:12]})') in given_elsewhere.stderr
    assert_one_line_error(trainer('--model=small_cnn', f'--model_dir={model_dir}', '--mode=export',
                                  f'--export_dir={tmp_path}/exports', check=False), 2,
                          f'{model_dir}/flags.txt records --usr_dir={usr_dir}, which is not '
                          'there; add --usr_dir=FOLDER naming where those modules are now')


def test_a_bucket_folder_is_copied_to_the_cache_by_its_hash(tmp_path, monkeypatch):
    import tensorflow as tf

    from trainer.usr_dir import folders
    monkeypatch.setattr(folders, 'cache_root', lambda: str(tmp_path / 'cache'))
    bucket = 'ram://usr_dir_test/code/my_model'
    for relative, text in [('__init__.py', 'from . import parts\n'), ('parts.py', 'X = 1\n'),
                           ('__pycache__/parts.cpython-311.pyc', 'cache')]:
        tf.io.gfile.makedirs(os.path.dirname(f'{bucket}/{relative}'))
        with tf.io.gfile.GFile(f'{bucket}/{relative}', 'w') as f:
            f.write(text)
    found = folders.find(bucket + '/')
    assert found.path == bucket and found.local.startswith(str(tmp_path / 'cache'))
    assert sorted(os.listdir(found.local)) == ['__init__.py', 'parts.py']
    assert found.local.endswith('/my_model') and folders.find(bucket) == found
    tf.io.gfile.remove(f'{bucket}/parts.py')  # ram:// appends to a file written again
    with tf.io.gfile.GFile(f'{bucket}/parts.py', 'w') as f:
        f.write('X = 2\n')
    changed = folders.find(bucket)
    assert changed.sha256 != found.sha256 and changed.local != found.local
    with open(os.path.join(changed.local, 'parts.py')) as f:
        assert f.read() == 'X = 2\n'


API_HOMES = ('registry', 'training', 'precision', 'heads',
             'eval_pictures', 'class_weights')


def test_the_built_in_models_use_only_the_api():
    """What each built-in model takes from the shared model modules is what trainer/api.py
    exports (the same objects), so the API is the one the service's own models live on."""
    import importlib

    from models.registry import MODEL_MODULES
    from trainer import api
    exported = [getattr(api, name) for name in api.__all__]
    used = set()
    for module in MODEL_MODULES:
        with open(os.path.join(REPO, *module.split('.')) + '.py') as f:
            tree = ast.parse(f.read())
        used |= {(node.value.id, node.attr) for node in ast.walk(tree)
                 if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                 and node.value.id in API_HOMES}
    assert len(used) >= 6
    outside = [f'{home}.{attr}' for home, attr in sorted(used) if not any(
        getattr(importlib.import_module(f'models.{home}'), attr) is item for item in exported)]
    assert outside == []


def test_deploy_and_katib_trials_pass_the_folder_on(tmp_path):
    """Each replica's trainer flags hold --usr_dir (TFJob, Vertex AI); a Katib search over a param of the user's
    model is checked against that model (imported from the folder) and each trial passes it."""
    import yaml
    usr_dir = copy_example('small_cnn', tmp_path)
    trainer_flags = ['--', f'--usr_dir={usr_dir}', '--model=small_cnn',
                     '--model_dir=gs://bucket/runs/small', '--train_files=gs://bucket/d/train-*',
                     '--eval_files=gs://bucket/d/validation-*']
    replicas = ['--name=small', '--image=gcr.io/project/trainer:1', '--workers=1', '--ps=1',
                '--evaluator']
    [tfjob] = yaml.safe_load_all(run_module('trainer.deploy', 'tfjob', *replicas,
                                            *trainer_flags).stdout)
    specs = tfjob['spec']['tfReplicaSpecs']
    assert sorted(specs) == ['Chief', 'Evaluator', 'PS', 'Worker']
    for replica in specs.values():
        [container] = replica['template']['spec']['containers']
        assert f'--usr_dir={usr_dir}' in container['args']
    vertex = json.loads(run_module('trainer.deploy', 'vertex', *replicas, *trainer_flags).stdout)
    pools = vertex['jobSpec']['workerPoolSpecs']
    assert len(pools) == 4 and all(f'--usr_dir={usr_dir}' in pool['containerSpec']['args']
                                   for pool in pools)
    search = ['--objective=accuracy:maximize', '--param=small_cnn_filters:int:8:32',
              '--max_trials=2', '--parallel_trials=1']
    experiment = yaml.safe_load(run_module('trainer.deploy', 'katib', *replicas, *search,
                                           *trainer_flags).stdout)
    trial = experiment['spec']['trialTemplate']['trialSpec']['spec']['tfReplicaSpecs']['Worker']
    [container] = trial['template']['spec']['containers']
    assert f'--usr_dir={usr_dir}' in container['args']
    assert '--small_cnn_filters=${trialParameters.small_cnn_filters}' in container['args']
    unknown = run_module('trainer.deploy', 'katib', *replicas, *search, '--',
                         *trainer_flags[2:], check=False)
    assert_one_line_error(unknown, 2, "small_cnn")


@pytest.mark.slow  # a whole sweep: ./run.sh test-slow
def test_sweep_trials_import_the_folder(digit_shards, tmp_path):
    usr_dir = copy_example('small_cnn', tmp_path)
    study_dir = str(tmp_path / 'study')
    result = subprocess.run(
        ['bash', os.path.join(REPO, 'run.sh'), 'sweep', f'--study_dir={study_dir}', '--trials=2',
         '--objective=accuracy:maximize', '--param=small_cnn_filters:categorical:4,8', '--',
         f'--usr_dir={usr_dir}', '--model=small_cnn', f'--train_files={digit_shards.train_pattern}',
         f'--eval_files={digit_shards.validation_pattern}', '--batch_size=16', '--train_steps=4',
         '--save_checkpoints_steps=4', '--eval_throttle_secs=0'],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    trial_flags = sorted(os.path.join(study_dir, name, 'flags.txt')
                         for name in os.listdir(study_dir) if name.startswith('trial-'))
    assert len(trial_flags) == 2
    for path in trial_flags:
        with open(path) as f:
            recorded = f.read()
        assert f'--usr_dir={usr_dir}\n' in recorded and '--model=small_cnn\n' in recorded


@pytest.mark.slow  # four trainer processes: ./run.sh test-slow
def test_cluster_tasks_import_the_folder(digit_shards, tmp_path):
    usr_dir = copy_example('small_cnn', tmp_path)
    model_dir = str(tmp_path / 'model')
    result = subprocess.run(
        ['bash', os.path.join(REPO, 'run.sh'), 'cluster', '--workers=1', '--ps=1',
         '--nocluster_private_network', f'--usr_dir={usr_dir}', '--model=small_cnn',
         f'--model_dir={model_dir}', f'--train_files={digit_shards.train_pattern}',
         f'--eval_files={digit_shards.validation_pattern}', '--eval_name=validation',
         '--train_steps=8', '--save_checkpoints_steps=4', '--batch_size=16',
         '--eval_throttle_secs=0'], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
    assert sorted(os.listdir(os.path.join(model_dir, 'eval_validation', 'results'))) == [
        'step-000000000.json', 'step-000000004.json', 'step-000000008.json']
    with open(os.path.join(model_dir, 'flags.txt')) as f:
        assert f'--usr_dir={usr_dir}\n' in f.read()
