"""The trainer CLI in subprocesses, as a user runs it: train -> resume -> evaluate -> export -> predict."""
import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.plugins.hparams import metadata as hparams_metadata

from helpers import (REPO, assert_one_line_error, default_sigint, run_module, trainer_flags,
                     trainer_user_error)
from trainer.config.modes import MODES
from trainer.run.mode_runners import RUNNERS


@pytest.fixture(scope='module')
def trained(digit_shards, tmp_path_factory):
    """A model trained 3 steps, then resumed to 5 steps."""
    work = tmp_path_factory.mktemp('cli')
    model_dir = str(work / 'model')
    flagfile = work / 'train.flags'
    flagfile.write_text('\n'.join([
        '--model=mnist_cnn', '--mode=train', f'--model_dir={model_dir}',
        f'--train_files={digit_shards.train_pattern}', '--batch_size=16',
        '--save_checkpoints_steps=2', '--log_every_n_steps=1']) + '\n')
    first = run_module('trainer.main', f'--flagfile={flagfile}', '--train_steps=3')
    second = run_module('trainer.main', f'--flagfile={flagfile}', '--train_steps=5')
    return work, model_dir, first, second


def test_train_logs_progress_and_writes_flags_and_summaries(trained):
    _, model_dir, first, _ = trained
    assert re.search(r'step 2/3 \(67%\), loss [\d.]+, accuracy [\d.]+, [\d,]+ examples/sec, '
                     r'ETA \d+s$', first.stderr, re.MULTILINE)
    assert tf.train.load_variable(tf.train.latest_checkpoint(model_dir), 'global_step') == 5
    flags_txt = open(os.path.join(model_dir, 'flags.txt')).read().splitlines()
    assert '--model=mnist_cnn' in flags_txt and '--train_steps=5' in flags_txt
    summaries = {}  # tag -> last value written
    for name in sorted(os.listdir(model_dir)):
        if name.startswith('events.out.tfevents'):
            for event in tf.compat.v1.train.summary_iterator(os.path.join(model_dir, name)):
                summaries.update((value.tag, value) for value in event.summary.value)
    assert {'loss', 'accuracy', 'learning_rate', 'global_step/sec', 'examples_per_sec'} <= set(summaries)
    started = hparams_metadata.parse_session_start_info_plugin_data(
        summaries[hparams_metadata.SESSION_START_INFO_TAG].metadata.plugin_data.content)
    assert started.hparams['batch_size'].number_value == 16
    assert started.hparams['optimizer'].string_value == 'adam'  # the model's own, not a flag
    assert hparams_metadata.SESSION_END_INFO_TAG in summaries


def test_second_run_resumes_from_the_checkpoint(trained):
    _, _, first, second = trained
    assert 'Restoring parameters from' not in first.stderr
    assert 'model.ckpt-3' in second.stderr and 'Restoring parameters from' in second.stderr
    assert 'step 4/5 (80%), loss' in second.stderr


@pytest.fixture(scope='module')
def exported(trained):
    """(export_dir, the export command's result): checkpoint 3 of `trained` exported."""
    work, model_dir, _, _ = trained
    export_dir = str(work / 'export')
    return export_dir, run_module('trainer.main', '--mode=export', f'--model_dir={model_dir}',
                                  f'--export_dir={export_dir}',
                                  f'--checkpoint={model_dir}/model.ckpt-3')


def test_evaluate_export_predict(trained, exported, digit_shards):
    work, model_dir, _, _ = trained
    evaluated = run_module('trainer.main', '--mode=evaluate', f'--model_dir={model_dir}',
                           f'--eval_files={digit_shards.validation_pattern}', '--batch_size=10')
    metrics = json.loads(evaluated.stdout)
    assert metrics['global_step'] == 5 and 'accuracy' in metrics

    export_dir, export_result = exported
    saved_model = json.loads(export_result.stdout)['saved_model']
    assert saved_model == os.path.join(export_dir, '3')
    assert sorted(os.listdir(export_dir)) == ['3', 'latest']  # no staging folder left behind
    loaded = tf.saved_model.load(saved_model)
    assert set(loaded.signatures) == {'serving_default', 'predict_pixels', 'classify'}

    # Both signatures agree on the same images: one given as PNG, one as JPEG (lossy, so close).
    images = digit_shards.validation[0][:2]
    paths = []
    for i, (image, encode) in enumerate(zip(images, (tf.io.encode_png, tf.io.encode_jpeg))):
        path = str(work / f'digit{i}.{"png" if i == 0 else "jpg"}')
        tf.io.write_file(path, encode(image[..., None]))
        paths.append(path)
    predicted = run_module('trainer.main', '--mode=predict', f'--saved_model={saved_model}', *paths)
    rows = [json.loads(line) for line in predicted.stdout.splitlines()]
    assert [row['image'] for row in rows] == paths
    pixels = loaded.signatures['predict_pixels'](
        pixels=tf.constant(images[..., None] / 255.0, tf.float32))
    np.testing.assert_allclose(rows[0]['probabilities'], pixels['probabilities'][0], atol=1e-5)
    np.testing.assert_allclose(rows[1]['probabilities'], pixels['probabilities'][1], atol=0.1)
    assert rows[0]['classes'] == int(pixels['classes'][0])


