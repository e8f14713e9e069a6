"""Shared fixtures: tiny datasets and a trained model the tests make themselves, S3 and GCS servers.
The functions the tests share are in helpers.py."""
import os
import types

import pytest

from common import tf_settings

# Before helpers imports TensorFlow: the tests' own process runs its kernels as the service's
# commands do (results computed here and in a trainer process are compared exactly).
tf_settings.apply_defaults()

from helpers import make_digit_arrays, run_module  # noqa: E402

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')


@pytest.fixture(scope='session')
def digit_shards(tmp_path_factory):
    """Shards of 230 training and 47 validation images (neither a multiple of common batch sizes)."""
    from input_fns.prepare import command as prepare
    out = str(tmp_path_factory.mktemp('digit_shards'))
    train_x, train_y = make_digit_arrays(230, seed=1)
    val_x, val_y = make_digit_arrays(47, seed=2)
    prepare.write_digit_splits(out, 'test_digits', {
        'train': (train_x, train_y, ['synthetic']),
        'validation': (val_x, val_y, ['synthetic']),
    }, num_shards=4, num_eval_shards=2, seed=0)
    return types.SimpleNamespace(dir=out, train=(train_x, train_y), validation=(val_x, val_y),
                                 train_pattern=os.path.join(out, 'train-*'),
                                 validation_pattern=os.path.join(out, 'validation-*'))


@pytest.fixture(scope='session')
def trained_model(digit_shards, tmp_path_factory):
    """A mnist_cnn model_dir trained to step 4, a checkpoint every 2 steps (0, 2, 4), all kept.

    Read-only: tests that change it work on a copy (copy_model_dir)."""
    model_dir = str(tmp_path_factory.mktemp('trained') / 'model')
    run_module('trainer.main', '--mode=train', f'--model_dir={model_dir}',
               f'--train_files={digit_shards.train_pattern}', '--train_steps=4', '--batch_size=16',
               '--save_checkpoints_steps=2', '--keep_checkpoint_max=0')
    return model_dir


@pytest.fixture(scope='session')
def serving_loader(tmp_path_factory):
    """TF Serving's C++ loader (tools/serving_loader.cc), built once a run, as
    `./run.sh serving-loader` builds it with XDG_CACHE_HOME=<the binary's grandparent>.

    xdist's workers share the folder above their own (a 20-second compile, not one each): the
    first builds under the lock while the others wait, then find the binary."""
    import fcntl
    import shutil

    from tools import serving_loader as loader_tool
    if not shutil.which('g++'):
        pytest.skip("g++ not found: TF Serving's loader tests build tools/serving_loader.cc "
                    'with it (apt-get install g++)')
    run_folder = tmp_path_factory.getbasetemp()
    if os.environ.get('PYTEST_XDIST_WORKER'):
        run_folder = run_folder.parent
    with open(run_folder / 'serving_loader.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return loader_tool.build(str(run_folder / 'serving_loader_cache' / 'estimator-service'))


@pytest.fixture(scope='session')
def s3_server(tmp_path_factory):
    """moto's S3 server on 127.0.0.1 for the whole session; S3_* and AWS_* set in os.environ."""
    from tests.s3_server import running_server
    with running_server(tmp_path_factory.mktemp('s3_server') / 'moto.log') as server:
        yield server


@pytest.fixture
def s3_bucket(s3_server):
    """A fresh, empty bucket on the test server, as 's3://NAME'."""
    return 's3://' + s3_server.make_bucket()


@pytest.fixture(scope='session')
def gcs_server(tmp_path_factory):
    """fake-gcs-server on 127.0.0.1 for the whole session, reached by TF's own gs:// through
    tests/gcs_server.py's proxy; https_proxy, CURL_CA_BUNDLE and the test token in os.environ."""
    from tests.gcs_server import running_server
    with running_server(tmp_path_factory.mktemp('gcs_server')) as server:
        yield server


@pytest.fixture
def gcs_bucket(gcs_server):
    """A fresh, empty bucket on the GCS test server, as 'gs://NAME'."""
    return 'gs://' + gcs_server.make_bucket()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """After s3:// was used in this process, tensorflow-io 0.36.0 aborts in the interpreter's
    teardown (status 134); leave with pytest's own status instead (see common.cli.exit_process)."""
    from common import bucket_probe, cli
    if bucket_probe.used_s3():
        cli.exit_process(int(getattr(config, 'exit_status', 0)))


def pytest_sessionfinish(session, exitstatus):
    session.config.exit_status = exitstatus
