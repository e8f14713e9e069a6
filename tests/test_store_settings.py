"""The object stores' retry and timeout defaults (common/store_settings.py, issue 38): set
unless the user set them, and read by TensorFlow's own clients."""
import os
import subprocess
import sys

from common import atomic_writes, store_settings
from helpers import REPO


def test_defaults_fill_only_what_the_user_left_unset():
    environ = {'AWS_MAX_ATTEMPTS': '7', 'GCS_REQUEST_IDLE_TIMEOUT_SECS': ''}
    applied = store_settings.apply_defaults(environ)
    assert environ['AWS_MAX_ATTEMPTS'] == '7' and 'AWS_MAX_ATTEMPTS' not in applied
    assert environ['GCS_REQUEST_IDLE_TIMEOUT_SECS'] == '20'
    assert {name: environ[name] for name in store_settings.DEFAULTS} == {
        **store_settings.DEFAULTS, 'AWS_MAX_ATTEMPTS': '7'}


def gcs_settings_logged(*prefixes, **env):
    """What TF's GCS filesystem logs after each of prefixes when `import trainer` comes first, as
    in every `python -m trainer.*` command: one process (one TensorFlow start) for all of them."""
    environ = {name: value for name, value in os.environ.items()
               if name not in store_settings.DEFAULTS}
    environ.update(TF_CPP_MIN_LOG_LEVEL='0', TF_CPP_VMODULE='gcs_file_system=1', **env)
    result = subprocess.run([sys.executable, '-c', 'import trainer, tensorflow'], cwd=REPO,
                            env=environ, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    return [[line.split(prefix)[1] for line in lines if prefix in line][0] for prefix in prefixes]


def test_tensorflow_gcs_client_reads_them_and_a_user_value_wins():
    # The block size: the buffer TF zero-fills for every file it reads, 8 MiB, not 64.
    retries, block = gcs_settings_logged('GCS RetryConfig: ', 'block size = ')
    assert retries.endswith('max_retries = 3')
    assert block.startswith(f'{8 * 1024 * 1024} ;')
    retries, block = gcs_settings_logged('GCS RetryConfig: ', 'block size = ',
                                         GCS_RETRY_CONFIG_MAX_RETRIES='6',
                                         GCS_READ_CACHE_BLOCK_SIZE_MB='2')
    assert retries.endswith('max_retries = 6')
    assert block.startswith(f'{2 * 1024 * 1024} ;')


def test_a_file_another_process_rewrote_is_read_whole_on_gs(gcs_bucket):
    """TF's default caches a gs:// file's size for 5 s, and GFile.read() reads that many bytes:
    a lease or claim rewritten longer by another process read cut short ('{"a": 1,')."""
    path = f'{gcs_bucket}/lease.json'
    atomic_writes.write_text_atomic(path, '{"a": 1}')
    environ = {name: value for name, value in os.environ.items()
               if name not in store_settings.DEFAULTS}
    reader = subprocess.Popen(
        [sys.executable, '-c', 'import sys, trainer\nfrom common import files\nfor _ in "12":\n'
         '    print(files.read_text(sys.argv[1]), flush=True)\n    sys.stdin.readline()', path],
        cwd=REPO, env=environ, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline() == '{"a": 1}\n'
        # This process: another writer.
        atomic_writes.write_text_atomic(path, '{"a": 1, "longer": 2}')
        reader.stdin.write('\n')
        reader.stdin.flush()
        assert reader.stdout.readline() == '{"a": 1, "longer": 2}\n'
    finally:
        reader.stdin.close()
        assert reader.wait(timeout=60) == 0
