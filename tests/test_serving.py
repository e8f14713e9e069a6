"""Serving as TF Serving users do (issue 27): --saved_model as a base path, a version or a
pointer; MNIST's classify signature; the face decision baked into the export; warm-up
records; the REST bodies of docs/serving.md; what predict says about inputs it cannot use."""
import json
import logging
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from common.errors import UserError
from helpers import REPO, assert_one_line_error, run_module, synthetic_face_shards
from input_fns.faces import lfw_files
from serving_loader_checks import as_array, check_against_python, replayed_warmup
from trainer.input_kinds.image_classification import image_example
from trainer.model_dir.ledger import Ledger
from trainer.serving import export, model_config, predict, rest_body


@pytest.fixture(scope='module')
def exports(trained_model, digit_shards, tmp_path_factory):
    """EXPORT_DIR with versions 2 and 4 made by --mode=export, a `best` pointer naming 2 (as
    an eval job writes it), and two digits as PNG files."""
    work = tmp_path_factory.mktemp('serving')
    export_dir = work / 'exports'
    for checkpoint in ('2', 'latest'):
        run_module('trainer.main', '--mode=export', f'--model_dir={trained_model}',
                   f'--export_dir={export_dir}', f'--checkpoint={checkpoint}')
    (export_dir / 'best').write_text('2\n')
    images = []
    for i, image in enumerate(digit_shards.validation[0][:2]):
        images.append(str(work / f'digit{i}.png'))
        tf.io.write_file(images[-1], tf.io.encode_png(image[..., None]))
    return export_dir, images


def predicted(*args):
    result = run_module('trainer.main', '--mode=predict', *args)
    return [json.loads(line) for line in result.stdout.splitlines()], result.stderr


def test_export_mode_points_latest_at_the_newest_version(exports):
    export_dir, _ = exports
    assert (export_dir / 'latest').read_text() == '4\n'


def test_base_path_version_and_pointer_each_say_which_version_and_why(exports, caplog):
    export_dir, images = exports
    from_base, said = predicted(f'--saved_model={export_dir}', *images)
    assert (f'--saved_model={export_dir}: version 4, the newest complete one of 2, as TF Serving '
            f'serves a base path; the best, 2, is --saved_model={export_dir}/best') in said
    assert from_base == predict.predict_files(str(export_dir / '4'), images)
    # The pointer through what the command runs, here (its log line as absl logs it above).
    with caplog.at_level(logging.INFO, logger='absl'):  # absl's level, whatever ran before
        from_best = predict.predict_files(f'{export_dir}/best', images)
    assert f'--saved_model={export_dir}/best: version 2, which that pointer names' in caplog.text
    assert from_best == predict.predict_files(str(export_dir / '2'), images) != from_base


def test_predict_takes_folders_and_globs_and_serves_them_a_batch_at_a_time(exports, tmp_path,
                                                                           monkeypatch):
    export_dir, images = exports
    one_by_one = predict.predict_files(str(export_dir), images)
    (tmp_path / 'photos' / 'more').mkdir(parents=True)
    shutil.copy(images[0], tmp_path / 'photos' / 'a.png')
    shutil.copy(images[1], tmp_path / 'photos' / 'more' / 'b.png')
    (tmp_path / 'photos' / '.DS_Store').write_bytes(b'\0\0\0\1Bud1')  # hidden: left out
    served = []
    serve = predict._serve
    monkeypatch.setattr(predict, '_serve', lambda *args, **batch: served.append(
        len(batch['image_bytes'])) or serve(*args, **batch))
    monkeypatch.setattr(predict, 'SERVE_BATCH', 2)
    rows = predict.predict_files(str(export_dir), [str(tmp_path / 'photos'),
                                                   str(tmp_path / 'photos' / '*.png'), images[1]])
    assert [row['image'] for row in rows] == [
        str(tmp_path / 'photos' / 'a.png'), str(tmp_path / 'photos' / 'more' / 'b.png'),
        str(tmp_path / 'photos' / 'a.png'), images[1]]
    assert served == [2, 2]
    assert [row['probabilities'] for row in rows] == [one_by_one[i]['probabilities']
                                                      for i in (0, 1, 0, 1)]
    for argument, error in [(str(tmp_path / 'photos' / '*.jpg'), 'no file matches it'),
                            (str(tmp_path / 'empty'), 'a folder with no files in it')]:
        os.makedirs(tmp_path / 'empty', exist_ok=True)
        with pytest.raises(UserError, match=re.escape(f'{argument}: {error}')):
            predict.predict_files(str(export_dir), [argument])


