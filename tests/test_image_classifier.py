"""image_classifier on a prepared class-folder tree: trained, an eval job with its ledger and best
exports, TensorBoard's per-class accuracy and pictures, and the export's signatures: photos of any
size fitted as prepare fitted them, the class names, warm-up, REST bodies, predict."""
import base64
import glob
import json
import os
import types

import numpy as np
import pytest
import tensorflow as tf

from helpers import (assert_fragments, assert_one_line_error, run_module, run_prepare,
                     run_together, trainer_user_error)
from image_tree import (STORED_AS, TINY_WEBP, avif_bytes, class_image, encode, heic_bytes, tiff_bytes,
                        prepared_tree, tiny_webp_pixels, with_orientation,
                        write_image_tree)
from input_fns.images import prepare_images
from serving_loader_checks import as_array, check_against_python, replayed_warmup
from test_serving import run_rest_body
from trainer.input_kinds.image_classification import image_example
from trainer.serving import predict

CLASSES = ['cat', 'dog', 'fox']
SMALL_NETWORK = '--model_params=base_filters=8,residual_stages=2'


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """Trained 20 steps (checkpoints 0, 10, 20), evaluated by an eval job exporting the best."""
    root = tmp_path_factory.mktemp('image_classifier')
    prepared_tree(root, per_class=16, image_size='16x20', channels='3', validation_fraction=0.25,
                  num_shards=2)
    model_dir, export_dir = root / 'model', root / 'exports'
    run_together(root, {  # the eval job beside its trainer, as it runs
        'train': ['--model=image_classifier', '--mode=train', f'--model_dir={model_dir}',
                  f'--train_files={root}/data/train-*', '--train_steps=20', '--batch_size=16',
                  '--save_checkpoints_steps=10', '--augment', '--augment_flip', SMALL_NETWORK],
        'eval': ['--model=image_classifier', '--mode=continuous_eval', f'--model_dir={model_dir}',
                 f'--eval_files={root}/data/validation-*', '--eval_name=validation',
                 f'--export_dir={export_dir}', '--export_metric=accuracy']})
    return types.SimpleNamespace(root=root, model_dir=model_dir, export_dir=export_dir)


def best_export(trained):
    step = (trained.export_dir / 'best').read_text().strip()
    return str(trained.export_dir / step)


def test_eval_job_ledgers_per_class_accuracy_and_exports_the_best(trained):
    entries = [json.loads(open(path).read()) for path in sorted(
        glob.glob(f'{trained.model_dir}/eval_validation/results/step-*.json'))]
    assert [entry['step'] for entry in entries] == [0, 10, 20]
    metrics = entries[-1]['metrics']
    assert {f'accuracy_of_class/{name}' for name in CLASSES} <= set(metrics)
    assert 0 <= metrics['accuracy_of_class/dog'] <= 1
    assert os.path.isfile(os.path.join(best_export(trained), 'export_complete.json'))
    assert json.loads((trained.model_dir / 'schema.json').read_text())['classes'] == CLASSES


def test_tensorboard_gets_per_class_accuracy_and_the_pictures_with_class_names(trained):
    tags = {}
    for path in glob.glob(f'{trained.model_dir}/eval_validation/events.*'):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                tags.setdefault(value.tag, value)  # the first holds the description
    assert {f'accuracy_of_class/{name}' for name in CLASSES} <= set(tags)
    for picture in ('confusion_matrix/0', 'most_confident_mistakes/0'):
        assert tags[picture].metadata.plugin_data.plugin_name == 'images'
        assert 'Classes: 0 cat, 1 dog, 2 fox.' in tags[picture].metadata.summary_description


def photo_bytes(label, height, width, extension='png'):
    return encode(class_image(label, height, width, np.random.RandomState(label)), extension)


