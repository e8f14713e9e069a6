"""`python -m MODULE ARGS` for the tests, without importing TensorFlow again for each command.

Importing TensorFlow takes about 6 CPU-seconds on a 2-core machine, and the suite runs well
over a hundred trainer and prepare commands, most of them to check a one-line error or a few
steps. So each test worker starts one interpreter (this file, run as a script) that imports
TensorFlow and nothing of ours, and every such command is a child forked from it: a process of
its own, with its own pid, environment, working folder, exit status and output, that runs the
module as `python -m` would (`runpy`, `__main__`, `sys.argv[0]` the module's file).

Forking is safe here because importing TensorFlow starts no runtime (no session, no eager
context, no thread pool of its own yet); the child starts those. What a child cannot change is
what TensorFlow read when it was imported, so a command whose TensorFlow-related environment
differs from the interpreter's (`TF_*`, `CUDA_*`, oneDNN and OpenMP settings) runs cold, as a
fresh `python -m`; so does every command with TESTS_COLD_START=1 in the environment.
"""
import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The environment TensorFlow reads once, on import: a command that sets these otherwise runs cold.
IMPORT_TIME_ENV_PREFIXES = ('TF_', 'CUDA_', 'NVIDIA_', 'XLA_', 'ONEDNN_', 'DNNL_', 'MKL', 'KMP_',
                            'OMP_', 'OPENBLAS_', 'LD_', 'PYTHON')


def import_time_env(environ):
    return {key: value for key, value in environ.items() if key.startswith(IMPORT_TIME_ENV_PREFIXES)}


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
    except KeyboardInterrupt:
        traceback.print_exc()
        status = 128 + signal.SIGINT
    except BaseException:  # pylint: disable=broad-except
        traceback.print_exc()
        status = 1
    # What the interpreter does on its way out: wait for non-daemon threads, then atexit.
    threading._shutdown()  # pylint: disable=protected-access
    atexit._run_exitfuncs()  # pylint: disable=protected-access
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _returncode(wait_status):
    """subprocess's convention: the exit status, or minus the signal that ended the process."""
    if os.WIFSIGNALED(wait_status):
        return -os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


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
                listener.close()
                connection.close()
                _run_command(request)
            running[pid] = connection
            connection.sendall(f'{pid}\n'.encode())
        for pid in list(running):
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                connection = running.pop(pid)
                try:
                    connection.sendall(f'{_returncode(wait_status)}\n'.encode())
                except OSError:
                    pass  # the test gave up on it (timeout)
                connection.close()
    for pid in running:
        os.kill(pid, signal.SIGKILL)


# --- the test worker's side ---

class _Interpreter:
    """This test worker's forking interpreter, started on first use and stopped at exit."""

    def __init__(self):
        self._lock = threading.Lock()
        self._process = None
        self._socket_path = None
        self._env = None

    def socket_path(self):
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
            return self._socket_path

    def env(self):
        return self._env

    def _start(self):
        folder = tempfile.mkdtemp(prefix='warm_start_')
        self._socket_path = os.path.join(folder, 'socket')
        self._env = import_time_env(os.environ)
        self._process = subprocess.Popen([sys.executable, os.path.abspath(__file__), self._socket_path],
                                         cwd=REPO, stdout=subprocess.PIPE, text=True)
        if self._process.stdout.readline().strip() != 'ready':
            raise RuntimeError(f'the forking interpreter exited {self._process.wait()}')
        atexit.register(self.stop)

    def stop(self):
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()


_INTERPRETER = _Interpreter()


def runs_warm(environ=os.environ):
    return (environ.get('TESTS_COLD_START') != '1'
            and _INTERPRETER.env() in (None, import_time_env(environ)))


def run(module, args, timeout):
    """subprocess.run([python, -m, module, *args], cwd=REPO, capture_output=True, text=True),
    forked warm when the environment allows (module docstring)."""
    command = [sys.executable, '-m', module, *args]
    if not runs_warm():
        return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    socket_path = _INTERPRETER.socket_path()
    if _INTERPRETER.env() != import_time_env(os.environ):  # started just now, elsewhere
        return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    with tempfile.TemporaryDirectory(prefix='warm_run_') as folder:
        stdout, stderr = os.path.join(folder, 'stdout'), os.path.join(folder, 'stderr')
        open(stdout, 'w').close()
        open(stderr, 'w').close()
        request = {'module': module, 'args': list(args), 'cwd': REPO, 'env': dict(os.environ),
                   'stdout': stdout, 'stderr': stderr}
        deadline = time.monotonic() + timeout
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(socket_path)
            connection.sendall((json.dumps(request) + '\n').encode())
            replies = connection.makefile()
            pid = int(replies.readline())
            connection.settimeout(max(0.0, deadline - time.monotonic()))
            try:
                returncode = int(replies.readline())
            except socket.timeout:
                os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(command, timeout,  # pylint: disable=raise-missing-from
                                                output=open(stdout).read(), stderr=open(stderr).read())
        return subprocess.CompletedProcess(command, returncode, open(stdout).read(), open(stderr).read())


if __name__ == '__main__':
    serve(sys.argv[1])
