"""The whole service on s3:// against a real S3 server on 127.0.0.1 (moto), each step a CLI
process: prepare, a trainer and an eval job side by side, kill -9 and resume, predict; and what a
missing bucket or an unreachable endpoint print."""
import json
import os
import signal
import time
import types

import numpy as np
import pytest
import tensorflow as tf

from common import files, paths
from helpers import REPO, run_module, run_together, start_module, wait_for_log
from tests.s3_server import free_port
from trainer.model_dir import checkpoints
from trainer.serving import model_config

TRAIN_STEPS = 12


def train_args(model_dir, data, *extra):
    return ['--mode=train', f'--model_dir={model_dir}', f'--train_files={data}/train-*',
            f'--train_steps={TRAIN_STEPS}', '--batch_size=16', '--save_checkpoints_steps=4',
            '--keep_checkpoint_max=0', '--log_every_n_steps=4', *extra]


SLOW = pytest.mark.slow  # the whole service on the bucket, a CLI process a step: ./run.sh test-slow


@pytest.fixture(scope='module')
def s3_run(s3_server, tmp_path_factory):
    """prepare into s3://, then a trainer and a continuous_eval job with exports, side by side."""
    work = tmp_path_factory.mktemp('s3_run')
    root = 's3://' + s3_server.make_bucket('run')
    data, model_dir, export_dir = f'{root}/data', f'{root}/model', f'{root}/exports'
    prepared = run_module('input_fns.prepare', 'digits', f'--output_dir={data}', '--num_shards=2',
                          '--num_eval_shards=1')
    logs = run_together(work, {
        'eval': ['--mode=continuous_eval', f'--model_dir={model_dir}', '--eval_name=validation',
                 f'--eval_files={data}/validation-*', f'--train_steps={TRAIN_STEPS}',
                 '--batch_size=200', f'--export_dir={export_dir}', '--export_metric=accuracy',
                 '--eval_timeout_secs=120'],
        'trainer': train_args(model_dir, data),
    }, timeout=400)
    return types.SimpleNamespace(root=root, data=data, model_dir=model_dir, export_dir=export_dir,
                                 prepared=prepared, logs=logs, work=work)


@SLOW
def test_prepare_writes_shards_and_manifest_into_the_bucket(s3_run):
    assert s3_run.prepared.stdout.startswith('wrote train: ')
    names = files.listdir(s3_run.data)
    assert 'manifest.json' in names and 'train-00000-of-00002.tfrecord' in names
    manifest = files.read_json(f'{s3_run.data}/manifest.json')
    assert sorted(manifest['splits']) == ['train', 'validation']
    assert not any('.tmp-' in name for name in names)
    assert not os.path.exists(os.path.join(REPO, 's3:'))  # never a local folder named after a URL


@SLOW
def test_eval_job_beside_the_trainer_evaluates_every_checkpoint_once(s3_run):
    results = paths.join(s3_run.model_dir, 'eval_validation', 'results')
    steps = [0, 4, 8, 12]
    assert files.listdir(results) == [f'step-{step:09d}.json' for step in steps]
    entries = [files.read_json(f'{results}/step-{step:09d}.json') for step in steps]
    assert all(e['status'] == 'evaluated' and e['metrics']['global_step'] == e['step']
               for e in entries)
    assert 'eval_validation: evaluated the final checkpoint (step 12); done' in s3_run.logs['eval']
    assert files.read_json(f'{s3_run.model_dir}/train_finished.json')['step'] == TRAIN_STEPS
    assert '--model=mnist_cnn' in files.read_text(f'{s3_run.model_dir}/flags.txt')


@SLOW
def test_best_export_is_marked_complete_and_pointed_to(s3_run):
    results = paths.join(s3_run.model_dir, 'eval_validation', 'results')
    entries = [files.read_json(path) for path in files.glob(f'{results}/step-*.json')]
    best = max(entries, key=lambda e: e['metrics']['accuracy'])  # max keeps the first of equals
    assert files.read_text(f'{s3_run.export_dir}/best').strip() == str(best['step'])
    best_dir = f'{s3_run.export_dir}/{best["step"]}'
    assert files.exists(f'{best_dir}/saved_model.pb')
    assert files.exists(f'{best_dir}/export_complete.json')
    assert not [name for name in files.listdir(s3_run.export_dir) if name.startswith('.staging')]
    assert files.read_text(f'{s3_run.export_dir}/models.config') == model_config.config_text(
        'mnist_cnn', s3_run.export_dir, best['step'])  # base_path: the bucket's URL


@SLOW
def test_predict_from_a_saved_model_in_the_bucket(s3_run, tmp_path):
    image = np.zeros((28, 28, 1), np.uint8)
    image[6:22, 12:16] = 255
    path = tmp_path / 'digit.png'
    path.write_bytes(tf.io.encode_png(image).numpy())
    predicted = run_module('trainer.main', '--mode=predict',  # the pointer file is followed
                           f'--saved_model={s3_run.export_dir}/best', str(path))
    [row] = [json.loads(line) for line in predicted.stdout.splitlines()]
    assert row['image'] == str(path) and 0 <= row['classes'] <= 9
    assert abs(sum(row['probabilities']) - 1) < 1e-4


@SLOW
def test_trainer_killed_then_rerun_resumes_from_the_bucket(s3_run):
    model_dir = f'{s3_run.root}/killed'
    args = train_args(model_dir, s3_run.data)
    log = s3_run.work / 'killed.log'
    trainer = start_module('trainer.main', *args, log_path=log)
    wait_for_log(log, r'Saving checkpoints for 4 ', trainer, timeout=300)
    trainer.send_signal(signal.SIGKILL)
    trainer.wait()
    # Step 0 was saved before step 4 began; step 4 may be torn.
    resumed_from = max(step for step, _ in checkpoints.list_checkpoints(model_dir))
    assert 0 <= resumed_from < TRAIN_STEPS
    rerun = run_module('trainer.main', *args)
    assert f'Restoring parameters from {model_dir}/model.ckpt-{resumed_from}\n' in rerun.stderr
    assert files.exists(f'{model_dir}/model.ckpt-{TRAIN_STEPS}.index')
    assert files.read_json(f'{model_dir}/train_finished.json')['step'] == TRAIN_STEPS


def one_line_error(result, started, *expected):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith('error: '), result.stderr[-2000:]
    for text in expected:
        assert text in lines[0]
    # The CLI starts TensorFlow first (several seconds on a busy 2-core machine); the probe itself
    # gives up within 20 s (tests/test_files.py measures it alone).
    assert time.time() - started < 60
    return lines[0]


def test_missing_bucket_is_one_line_naming_the_path(s3_server):
    started = time.time()
    result = run_module('trainer.main', '--mode=train', '--model_dir=s3://no-such-bucket/model',
                        '--train_files=s3://no-such-bucket/data/train-*', check=False)
    one_line_error(result, started, 's3://no-such-bucket', 'does not exist')
    assert not os.path.exists(os.path.join(REPO, 's3:'))


def test_unreachable_endpoint_is_one_line_naming_the_path(s3_server, monkeypatch):
    monkeypatch.setenv('S3_ENDPOINT', f'http://127.0.0.1:{free_port()}')
    started = time.time()
    result = run_module('trainer.main', '--mode=continuous_eval', '--model_dir=s3://bucket/model',
                        '--eval_files=s3://bucket/data/validation-*', check=False)
    one_line_error(result, started, 's3://bucket/', 'cannot reach the S3 endpoint')