def test_a_photo_of_any_size_is_served_as_prepare_fitted_it(trained):
    signatures = tf.saved_model.load(best_export(trained)).signatures
    for height, width in ((90, 30), (12, 70)):
        encoded = photo_bytes(1, height, width)
        served = signatures['serving_default'](image_bytes=tf.constant([encoded]))
        fitted = prepare_images.fit_encoded(encoded, (16, 20, 3), 'crop')
        pixels = tf.cast(fitted, tf.float32)[None] / 255.0
        direct = signatures['predict_pixels'](pixels=pixels)
        np.testing.assert_allclose(served['probabilities'], direct['probabilities'], atol=1e-6)
        assert served['class_name'].numpy()[0].decode() in CLASSES


def test_a_phone_photo_stored_sideways_is_served_upright(trained):
    """serving_default turns it as prepare does: the answer of the same photo stored upright."""
    jpeg = encode(STORED_AS[6](class_image(1, 60, 30, np.random.RandomState(0))).copy(), 'jpg')
    upright = encode(np.rot90(tf.io.decode_jpeg(jpeg).numpy(), -1).copy(), 'png')
    served = tf.saved_model.load(best_export(trained)).signatures['serving_default'](
        image_bytes=tf.constant([with_orientation(jpeg, 6), upright, jpeg]))
    probabilities = served['probabilities'].numpy()
    np.testing.assert_allclose(probabilities[0], probabilities[1], atol=1e-6)
    # Untagged, the sideways photo is other pixels and another answer: by a hair, from this
    # barely trained model (probabilities 1e-4 apart in one run), so the pixels show it.
    sideways, turned = (prepare_images.fit_encoded(photo, (16, 20, 3), 'crop').numpy()
                        for photo in (jpeg, with_orientation(jpeg, 6)))
    assert np.abs(sideways.astype(int) - turned).mean() > 2  # noise in other places
    log_probabilities = np.log(np.maximum(probabilities, 1e-30))
    assert np.abs(log_probabilities[2] - log_probabilities[0]).max() > 1e-5


def test_classify_rest_body_answers_with_the_class_names(trained):
    body = {'signature_name': 'classify', 'examples': [
        {'image/encoded': {'b64': base64.b64encode(photo_bytes(2, 30, 40, 'jpg')).decode()}}]}
    out = run_rest_body(best_export(trained), 'classify', body)
    assert out['classes'].numpy().tolist() == [[name.encode() for name in CLASSES]]
    assert out['scores'].shape == (1, 3)
    np.testing.assert_allclose(out['scores'].numpy().sum(), 1.0, rtol=1e-5)


def test_warmup_requests_run_through_every_signature(trained):
    outputs = replayed_warmup(best_export(trained))
    assert sorted(outputs) == ['classify', 'predict_pixels', 'serving_default']
    assert outputs['classify']['scores'].shape == (1, 3)
    assert outputs['serving_default']['class_name'].shape == (1,)


def test_export_through_tf_serving_loader(trained, serving_loader, tmp_path):
    """In C++ as TF Serving loads it: the warm-up answers are Python's, and a Classify request
    of photos of other sizes gives the class names and serving_default's probabilities."""
    version = best_export(trained)
    photos = [photo_bytes(0, 90, 30), photo_bytes(2, 30, 40, 'jpg'),
              with_orientation(photo_bytes(1, 30, 50, 'jpg'), 6)]  # turned upright in C++ too
    examples = str(tmp_path / 'examples.tfrecord')
    with tf.io.TFRecordWriter(examples) as writer:
        for photo in photos:
            writer.write(image_example(photo))
    lines = check_against_python(serving_loader, version, examples)
    [classified] = [line for line in lines if 'classify' in line]
    served = tf.saved_model.load(version).signatures['serving_default'](
        image_bytes=tf.constant(photos))
    np.testing.assert_allclose(as_array(classified['outputs']['scores']),
                               served['probabilities'].numpy(), rtol=1e-5, atol=1e-6)
    assert as_array(classified['outputs']['classes']).tolist() == [
        [name.encode() for name in CLASSES]] * len(photos)


