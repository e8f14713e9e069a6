"""TF Serving's C++ loader (tools/serving_loader.cc, issue 38) on what the other tests do not
export (mnist_cnn, face_embedding: test_serving.py; csv_mlp: test_csv.py; image_classifier:
test_image_classifier.py; the canned table models: test_canned.py; --usr_dir modules:
test_usr_dir.py): the other face pair models, an export needing an op the model server lacks
(refused by the op's name), REST predict bodies made into tensors as TF Serving's REST server
does, and `./run.sh serving-loader` on a base path."""
import json
import os

import pytest
import tensorflow as tf

from helpers import run_module, run_with_env, synthetic_face_shards
from serving_loader_checks import check_against_python, run_loader
from trainer.serving import export, predict


@pytest.fixture(scope='module')
def face_data(tmp_path_factory):
    return synthetic_face_shards(tmp_path_factory.mktemp('loader_faces'), 16, num_pairs=8)[1]


@pytest.mark.slow  # trains and evaluates two models as CLI processes: ./run.sh test-slow
@pytest.mark.parametrize('model', ['face_diff', 'face_siamese'])
def test_other_face_exports_load_and_decide_same_person(serving_loader, face_data, model, tmp_path):
    model_dir, export_dir = str(tmp_path / 'model'), str(tmp_path / 'exports')
    common = [f'--model={model}', f'--model_dir={model_dir}', '--batch_size=4']
    run_module('trainer.main', *common, '--mode=train', f'--train_files={face_data}/train-*',
               '--train_steps=2')
    run_module('trainer.main', *common, '--mode=evaluate', '--eval_name=validation',
               f'--eval_files={face_data}/validation_pairs-*', f'--export_dir={export_dir}',
               f'--threshold_files={face_data}/calibration_pairs-*')
    lines = check_against_python(serving_loader, predict.resolve_saved_model(export_dir))
    [served] = [line['outputs'] for line in lines if line.get('signature') == 'serving_default']
    assert set(served) == {'probability', 'same_person'} and served['same_person']['dtype'] == 'bool'


def graph_export(path, make_output):
    """A TF1 SavedModel (as Estimator writes them) whose serving_default runs make_output(x)."""
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        x = tf.compat.v1.placeholder(tf.float32, [None], name='x')
        signature = tf.compat.v1.saved_model.predict_signature_def({'x': x}, {'y': make_output(x)})
        builder = tf.compat.v1.saved_model.Builder(path)
        builder.add_meta_graph_and_variables(session, ['serve'],
                                             signature_def_map={'serving_default': signature})
        builder.save()
    return path


def tensorflow_io_op(x):
    import tensorflow_io as tfio
    return tf.cast(tf.size(tfio.experimental.image.decode_tiff(tf.strings.as_string(x)[0])),
                   tf.float32)


@pytest.mark.parametrize('make_output, op, why', [
    (lambda x: tf.py_function(lambda v: v * 2, [x], tf.float32), 'EagerPyFunc', 'no CPU kernel'),
    (lambda x: tf.numpy_function(lambda v: v * 2, [x], tf.float32), 'PyFunc', 'no CPU kernel'),
    (tensorflow_io_op, 'IO>DecodeTiff', 'does not register')], ids=['py_function',
                                                                     'numpy_function', 'tfio'])
def test_an_op_tf_serving_lacks_is_refused_by_name(serving_loader, tmp_path, make_output, op, why):
    saved_model = graph_export(str(tmp_path / 'export'), make_output)
    result = run_loader(serving_loader, saved_model)
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1 and result.stdout == '', result.stderr[-3000:]
    assert last.startswith(f'error: {saved_model}: the graph needs op {op}, which ') and why in last


def test_the_run_sh_command_takes_a_base_path(serving_loader, tmp_path):
    saved_model = graph_export(str(tmp_path / 'exports' / '7'), lambda x: x * 2)
    cache_home = os.path.dirname(os.path.dirname(serving_loader))  # built there already
    with open(os.path.join(saved_model, export.COMPLETE_MARKER), 'w') as f:
        f.write('{}')
    result = run_with_env('tools.serving_loader', f'--saved_model={tmp_path}/exports',
                          env={'XDG_CACHE_HOME': cache_home})
    assert result.returncode == 0 and 'built ' not in result.stderr, result.stderr[-3000:]
    [line] = result.stdout.splitlines()  # no warm-up file: the signatures only
    assert json.loads(line)['signatures']['serving_default']['inputs'] == {'x': 'x:0'}


def rest_export(path):
    """serving_default: y = 2 * x (float32 [N]) and n + 1 (int64 [N, 2]); text as given."""
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        x = tf.compat.v1.placeholder(tf.float32, [None], name='x')
        n = tf.compat.v1.placeholder(tf.int64, [None, 2], name='n')
        text = tf.compat.v1.placeholder(tf.string, [None], name='text')
        signature = tf.compat.v1.saved_model.predict_signature_def(
            {'x': x, 'n': n, 'text': text}, {'y': x * 2, 'm': n + 1, 'same': tf.identity(text)})
        builder = tf.compat.v1.saved_model.Builder(path)
        builder.add_meta_graph_and_variables(session, ['serve'],
                                             signature_def_map={'serving_default': signature})
        builder.save()
    return path


@pytest.mark.parametrize('body', [
    {'instances': [{'x': 1.5, 'n': [1, 2], 'text': 'a'}, {'x': 2, 'n': [3, 4], 'text': {'b64': 'Yg=='}}]},
    {'signature_name': 'serving_default', 'inputs': {'x': [1.5, 2], 'n': [[1, 2], [3, 4]],
                                                     'text': ['a', 'b']}}], ids=['rows', 'columns'])
def test_a_rest_predict_body_is_made_into_the_signatures_tensors(serving_loader, tmp_path, body):
    path = tmp_path / 'body.json'
    path.write_text(json.dumps(body))
    result = run_loader(serving_loader, rest_export(str(tmp_path / 'export')), rest_body=str(path))
    assert result.returncode == 0, result.stderr[-3000:]
    [answer] = [json.loads(line) for line in result.stdout.splitlines() if '"rest_body"' in line]
    assert answer['outputs'] == {
        'y': {'dtype': 'float', 'shape': [2], 'values': [3, 4]},
        'm': {'dtype': 'int64', 'shape': [2, 2], 'values': [2, 3, 4, 5]},
        'same': {'dtype': 'string', 'shape': [2], 'values': ['a', 'b']}}


@pytest.mark.parametrize('body, error', [
    ({'instances': [{'x': 1, 'n': [1, 2]}]}, 'an instance has no text'),
    ({'instances': [{'x': 1, 'n': [1, 2], 'text': 'a'}, {'x': 1, 'n': [1], 'text': 'b'}]},
     'n differs in shape between instances'),
    ({'instances': [{'x': 1, 'n': [1.5, 2], 'text': 'a'}]}, 'n: a value that is not a whole number, for int64'),
    ({'instances': [{'x': 'one', 'n': [1, 2], 'text': 'a'}]}, 'x: a value that is not a number, for float'),
    ({'examples': []}, 'a predict body takes "instances" or "inputs"')])
def test_a_rest_body_that_does_not_fit_the_signature_is_one_line(serving_loader, tmp_path, body,
                                                                 error):
    path = tmp_path / 'body.json'
    path.write_text(json.dumps(body))
    result = run_loader(serving_loader, rest_export(str(tmp_path / 'export')), rest_body=str(path))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == f'error: {path}: {error}'
