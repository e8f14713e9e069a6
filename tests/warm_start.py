"""`python -m MODULE ARGS` for the tests, without importing TensorFlow again for each command.

Importing TensorFlow takes about 6 CPU-seconds on a 2-core machine, and the suite runs well
over a hundred trainer and prepare commands, most of them to check a one-line error or a few
steps. So each test worker starts one interpreter (this file, run as a script) that imports
TensorFlow and nothing of ours, and every such command is a child forked from it: a process of
its own, with its own pid, environment, working folder, exit status and output, that runs the
module as `python -m` would (`runpy`, `__main__`, `sys.argv[0]` the module's file).

Forking is safe here because importing TensorFlow starts none of its runtime (no session, eager
context, thread pool or gRPC; the child starts those): the interpreter's only other threads then
are OpenBLAS's (numpy's and scipy's, seen with gdb), which OpenBLAS stops before a fork and
starts again when needed (its pthread_atfork handler). What a child cannot change is
what TensorFlow read when it was imported, so commands whose TensorFlow-related environment
(`TF_*` but `TF_CONFIG`, `CUDA_*`, oneDNN and OpenMP settings) differs are forked from another
interpreter, started with theirs (past three, they run cold, as a fresh `python -m`); every
command runs cold with TESTS_COLD_START=1 in the environment.
"""
import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The environment TensorFlow reads once, on import: commands differing in it need another interpreter.
IMPORT_TIME_ENV_PREFIXES = ('TF_', 'CUDA_', 'NVIDIA_', 'XLA_', 'ONEDNN_', 'DNNL_', 'MKL', 'KMP_',
                            'OMP_', 'OPENBLAS_', 'LD_', 'PYTHON')


# Read when a job starts (tf.estimator's RunConfig), not on import: each task of a cluster has its own.
READ_WHEN_RUN = ('TF_CONFIG',)


def import_time_env(environ):
    return {key: value for key, value in environ.items()
            if key.startswith(IMPORT_TIME_ENV_PREFIXES) and key not in READ_WHEN_RUN}


# --- the interpreter that forks the commands (run as a script) ---

def _run_command(request):
    """In the forked child: becomes `python -m MODULE ARGS` and exits with its status."""
    import runpy
    import traceback
    os.chdir(request['cwd'])
    os.environ.clear()
    os.environ.update(request['env'])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request['stdout'], os.O_WRONLY),
                            (2, request['stderr'], os.O_WRONLY)):
        if fd == 2 and path == request['stdout']:  # one log for both, as stderr=STDOUT
            os.dup2(1, 2)
            continue
        target = os.open(path, flags)
        os.dup2(target, fd)
        os.close(target)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    sys.argv = [request['module'], *request['args']]
    status = 0
    try:
        runpy.run_module(request['module'], run_name='__main__', alter_sys=True)
    except SystemExit as e:
        if e.code is None:
            status = 0
        elif isinstance(e.code, int):
            status = e.code
        else:
            print(e.code, file=sys.stderr)
            status = 1
    except KeyboardInterrupt:  # uncaught: Python ends itself by SIGINT, as here below
        traceback.print_exc()
        status = -signal.SIGINT
    except BaseException:  # pylint: disable=broad-except
        traceback.print_exc()
        status = 1
    # What the interpreter does on its way out: wait for non-daemon threads, then atexit.
    threading._shutdown()  # pylint: disable=protected-access
    atexit._run_exitfuncs()  # pylint: disable=protected-access
    sys.stdout.flush()
    sys.stderr.flush()
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status)


def serve(socket_path):
    """Accepts one command per connection, forks it, answers its pid and then its exit status."""
    sys.path[0] = REPO  # as `python -m` from the repository root
    import tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(16)
    print('ready', flush=True)
    parent = os.getppid()
    running = {}  # pid: the connection its status goes to
    while os.getppid() == parent:  # the test worker gone: stop
        readable, _, _ = select.select([listener], [], [], 0.02)
        if readable:
            connection, _ = listener.accept()
            request = json.loads(connection.makefile().readline())
            pid = os.fork()
            if pid == 0:
                for inherited in [listener, connection, *running.values()]:
                    inherited.close()
                try:
                    _run_command(request)
                finally:  # never back into this loop, even if the command could not be set up
                    os._exit(1)
            running[pid] = connection
            connection.sendall(f'{pid}\n'.encode())
        for pid in list(running):
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                connection = running.pop(pid)
                try:
                    status = os.waitstatus_to_exitcode(wait_status)  # as subprocess: -signal if killed
                    connection.sendall(f'{status}\n'.encode())
                except OSError:
                    pass  # the test gave up on it (timeout)
                connection.close()
    for pid in running:
        os.kill(pid, signal.SIGKILL)