def test_predict_prints_each_files_class_name_and_score(trained, tmp_path):
    (tmp_path / 'fox.bmp').write_bytes(photo_bytes(2, 50, 33, 'bmp'))
    (tmp_path / 'broken.png').write_bytes(b'\x89PNG\r\n\x1a\n broken')
    (tmp_path / 'cat.webp').write_bytes(TINY_WEBP)
    (tmp_path / 'cat.png').write_bytes(encode(tiny_webp_pixels(), 'png'))
    (tmp_path / 'cat.tif').write_bytes(tiff_bytes(tiny_webp_pixels()))
    (tmp_path / 'cat.heic').write_bytes(heic_bytes(tiny_webp_pixels()))
    (tmp_path / 'cat.avif').write_bytes(avif_bytes(tiny_webp_pixels()))
    result = run_module('trainer.main', '--mode=predict', f'--saved_model={trained.export_dir}/best',
                        *(str(tmp_path / name) for name in ('fox.bmp', 'cat.webp', 'cat.png',
                                                            'cat.tif', 'cat.heic', 'cat.avif')))
    [row, webp, png, tiff, heic, avif] = [json.loads(line) for line in result.stdout.splitlines()]
    # A WebP, a TIFF, a HEIC served as the same photo's PNG (1e-6: the rows of one batch, computed
    # apart); an AVIF as nearly the same (its pixels a level off at most).
    for converted in (webp, tiff, heic):
        np.testing.assert_allclose(converted['probabilities'], png['probabilities'], atol=1e-6)
    np.testing.assert_allclose(avif['probabilities'], png['probabilities'], atol=0.02)
    assert row['image'] == str(tmp_path / 'fox.bmp') and row['class_name'] in CLASSES
    assert row['score'] == max(row['probabilities'])
    # The same photo in a REST body, through what --mode=predict runs on a .json file (here in
    # the test: test_usr_dir's end-to-end tests give .json bodies to the command itself).
    encoded = base64.b64encode(photo_bytes(2, 50, 33, 'bmp')).decode()
    (tmp_path / 'request.json').write_text(json.dumps({'instances': [{'b64': encoded}]}))
    [rest_row] = predict.predict_files(f'{trained.export_dir}/best',
                                       [str(tmp_path / 'request.json')])
    assert rest_row['class_name'] == row['class_name']
    assert rest_row['score'] == pytest.approx(row['score'], abs=1e-6)  # a batch of 1, not 3
    result = run_module('trainer.main', '--mode=predict', f'--saved_model={trained.export_dir}/best',
                        str(tmp_path / 'fox.bmp'), str(tmp_path / 'broken.png'), check=False)
    assert_one_line_error(result, 2, f'{tmp_path}/broken.png: not a PNG, JPEG, GIF, BMP, WebP, TIFF, HEIC or AVIF image')


def test_image_classifier_refuses_shards_without_an_images_schema(digit_shards, tmp_path):
    line = trainer_user_error('--model=image_classifier', '--mode=train',
                              f'--model_dir={tmp_path}/model',
                              f'--train_files={digit_shards.train_pattern}', '--train_steps=1')
    assert_fragments(line, f'{digit_shards.dir}/manifest.json', 'prepare images')
    assert not os.path.exists(tmp_path / 'model')


def test_photos_prepared_apart_from_the_training_photos_are_refused_not_mislabelled(trained,
                                                                                     tmp_path):
    """Their own folders number dog and fox 0 and 1 (the model's cat and dog): one line."""
    write_image_tree(tmp_path / 'held_out', per_class=2, classes=('dog', 'fox'))
    run_prepare(prepare_images.prepare_images, source_dir=str(tmp_path / 'held_out'),
                output_dir=str(tmp_path / 'data'), image_size='16x20', channels='3',
                resize='crop', validation_fraction=0.0, skip_bad_images=False, decode_workers=1)
    result = run_module('trainer.main', '--mode=evaluate', f'--model_dir={trained.model_dir}',
                        f'--eval_files={tmp_path}/data/train-*', '--eval_name=apart', check=False)
    assert_one_line_error(result, 2, f"classes ['dog', 'fox'] in their manifest, ['cat', 'dog', "
                          f"'fox'] in the model's ({trained.model_dir}/schema.json); prepare "
                          'them with `prepare images --schema_from=TRAINING_DATA_FOLDER')
    assert not os.path.exists(trained.model_dir / 'eval_apart')