def parsed_by_the_command(*args):
    """(exit status, stderr) of the trainer's own flag parsing (common.cli.parse_flags, as
    `python -m trainer.main` calls it) of args, here in the test's process: a subprocess each
    would start TensorFlow each time (test_a_bad_flag_is_one_line_from_the_command runs one)."""
    from absl import flags

    from common import bucket_probe, cli
    trainer_flags('--model_dir=m', '--train_files=t')  # the trainer's flags defined here
    flags.FLAGS.unparse_flags()
    stderr = io.StringIO()
    # As if no earlier test of this process used s3:// (cli.exit_process would os._exit it).
    with contextlib.redirect_stderr(stderr), pytest.raises(SystemExit) as exited, \
            mock.patch.object(bucket_probe, 'used_s3', return_value=False):
        cli.parse_flags(['trainer.main', *args])
    flags.FLAGS.unparse_flags()
    return exited.value.code, stderr.getvalue()


@pytest.mark.parametrize('args, message', [
    (['--batch_size=0'], '--batch_size=0: 0 is not a positive integer'),
    (['--mode=train', '--model_dir=/tmp/x'], '--mode=train needs --train_files'),
    (['--model=resnet9000'], '--model must be one of: boosted_trees_classifier, boosted_trees_regressor, csv_mlp, dnn_classifier, dnn_regressor, face_diff, face_embedding, face_siamese, image_classifier, linear_classifier, linear_regressor, mnist_cnn, wide_deep_classifier, wide_deep_regressor'),
    (['--mode=dance'], 'value should be one of'),
    (['--mode=evaluate', '--model_dir=/tmp/x', '--eval_files=x', '--checkpoint=/nope/model.ckpt-1'],
     '--checkpoint: no such checkpoint'),
    (['--mode=export', '--model_dir=/tmp/x', '--export_dir=/tmp/y', '--checkpoint=all'],
     '--checkpoint=all is only for --mode=evaluate'),
    (['--mode=continuous_eval', '--model_dir=/tmp/x', '--eval_files=x', '--eval_name=a/b'],
     '--eval_name may use only letters, digits, _, . and -'),
    (['--augment_shear=10'], '--augment_strength, --augment_shear, --augment_elastic tune --augment: give --augment too'),
])
def test_bad_flag_values_are_one_line_errors(args, message):
    status, stderr = parsed_by_the_command(*args)
    assert status == 2
    assert stderr.startswith('error: ') and message in stderr.splitlines()[0], stderr


def test_a_bad_flag_is_one_line_from_the_command():
    result = run_module('trainer.main', '--batch_size=0', check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-2:] == [
        'error: flag --batch_size=0: 0 is not a positive integer', '(--helpshort lists the flags)']
    assert 'Traceback' not in result.stderr


def test_an_unknown_model_param_is_a_user_error():
    from common.errors import UserError
    from trainer.config.settings import Settings
    with pytest.raises(UserError, match="--model_params: mnist_cnn has no param 'similarity_scale'"):
        Settings.from_flags(trainer_flags('--model_dir=/tmp/x', '--train_files=x',
                                          '--model_params=similarity_scale=40'))


def test_every_mode_has_its_runner():
    assert list(RUNNERS) == list(MODES)


def test_help_lists_the_trainers_own_flags_first():
    short = run_module('trainer.main', '--helpshort').stdout
    assert '--train_steps: Train until the global step reaches this.' in short
    assert '--verbosity' not in short  # absl's logging flags only in --helpfull
    full = run_module('trainer.main', '--helpfull').stdout
    modules = re.findall(r'^(\S+):$', full, re.MULTILINE)
    assert modules[:2] == ['flags', 'trainer.config.flags'] and 'absl.logging' in modules
    assert not [m for m in modules if 'absltest' in m or 'tpu' in m]