# --- the test worker's side ---

class _Interpreter:
    """A forking interpreter that imported TensorFlow with one environment; stopped at exit."""

    def __init__(self, environ):
        folder = tempfile.mkdtemp(prefix='warm_start_')
        self.socket_path = os.path.join(folder, 'socket')
        self._process = subprocess.Popen([sys.executable, os.path.abspath(__file__), self.socket_path],
                                         cwd=REPO, env=dict(environ), stdout=subprocess.PIPE,
                                         text=True)
        if self._process.stdout.readline().strip() != 'ready':
            raise RuntimeError(f'the forking interpreter exited {self._process.wait()}')
        atexit.register(self.stop)

    def stop(self):
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        shutil.rmtree(os.path.dirname(self.socket_path), ignore_errors=True)


# This test worker's interpreters, one for each TensorFlow environment its commands have had (a
# test that sets TF_* for its commands gets one of its own); past a few, commands run cold.
_INTERPRETERS = {}
_INTERPRETERS_LOCK = threading.Lock()
MAX_INTERPRETERS = 3


def _interpreter(environ):
    """The interpreter for commands with this environment, started on first use; None: run cold."""
    if environ.get('TESTS_COLD_START') == '1':
        return None
    key = tuple(sorted(import_time_env(environ).items()))
    with _INTERPRETERS_LOCK:
        if key not in _INTERPRETERS and len(_INTERPRETERS) < MAX_INTERPRETERS:
            _INTERPRETERS[key] = _Interpreter(environ)
        return _INTERPRETERS.get(key)


def runs_warm(environ=os.environ):
    """Whether a command with this environment is forked warm (module docstring)."""
    return _interpreter(environ) is not None


def _fork(module, args, stdout, stderr):
    """Has the interpreter fork `python -m module args`; returns the connection its status comes on."""
    request = {'module': module, 'args': list(args), 'cwd': REPO, 'env': dict(os.environ),
               'stdout': stdout, 'stderr': stderr}
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(_interpreter(os.environ).socket_path)
    connection.sendall((json.dumps(request) + '\n').encode())
    return connection


class WarmProcess:
    """A forked command, as much of subprocess.Popen as the tests use: pid, poll, wait, signals."""

    def __init__(self, command, connection):
        self.args = command
        self.returncode = None
        self._connection = connection
        self._replies = connection.makefile()
        self.pid = int(self._replies.readline())

    def wait(self, timeout=None):
        if self.returncode is None:
            # select, not a socket timeout: a timed-out socket file cannot be read again.
            if not select.select([self._connection], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = int(self._replies.readline())
            self._connection.close()
        return self.returncode

    def poll(self):
        if self.returncode is None and select.select([self._connection], [], [], 0)[0]:
            self.wait()
        return self.returncode

    def send_signal(self, signum):
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)


def start(module, args, log_path):
    """subprocess.Popen([python, -m, module, *args], cwd=REPO, stdout=log, stderr=STDOUT), forked
    warm when the environment allows (module docstring)."""
    command = [sys.executable, '-m', module, *args]
    open(log_path, 'w').close()
    return WarmProcess(command, _fork(module, args, str(log_path), str(log_path)))


def run(module, args, timeout):
    """subprocess.run([python, -m, module, *args], cwd=REPO, capture_output=True, text=True),
    forked warm when the environment allows (module docstring)."""
    command = [sys.executable, '-m', module, *args]
    if not runs_warm():
        return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    with tempfile.TemporaryDirectory(prefix='warm_run_') as folder:
        stdout, stderr = os.path.join(folder, 'stdout'), os.path.join(folder, 'stderr')
        open(stdout, 'w').close()
        open(stderr, 'w').close()
        process = WarmProcess(command, _fork(module, args, stdout, stderr))
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            raise subprocess.TimeoutExpired(command, timeout, output=open(stdout).read(),
                                            stderr=open(stderr).read()) from None
        return subprocess.CompletedProcess(command, process.returncode, open(stdout).read(),
                                           open(stderr).read())


if __name__ == '__main__':
    serve(sys.argv[1])