def test_a_class_the_held_out_photos_lack_has_no_accuracy_rather_than_zero(trained, tmp_path):
    """Photos of dog and fox only, prepared with the training classes: no cat to be right about."""
    write_image_tree(tmp_path / 'held_out', per_class=2, classes=('dog', 'fox'))
    run_prepare(prepare_images.prepare_images, source_dir=str(tmp_path / 'held_out'),
                output_dir=str(tmp_path / 'data'), schema_from=str(trained.root / 'data'),
                split='test', skip_bad_images=False, decode_workers=1)
    result = run_module('trainer.main', '--mode=evaluate', f'--model_dir={trained.model_dir}',
                        f'--eval_files={tmp_path}/data/test-*', '--eval_name=test')
    assert 'has no example of cat; accuracy_of_class/cat left out' in result.stderr
    entry = json.loads((trained.model_dir / 'eval_test/results/step-000000020.json').read_text())
    per_class = {name for name in entry['metrics'] if name.startswith('accuracy_of_class/')}
    assert per_class == {'accuracy_of_class/dog', 'accuracy_of_class/fox'}


# The CLI's mixed_bfloat16 training is test_precision's (mnist_cnn) in the default suite.
@pytest.mark.slow  # a third trainer process: ./run.sh test-slow
def test_mixed_bfloat16_trains(trained, tmp_path):
    run_module('trainer.main', '--model=image_classifier', '--mode=train', f'--model_dir={tmp_path}',
               f'--train_files={trained.root}/data/train-*', '--train_steps=2', '--batch_size=8',
               '--precision=mixed_bfloat16', SMALL_NETWORK)
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-2')


def test_benchmark_input_builds_the_model_from_the_schema(trained):
    result = run_module('trainer.main', '--model=image_classifier', '--mode=benchmark_input',
                        f'--train_files={trained.root}/data/train-*', '--batch_size=8',
                        '--benchmark_batches=6', '--benchmark_train_steps=3', SMALL_NETWORK)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report['model'] == 'image_classifier' and report['train_steps_per_sec'] > 0


def test_tuners_know_its_metrics_before_any_data():
    from trainer.config import reported_metrics
    reported = reported_metrics.objective_metrics('image_classifier')
    assert {'accuracy', 'loss'} <= set(reported)
    assert not [name for name in reported if name.startswith('accuracy_of_class/')]


@pytest.mark.slow  # a cluster of four processes: ./run.sh test-slow
def test_trains_on_a_cluster_with_an_evaluator_exporting_the_best(trained, tmp_path):
    run_module('trainer.cluster.local_cluster', '--model=image_classifier',
               f'--model_dir={tmp_path}/model', f'--train_files={trained.root}/data/train-*',
               f'--eval_files={trained.root}/data/validation-*', '--train_steps=10',
               '--save_checkpoints_steps=5', '--batch_size=16', '--workers=1',
               '--ps=1', '--evaluators=1', f'--export_dir={tmp_path}/exports',
               '--export_metric=accuracy', SMALL_NETWORK, timeout=400)
    steps = [json.loads(open(path).read())['step'] for path in sorted(
        glob.glob(f'{tmp_path}/model/eval_default/results/step-*.json'))]
    assert steps[-1] == 10 and (tmp_path / 'exports' / 'best').exists()
    assert json.loads((tmp_path / 'model' / 'schema.json').read_text())['classes'] == CLASSES
