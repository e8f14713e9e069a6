"""The object stores' retry and timeout defaults (common/store_settings.py, issue 38): set
unless the user set them, and read by TensorFlow's own clients."""
import os
import subprocess
import sys

from common import store_settings
from helpers import REPO


def test_defaults_fill_only_what_the_user_left_unset():
    environ = {'AWS_MAX_ATTEMPTS': '7', 'GCS_REQUEST_IDLE_TIMEOUT_SECS': ''}
    applied = store_settings.apply_defaults(environ)
    assert environ['AWS_MAX_ATTEMPTS'] == '7' and 'AWS_MAX_ATTEMPTS' not in applied
    assert environ['GCS_REQUEST_IDLE_TIMEOUT_SECS'] == '20'
    assert {name: environ[name] for name in store_settings.DEFAULTS} == {
        **store_settings.DEFAULTS, 'AWS_MAX_ATTEMPTS': '7'}


def gcs_retry_config_logged(**env):
    """What TF's GCS filesystem logs of its retry settings when `import trainer` comes first,
    as in every `python -m trainer.*` command."""
    environ = {name: value for name, value in os.environ.items()
               if name not in store_settings.DEFAULTS}
    environ.update(TF_CPP_MIN_LOG_LEVEL='0', TF_CPP_VMODULE='gcs_file_system=1', **env)
    result = subprocess.run([sys.executable, '-c', 'import trainer, tensorflow'], cwd=REPO,
                            env=environ, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return [line.split('GCS RetryConfig: ')[1] for line in result.stderr.splitlines()
            if 'GCS RetryConfig: ' in line][0]


def test_tensorflow_gcs_client_reads_them_and_a_user_value_wins():
    assert gcs_retry_config_logged().endswith('max_retries = 3')
    assert gcs_retry_config_logged(GCS_RETRY_CONFIG_MAX_RETRIES='6').endswith('max_retries = 6')
