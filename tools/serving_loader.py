"""TF Serving's loader on an export: tools/serving_loader.cc, built with g++ against the wheel.
  ./run.sh serving-loader --saved_model=EXPORT_DIR [--examples=EXAMPLES.tfrecord]
                          [--rest_body=BODY.json]

No model server binary installs from the package sources here, but the TensorFlow wheel holds
libtensorflow_cc.so.2, libtensorflow_framework.so.2 and their headers: the C++ TensorFlow that
TF Serving links. The program loads the export as TF Serving's SavedModelBundle does (tag serve,
no Python, no tensorflow_io), prints its signatures, replays its warm-up requests and, with
--examples (a TFRecord of serialized tf.Example), runs a Classify request of them through each
classify signature and a Regress request through each regress one; with --rest_body (a TF
Serving REST predict body: "instances" or "inputs"), runs it as the REST server would. --saved_model
takes what --mode=predict takes: EXPORT_DIR (its newest complete version), EXPORT_DIR/STEP or a
pointer such as EXPORT_DIR/best. Built once per source and TensorFlow into the user's cache.
Needs g++ (apt-get install g++).
"""
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import time

from absl import flags, logging

from common import cli
from common.errors import UserError

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'serving_loader.cc')
# The wheel is built with the C++11 string ABI; headers and libraries must agree on it.
COMPILE_FLAGS = ['-std=c++17', '-O1', '-D_GLIBCXX_USE_CXX11_ABI=1']
LIBRARIES = ['libtensorflow_cc.so.2', 'libtensorflow_framework.so.2']

FLAGS = flags.FLAGS


def tensorflow_dir() -> str:
    """The installed tensorflow package's folder (found without importing TensorFlow)."""
    return importlib.util.find_spec('tensorflow').submodule_search_locations[0]


def default_cache_dir() -> str:
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    return os.path.join(base, 'estimator-service')


def build(cache_dir: str = None) -> str:
    """The program's path, compiled into cache_dir unless this source, TensorFlow and these
    flags were built there before. Raises UserError without g++."""
    compiler = shutil.which('g++')
    if not compiler:
        raise UserError('g++ not found: the serving loader is C++ built against the TensorFlow '
                        'wheel; install it (apt-get install g++)')
    tf_dir = tensorflow_dir()
    with open(SOURCE, 'rb') as f:
        key = hashlib.sha256(f.read() + repr((tf_dir, COMPILE_FLAGS)).encode()).hexdigest()[:16]
    binary = os.path.join(cache_dir or default_cache_dir(), f'serving_loader-{key}')
    if os.path.exists(binary):
        return binary
    os.makedirs(os.path.dirname(binary), exist_ok=True)
    partial = f'{binary}.partial-{os.getpid()}'
    command = [compiler, *COMPILE_FLAGS, '-I', os.path.join(tf_dir, 'include'), SOURCE,
               '-o', partial, '-L', tf_dir, *(f'-l:{name}' for name in LIBRARIES),
               f'-Wl,-rpath,{tf_dir}']
    started = time.time()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f'building {SOURCE} failed:\n{result.stderr[-3000:]}')
    os.replace(partial, binary)  # whole or not at all: a cut-short build is never found
    logging.info('built %s in %.0f s', binary, time.time() - started)
    return binary


def run(binary: str, saved_model_dir: str, examples: str = None, rest_body: str = None,
        **subprocess_options) -> subprocess.CompletedProcess:
    options = [f'--{name}={path}' for name, path in (('examples', examples),
                                                     ('rest_body', rest_body)) if path]
    return subprocess.run([binary, saved_model_dir, *options], **subprocess_options)


def define_flags():
    flags.DEFINE_string('saved_model', None, 'EXPORT_DIR, a version EXPORT_DIR/STEP or a pointer '
                        'file such as EXPORT_DIR/best.')
    flags.DEFINE_string('examples', None, 'A TFRecord of serialized tf.Example: a Classify '
                        '(Regress) request of them through each classify (regress) signature.')
    flags.DEFINE_string('rest_body', None, 'A TF Serving REST predict body (JSON: "instances" '
                        'or "inputs", "signature_name" optional) run through its signature.')
    flags.mark_flag_as_required('saved_model')


def main(argv):
    del argv
    from trainer.serving import predict  # TensorFlow: after the flags are parsed
    version_dir = predict.resolve_saved_model(FLAGS.saved_model)
    for name in ('examples', 'rest_body'):
        if FLAGS[name].value and not os.path.isfile(FLAGS[name].value):
            raise UserError(f'--{name}={FLAGS[name].value}: no such file')
    sys.stdout.flush()
    return run(build(), version_dir, FLAGS.examples, FLAGS.rest_body).returncode


if __name__ == '__main__':
    define_flags()
    cli.run(main, own_modules=[], user_errors=(UserError,))