def test_classify_gives_class_names_and_the_scores_of_serving_default(exports):
    export_dir, images = exports
    classified, _ = predicted(f'--saved_model={export_dir}', '--signature=classify', *images)
    for row, plain in zip(classified, predict.predict_files(str(export_dir), images)):
        assert row['image'] == plain['image'] and set(row) == {'image', 'classes', 'scores'}
        assert row['classes'] == [str(digit) for digit in range(10)]
        np.testing.assert_allclose(row['scores'], plain['probabilities'], rtol=1e-6)
    loaded = tf.saved_model.load(str(export_dir / '4'))
    serialized = [image_example(open(path, 'rb').read()) for path in images]
    out = loaded.signatures['classify'](inputs=tf.constant(serialized))
    assert out['classes'].dtype == tf.string and out['scores'].shape == (2, 10)


def test_bad_saved_model_and_signature_are_one_line_errors(exports, tmp_path):
    export_dir, images = exports
    copied = tmp_path / 'exports'
    shutil.copytree(export_dir, copied)
    shutil.rmtree(copied / '2')  # as --exports_to_keep does
    gone = run_module('trainer.main', '--mode=predict', f'--saved_model={copied}/best', *images,
                      check=False)
    assert_one_line_error(gone, 2, f'--saved_model={copied}/best: it names version 2, but '
                          f'{copied}/2 is gone; {copied} has complete versions 4')
    # The rest through what --mode=predict runs, here: the command above shows how its
    # UserError reaches the user (one line, exit 2); a process each would add only TF's start.
    os.remove(copied / '4' / 'export_complete.json')  # as a copy still under way
    with pytest.raises(UserError) as empty:
        predict.predict_files(str(copied), images)
    assert str(empty.value) == (f'--saved_model={copied}: no complete version there (it holds 4 '
                                '(incomplete: no export_complete.json), best, latest); export '
                                'one with --mode=export')
    for signature, fragment in [('nope', 'has no such signature; it has classify, predict_pixels, '
                                          'serving_default'),
                                ('predict_pixels', 'it takes pixels (float32 (None, 28, 28, 1)), '
                                                   'not image files; give one of classify, '
                                                   'serving_default')]:
        with pytest.raises(UserError) as wrong:
            predict.predict_files(str(export_dir), images, signature)
        assert str(wrong.value).startswith(f'--signature={signature}: ') and fragment in str(
            wrong.value), (signature, str(wrong.value))


def test_mnist_warmup_requests_run_through_every_signature(exports):
    export_dir, _ = exports
    outputs = replayed_warmup(str(export_dir / '4'))
    assert sorted(outputs) == ['classify', 'predict_pixels', 'serving_default']
    assert outputs['classify']['scores'].shape == (1, 10)
    assert outputs['serving_default']['probabilities'].shape == (1, 10)
    assert outputs['predict_pixels']['classes'].shape == (1,)


def test_mnist_export_through_tf_serving_loader(exports, serving_loader, tmp_path):
    """In C++ as TF Serving loads it: the warm-up answers are Python's, and a Classify request
    of tf.Examples scores as serving_default does on the same PNGs."""
    export_dir, images = exports
    pngs = [open(path, 'rb').read() for path in images]
    examples = str(tmp_path / 'examples.tfrecord')
    with tf.io.TFRecordWriter(examples) as writer:
        for png in pngs:
            writer.write(image_example(png))
    lines = check_against_python(serving_loader, str(export_dir / '4'), examples)
    [classified] = [line for line in lines if 'classify' in line]
    assert (classified['classify'], classified['examples']) == ('classify', 2)
    served = tf.saved_model.load(str(export_dir / '4')).signatures['serving_default'](
        image_bytes=tf.constant(pngs))
    np.testing.assert_allclose(as_array(classified['outputs']['scores']),
                               served['probabilities'].numpy(), rtol=1e-5, atol=1e-6)
    assert as_array(classified['outputs']['classes']).tolist() == [
        [str(digit).encode() for digit in range(10)]] * 2


