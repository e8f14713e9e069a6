"""TensorFlow's own settings that it reads once, on import, where its default is slow here.

oneDNN (`TF_ENABLE_ONEDNN_OPTS`): TensorFlow 2.15 turns its oneDNN kernels on by itself only on
x86 CPUs with AVX-512 VNNI, AVX512-BF16 or AMX; on any other x86-64 CPU (AVX2: AMD Zen 1-3,
Intel before Cascade Lake) convolutions and matrix products run on Eigen. On a 2-core AMD EPYC
Zen 3, oneDNN trains the face recipe 1.9x and the MNIST recipe 1.6x as fast in float32
(docs/bench.md, "oneDNN on CPUs without AVX-512"). So the packages with commands turn it on for
every x86-64 CPU before anything imports TensorFlow; a value the user set wins
(`TF_ENABLE_ONEDNN_OPTS=0` turns it off).
"""
import os
import platform
from typing import Dict, MutableMapping

X86_64 = ('x86_64', 'amd64')
ONEDNN = 'TF_ENABLE_ONEDNN_OPTS'


def apply_defaults(environ: MutableMapping[str, str] = os.environ,
                   machine: str = platform.machine()) -> Dict[str, str]:
    """Turns oneDNN on for an x86-64 CPU unless the user set it; returns what it set."""
    applied = {ONEDNN: '1'} if machine.lower() in X86_64 and not environ.get(ONEDNN) else {}
    environ.update(applied)
    return applied


def onednn_enabled() -> bool:
    """What TensorFlow decided from TF_ENABLE_ONEDNN_OPTS and the CPU when it was imported."""
    from tensorflow.python.util import _pywrap_util_port  # pylint: disable=import-outside-toplevel
    return bool(_pywrap_util_port.IsMklEnabled())