def test_ctrl_c_exits_130_and_says_how_to_resume(digit_shards, tmp_path):
    trainer = subprocess.Popen(
        [sys.executable, '-m', 'trainer.main', f'--model_dir={tmp_path}/m', '--batch_size=16',
         f'--train_files={digit_shards.train_pattern}', '--train_steps=100000'],
        cwd=REPO, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    try:
        for line in trainer.stderr:
            if 'Saving checkpoints for 0' in line:
                break
        trainer.send_signal(signal.SIGINT)
        _, rest = trainer.communicate(timeout=120)
    finally:
        trainer.kill()  # no-op once it has exited
    assert trainer.returncode == 130, rest[-3000:]  # once seen exiting 1 on CI: show why
    assert rest.strip().splitlines()[-1].startswith(
        'interrupted: --mode=train stopped; resume with the same command')
    assert 'Traceback' not in rest


def test_ctrl_c_that_a_library_turns_into_another_error_still_exits_130(tmp_path):
    # The Ctrl-C test above once exited 1: the signal landed in TensorFlow's bare `except:`
    # in Graph.as_graph_element during the first checkpoint save, which raised TypeError.
    script = tmp_path / 'masked_ctrl_c.py'
    script.write_text(
        'import os, signal, time\n'
        'from common import cli\n'
        'def main(argv):\n'
        '    try:\n'
        '        os.kill(os.getpid(), signal.SIGINT)\n'
        '        time.sleep(30)\n'
        '    except:  # like TensorFlow\'s\n'
        '        raise ValueError("not a valid tensor name")\n'
        'cli.run(main, own_modules=[], stopped_message="stopped")\n')
    result = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, 'PYTHONPATH': REPO}, timeout=60,
                            preexec_fn=default_sigint)
    assert result.returncode == 130, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == 'interrupted: stopped'
    assert 'Traceback' not in result.stderr


def test_evaluate_without_checkpoint(digit_shards, tmp_path):
    assert trainer_user_error('--mode=evaluate', f'--model_dir={tmp_path}/empty',
                              f'--eval_files={digit_shards.validation_pattern}') == (
        f'error: --model_dir={tmp_path}/empty: no checkpoint yet; train first or pass --checkpoint')


def test_missing_train_files_pattern(tmp_path):
    assert trainer_user_error('--mode=train', f'--model_dir={tmp_path}/m',
                              f'--train_files={tmp_path}/none-*').startswith(
        f"error: --train_files: no files match '{tmp_path}/none-*'")


def test_predict_unreadable_image(exported, tmp_path):
    bad = tmp_path / 'notes.txt'
    bad.write_text('not an image')
    saved_model = json.loads(exported[1].stdout)['saved_model']
    result = run_module('trainer.main', '--mode=predict', f'--saved_model={saved_model}', str(bad),
                        check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == f'error: {bad}: not a PNG, JPEG, GIF, BMP, WebP, TIFF, HEIC or AVIF image'


# test_tuner_metrics' trial (--mode=train_and_evaluate, its eval_default summaries read back)
# is this path in the default suite.
@pytest.mark.slow  # ./run.sh test-slow
def test_train_and_evaluate_writes_eval_summaries(digit_shards, tmp_path):
    model_dir = tmp_path / 'model'
    run_module('trainer.main', '--mode=train_and_evaluate', f'--model_dir={model_dir}',
               f'--train_files={digit_shards.train_pattern}',
               f'--eval_files={digit_shards.validation_pattern}', '--batch_size=16',
               '--train_steps=4', '--save_checkpoints_steps=2', '--eval_throttle_secs=0')
    assert tf.train.load_variable(str(model_dir), 'global_step') == 4
    assert any(name.startswith('events.out') for name in os.listdir(model_dir / 'eval_default'))


def test_corrupt_record_mid_file_is_one_line_error(trained, digit_shards, tmp_path):
    # The first record is fine (the up-front check passes); the damage is found while reading.
    data = (tmp_path / 'data')
    data.mkdir()
    good = open(os.path.join(digit_shards.dir, 'validation-00000-of-00002.tfrecord'), 'rb').read()
    (data / 'bad.tfrecord').write_bytes(good[:len(good) // 2] + b'\x00' * 100)
    result = run_module('trainer.main', '--mode=evaluate', f'--model_dir={trained[1]}',
                        f'--eval_files={data}/bad.tfrecord', '--eval_name=corrupt', check=False)
    assert_one_line_error(result, 2, f'{data}/bad.tfrecord: DataLossError: ', '--eval_files')