# docs/serving.md: a request is a line `POST /v1/models/MODEL:VERB` over a ```json block.
REST_REQUEST = re.compile(r'^`POST /v1/models/(\w+):(predict|classify)`\n```json\n(.*?)\n```',
                          re.MULTILINE | re.DOTALL)


def serving_doc():
    with open(os.path.join(REPO, 'docs', 'serving.md')) as f:
        return f.read()


def documented_requests():
    return [(model, verb, json.loads(body)) for model, verb, body in REST_REQUEST.findall(serving_doc())]


def test_documented_models_config_is_the_one_eval_jobs_write():
    [block] = re.findall(r'^```\n(model_config_list .*?)```', serving_doc(), re.MULTILINE | re.DOTALL)
    assert block == model_config.config_text('mnist_cnn', '/abs/path/EXPORT_DIR', 1200)


# The REST verbs and the signature method each sends.
REST_METHODS = {'predict': tf.saved_model.PREDICT_METHOD_NAME,
                'classify': tf.saved_model.CLASSIFY_METHOD_NAME,
                'regress': tf.saved_model.REGRESS_METHOD_NAME}


def run_rest_body(saved_model_dir, verb, body):
    """A REST body through the signature it names, as --mode=predict runs a .json file."""
    signatures = tf.saved_model.load(saved_model_dir).signatures
    signature = signatures[body.get('signature_name', 'serving_default')]
    return signature(**rest_body.signature_inputs(body, signature, REST_METHODS[verb], verb))


def test_documented_mnist_rest_bodies_run_through_the_signatures(exports):
    export_dir, _ = exports
    requests = [(verb, body) for model, verb, body in documented_requests() if model == 'mnist_cnn']
    assert sorted(verb for verb, _ in requests) == ['classify', 'predict']
    for verb, body in requests:
        out = run_rest_body(str(export_dir / '4'), verb, body)
        if verb == 'classify':
            assert out['classes'].numpy().tolist() == [[str(d).encode() for d in range(10)]]
            assert out['scores'].shape == (1, 10)
        else:
            assert out['probabilities'].shape == (1, 10) and out['classes'].shape == (1,)


@pytest.fixture(scope='module')
def faces(tmp_path_factory):
    """face_embedding trained 20 steps on synthetic people; exported before any evaluation
    (plain/), then evaluated with a threshold chosen on calibration pairs, exporting the best
    (exports/)."""
    work = tmp_path_factory.mktemp('serving_faces')
    root, data = synthetic_face_shards(work, num_people=24, num_pairs=20)
    model_dir, plain, exports = (str(work / name) for name in ('model', 'plain', 'exports'))
    common = ['--model=face_embedding', f'--model_dir={model_dir}']
    run_module('trainer.main', *common, '--mode=train', f'--train_files={data}/train-*',
               '--train_steps=20', '--batch_size=8')
    exported = run_module('trainer.main', *common, '--mode=export', f'--export_dir={plain}')
    evaluated = run_module('trainer.main', *common, '--mode=evaluate', '--eval_name=validation',
                           f'--eval_files={data}/validation_pairs-*', f'--export_dir={exports}',
                           f'--threshold_files={data}/calibration_pairs-*')
    return types_namespace(root=root, data=data, model_dir=model_dir, plain=plain,
                           exports=exports, export_log=exported.stderr, eval_log=evaluated.stderr)


def types_namespace(**values):
    import types
    return types.SimpleNamespace(**values)


def pair_batches(faces, pairs_txt):
    """(image_bytes_a, image_bytes_b, same-person labels) of a pairs file's photos."""
    pairs = lfw_files.read_pairs_file(os.path.join(faces.data, pairs_txt))

    def photo(name, number):
        return open(os.path.join(faces.root, lfw_files.photo_relpath(name, number)), 'rb').read()

    return ([photo(p.name_a, p.number_a) for p in pairs], [photo(p.name_b, p.number_b) for p in pairs],
            np.array([p.name_a == p.name_b for p in pairs]))


