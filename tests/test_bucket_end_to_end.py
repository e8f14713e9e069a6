"""The whole service on s3:// (moto) and gs:// (fake-gcs-server through TF's own GCS client), each
on 127.0.0.1, each step a CLI process: prepare, a trainer and two eval jobs under one name side by
side, the best export and models.config, predict from the base path, status, kill -9 and resume,
a loopback cluster; and what a missing bucket or an unreachable endpoint print."""
import json
import os
import re
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
SCHEMES = {'s3': 's3', 'gcs': 'gs'}  # each store's server fixture -> its URL scheme


def train_args(model_dir, data, *extra):
    return ['--mode=train', f'--model_dir={model_dir}', f'--train_files={data}/train-*',
            f'--train_steps={TRAIN_STEPS}', '--batch_size=16', '--save_checkpoints_steps=4',
            '--keep_checkpoint_max=0', '--log_every_n_steps=4', *extra]


SLOW = pytest.mark.slow  # the whole service on the bucket, a CLI process a step: ./run.sh test-slow


def timed(seconds, step, call, *args, **kwargs):
    started = time.time()
    result = call(*args, **kwargs)
    seconds[step] = round(time.time() - started, 1)
    return result


@pytest.fixture(scope='module', params=sorted(SCHEMES))
def bucket_run(request, tmp_path_factory):
    """prepare into the bucket, then a trainer and two continuous_eval jobs under one
    --eval_name (they share the checkpoints by claims) with exports, side by side."""
    store = request.param
    server = request.getfixturevalue(f'{store}_server')
    work = tmp_path_factory.mktemp(f'{store}_run')
    root = f'{SCHEMES[store]}://' + server.make_bucket('run')
    data, model_dir, export_dir = f'{root}/data', f'{root}/model', f'{root}/exports'
    seconds = {}
    prepared = timed(seconds, 'prepare', run_module, 'input_fns.prepare', 'digits',
                     f'--output_dir={data}', '--num_shards=2', '--num_eval_shards=1')
    eval_args = ['--mode=continuous_eval', f'--model_dir={model_dir}', '--eval_name=validation',
                 f'--eval_files={data}/validation-*', f'--train_steps={TRAIN_STEPS}',
                 '--batch_size=200', f'--export_dir={export_dir}', '--export_metric=accuracy',
                 '--eval_timeout_secs=120']
    logs = timed(seconds, 'train beside 2 eval jobs', run_together, work, {
        'eval': eval_args, 'eval2': eval_args, 'trainer': train_args(model_dir, data)},
        timeout=600)
    return types.SimpleNamespace(store=store, server=server, root=root, data=data,
                                 model_dir=model_dir, export_dir=export_dir, prepared=prepared,
                                 logs=logs, work=work, seconds=seconds)


def report_seconds(run, step, call, *args, **kwargs):
    """Runs a step, timed; prints every step's seconds so far (pytest -s shows them)."""
    result = timed(run.seconds, step, call, *args, **kwargs)
    print(f'\n{run.root}: seconds {run.seconds}')
    return result


@SLOW
def test_prepare_writes_shards_and_manifest_into_the_bucket(bucket_run):
    assert bucket_run.prepared.stdout.startswith('wrote train: ')
    names = files.listdir(bucket_run.data)
    assert 'manifest.json' in names and 'train-00000-of-00002.tfrecord' in names
    manifest = files.read_json(f'{bucket_run.data}/manifest.json')
    assert sorted(manifest['splits']) == ['train', 'validation']
    assert not any('.tmp-' in name for name in names)
    assert not os.path.exists(os.path.join(REPO, f'{SCHEMES[bucket_run.store]}:'))  # never a local folder named after a URL


@SLOW
def test_two_eval_jobs_beside_the_trainer_evaluate_every_checkpoint_once(bucket_run):
    results = paths.join(bucket_run.model_dir, 'eval_validation', 'results')
    steps = [0, 4, 8, 12]
    assert files.listdir(results) == [f'step-{step:09d}.json' for step in steps]
    entries = [files.read_json(f'{results}/step-{step:09d}.json') for step in steps]
    assert all(e['status'] == 'evaluated' and e['metrics']['global_step'] == e['step']
               for e in entries)
    for job in ('eval', 'eval2'):  # each stops once the final checkpoint is in the ledger
        assert 'eval_validation: evaluated the final checkpoint (step 12); done' in \
            bucket_run.logs[job]
    # Each step evaluated by one job: the other found it claimed or already in the ledger.
    evaluated = [int(step) for job in ('eval', 'eval2') for step in re.findall(
        r'eval_validation: step (\d+): accuracy', bucket_run.logs[job])]
    assert sorted(evaluated) == steps
    assert files.listdir(paths.join(bucket_run.model_dir, 'eval_validation', 'claims')) == []
    assert files.read_json(f'{bucket_run.model_dir}/train_finished.json')['step'] == TRAIN_STEPS
    assert '--model=mnist_cnn' in files.read_text(f'{bucket_run.model_dir}/flags.txt')


@SLOW
def test_best_export_is_marked_complete_and_pointed_to(bucket_run):
    results = paths.join(bucket_run.model_dir, 'eval_validation', 'results')
    entries = [files.read_json(path) for path in files.glob(f'{results}/step-*.json')]
    best = max(entries, key=lambda e: e['metrics']['accuracy'])  # max keeps the first of equals
    assert files.read_text(f'{bucket_run.export_dir}/best').strip() == str(best['step'])
    best_dir = f'{bucket_run.export_dir}/{best["step"]}'
    assert files.exists(f'{best_dir}/saved_model.pb')
    assert files.exists(f'{best_dir}/export_complete.json')
    assert not [name for name in files.listdir(bucket_run.export_dir) if name.startswith('.staging')]
    assert files.read_text(f'{bucket_run.export_dir}/models.config') == model_config.config_text(
        'mnist_cnn', bucket_run.export_dir, best['step'])  # base_path: the bucket's URL


