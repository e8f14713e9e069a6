"""oneDNN on every x86-64 CPU (common/tf_settings.py): TensorFlow 2.15 leaves it off on CPUs
without AVX-512 VNNI, BF16 or AMX, where it trains our models 1.6-1.9x as fast."""
import os
import subprocess
import sys

import pytest

from common import tf_settings
from helpers import REPO


def test_on_for_x86_64_unless_the_user_chose():
    environ = {}
    assert tf_settings.apply_defaults(environ, machine='x86_64') == {'TF_ENABLE_ONEDNN_OPTS': '1'}
    assert environ == {'TF_ENABLE_ONEDNN_OPTS': '1'}
    chosen = {'TF_ENABLE_ONEDNN_OPTS': '0'}
    assert tf_settings.apply_defaults(chosen, machine='x86_64') == {}
    assert chosen == {'TF_ENABLE_ONEDNN_OPTS': '0'}
    elsewhere = {}
    assert tf_settings.apply_defaults(elsewhere, machine='aarch64') == {} and not elsewhere


def onednn_in_a_trainer_process(**env):
    """What TensorFlow decided when `import trainer` came first, as in `python -m trainer.*`."""
    environ = {name: value for name, value in os.environ.items()
               if name != 'TF_ENABLE_ONEDNN_OPTS'}
    environ.update(env)
    result = subprocess.run(
        [sys.executable, '-c', 'import trainer, tensorflow\nfrom common import tf_settings\n'
         'print(tf_settings.onednn_enabled())'],
        cwd=REPO, env=environ, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.split()[-1]


@pytest.mark.skipif(os.uname().machine.lower() not in tf_settings.X86_64,
                    reason='oneDNN is turned on for x86-64 CPUs only')
def test_tensorflow_reads_it_and_a_user_value_wins():
    assert onednn_in_a_trainer_process() == 'True'
    assert onednn_in_a_trainer_process(TF_ENABLE_ONEDNN_OPTS='0') == 'False'