def test_face_export_without_a_chosen_threshold_says_so_and_has_no_same_person(faces):
    assert ('export: no same_person output (only the probability): no eval job in '
            f'{faces.model_dir} chose a threshold for step 20; evaluate it with '
            '--threshold_files=') in faces.export_log
    version = os.path.join(faces.plain, '20')
    assert not os.path.exists(os.path.join(version, export.EXTRA_DIR, export.THRESHOLD_FILE))
    serve = tf.saved_model.load(version).signatures['serving_default']
    assert set(serve.structured_outputs) == {'probability'}


def test_face_export_bakes_in_the_threshold_chosen_on_calibration_pairs(faces):
    version = os.path.join(faces.exports, '20')
    with open(os.path.join(version, export.EXTRA_DIR, export.THRESHOLD_FILE)) as f:
        record = json.load(f)
    protocol = Ledger(faces.model_dir, 'validation').find(20).metrics['lfw_protocol']
    assert record == {
        'value': protocol['threshold'], 'applies_to': 'probability', 'metric': 'accuracy',
        'calibration_pairs': f'{faces.data}/calibration_pairs-*', 'num_calibration_pairs': 40,
        'calibration_accuracy': protocol['threshold_pairs_accuracy'], 'eval_name': 'validation',
        'ledger_entry': f'{faces.model_dir}/eval_validation/results/step-000000020.json',
        'step': 20, 'eval_files': f'{faces.data}/validation_pairs-*',
        'eval_accuracy': protocol['accuracy'], 'eval_auc': protocol['auc']}
    assert os.path.exists(record['ledger_entry'])
    [documented] = re.findall(r'^```json\n(\{\n  "applies_to".*?)```', serving_doc(),
                              re.MULTILINE | re.DOTALL)
    assert list(json.loads(documented)) == list(record)
    # The calibration pairs again, through the export: its decisions score what the eval job
    # measured at the threshold it chose (a threshold lies between two of these pairs' scores).
    images_a, images_b, labels = pair_batches(faces, 'calibration_pairs.txt')
    out = tf.saved_model.load(version).signatures['serving_default'](
        image_bytes_a=tf.constant(images_a), image_bytes_b=tf.constant(images_b))
    same, probability = out['same_person'].numpy(), out['probability'].numpy()
    assert same.dtype == bool
    np.testing.assert_array_equal(same, probability >= record['value'])
    assert np.mean(same == labels) == record['calibration_accuracy']
    assert 0 < same.sum() < len(same)  # the premise: the threshold splits these pairs


def test_eval_job_pins_the_best_face_export_in_models_config(faces):
    config = model_server_config_pb2.ModelServerConfig()
    with open(os.path.join(faces.exports, 'models.config')) as f:
        text_format.Parse(f.read(), config)
    [model] = config.model_config_list.config
    assert (model.name, model.base_path) == ('face_embedding', faces.exports)
    assert list(model.model_version_policy.specific.versions) == [20]
    assert f'{faces.exports}/models.config pins version 20 for TF Serving' in faces.eval_log


def test_face_warmup_requests_run_through_every_signature(faces):
    outputs = replayed_warmup(os.path.join(faces.exports, '20'))
    assert sorted(outputs) == ['embed', 'serving_default']
    assert set(outputs['serving_default']) == {'probability', 'same_person'}
    assert outputs['embed']['embedding'].shape == (1, 128)


def test_face_export_through_tf_serving_loader(faces, serving_loader):
    lines = check_against_python(serving_loader, os.path.join(faces.exports, '20'))
    [served] = [line['outputs'] for line in lines if line.get('signature') == 'serving_default']
    assert served['same_person']['dtype'] == 'bool'


def test_documented_face_pair_rest_body_runs_through_the_signature(faces):
    [(verb, body)] = [(verb, body) for model, verb, body in documented_requests()
                      if model == 'face_embedding']
    out = run_rest_body(os.path.join(faces.exports, '20'), verb, body)
    assert out['probability'].shape == (1,) and out['same_person'].dtype == tf.bool