@SLOW
def test_predict_from_the_base_path_in_the_bucket(bucket_run, tmp_path):
    image = np.zeros((28, 28, 1), np.uint8)
    image[6:22, 12:16] = 255
    path = tmp_path / 'digit.png'
    path.write_bytes(tf.io.encode_png(image).numpy())
    predicted = report_seconds(bucket_run, 'predict', run_module, 'trainer.main', '--mode=predict',
                               f'--saved_model={bucket_run.export_dir}', str(path))
    newest = max(int(name) for name in files.listdir(bucket_run.export_dir) if name.isdigit())
    assert (f'--saved_model={bucket_run.export_dir}: version {newest}, the newest complete one'
            in predicted.stderr)  # as TF Serving serves a base path
    [row] = [json.loads(line) for line in predicted.stdout.splitlines()]
    assert row['image'] == str(path) and 0 <= row['classes'] <= 9
    assert abs(sum(row['probabilities']) - 1) < 1e-4


@SLOW
def test_status_reads_the_run_from_the_bucket(bucket_run):
    result = report_seconds(bucket_run, 'status', run_module, 'trainer.observe.status',
                            f'--model_dir={bucket_run.model_dir}')
    print(result.stdout)
    lines = [line.split(None, 1) for line in result.stdout.splitlines()]
    fields = {words[0]: words[1] for words in lines if len(words) == 2}
    assert fields['training'] == f'step {TRAIN_STEPS}/{TRAIN_STEPS} (100%), finished: reached train_steps'
    assert fields['checkpoints'] == '0, 4, 8, 12'
    assert fields['eval_validation'] == (f'on {bucket_run.data}/validation-*: 4 evaluated, '
                                         '0 skipped, 0 waiting')
    best = files.read_text(f'{bucket_run.export_dir}/best').strip()
    assert fields['exports'].startswith(f'{bucket_run.export_dir}: ')
    assert fields['exports'].endswith(f'; best -> {best}; models.config serves {best}')
    by = [words[1].split(': ', 1)[1] for words in lines if words[0] == 'by']
    assert sorted(int(step) for steps in by for step in steps.split(', ')) == [0, 4, 8, 12]


@SLOW
def test_trainer_killed_then_rerun_resumes_from_the_bucket(bucket_run):
    model_dir = f'{bucket_run.root}/killed'
    args = train_args(model_dir, bucket_run.data)
    log = bucket_run.work / 'killed.log'
    trainer = start_module('trainer.main', *args, log_path=log)
    wait_for_log(log, r'Saving checkpoints for 4 ', trainer, timeout=300)
    trainer.send_signal(signal.SIGKILL)
    trainer.wait()
    # Step 0 was saved before step 4 began; step 4 may be torn.
    resumed_from = max(step for step, _ in checkpoints.list_checkpoints(model_dir))
    assert 0 <= resumed_from < TRAIN_STEPS
    rerun = report_seconds(bucket_run, 'resume after kill -9', run_module, 'trainer.main', *args)
    assert f'Restoring parameters from {model_dir}/model.ckpt-{resumed_from}\n' in rerun.stderr
    assert files.exists(f'{model_dir}/model.ckpt-{TRAIN_STEPS}.index')
    assert files.read_json(f'{model_dir}/train_finished.json')['step'] == TRAIN_STEPS


@SLOW
@pytest.mark.parametrize('bucket_run', ['gcs'], indirect=True)  # s3:// takes the same path
def test_loopback_cluster_trains_evaluates_and_exports_in_the_bucket(bucket_run):
    model_dir, export_dir = f'{bucket_run.root}/cluster', f'{bucket_run.root}/cluster_exports'
    result = report_seconds(
        bucket_run, 'cluster', run_module, 'trainer.cluster.local_cluster',
        f'--model_dir={model_dir}', f'--train_files={bucket_run.data}/train-*',
        f'--eval_files={bucket_run.data}/validation-*', '--eval_name=val', '--train_steps=40',
        '--batch_size=16', '--save_checkpoints_steps=20', f'--export_dir={export_dir}',
        '--workers=1', timeout=400)
    # The tasks reach the bucket over the network: no private namespace (it has only loopback).
    assert f'{model_dir} is in a bucket, which the tasks reach over the network' in result.stderr
    assert 'every task finished: ps0, chief, worker0, evaluator' in result.stderr
    final_step = checkpoints.list_checkpoints(model_dir)[-1][0]
    assert final_step >= 40
    steps = [files.read_json(path)['step']
             for path in files.glob(f'{model_dir}/eval_val/results/step-*.json')]
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == final_step
    best = files.read_text(f'{export_dir}/best').strip()
    assert files.exists(f'{export_dir}/{best}/export_complete.json')


def test_a_private_network_asked_for_with_a_bucket_is_one_line():
    started = time.time()
    result = run_module('trainer.cluster.local_cluster', '--cluster_private_network',
                        '--model_dir=gs://bucket/model', '--train_files=data/train-*',
                        check=False)
    one_line_error(result, started, '--cluster_private_network: the tasks could not reach '
                   'gs://bucket/model from a private network namespace')


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
