"""A command as pid 1 of a new pid namespace, the way a container's entry point runs
(`unshare --pid --fork --mount-proc`, as root); with a hostname, in its own UTS namespace
too, as a pod restarted in place keeps its hostname."""
import shutil
import subprocess
import sys
import time
from typing import Optional

from helpers import REPO, default_sigint

UNSHARE_ARGS = ['--pid', '--fork', '--mount-proc', '--uts']


def unavailable_reason() -> Optional[str]:
    """Why a pid namespace cannot be made here, or None."""
    unshare = shutil.which('unshare')  # local: a program on this machine's PATH
    if not unshare:
        return 'no unshare program here (util-linux)'
    result = subprocess.run([unshare, *UNSHARE_ARGS, 'true'], capture_output=True, text=True)
    if result.returncode != 0:
        return (f'`unshare {" ".join(UNSHARE_ARGS)}` is not allowed here (it needs root): '
                f'{result.stderr.strip()}')
    return None


def start_as_pid1(module, *args, log_path, hostname='trainer-0'):
    """`python -m module args` as pid 1 on `hostname`; returns (the unshare process, whose exit
    status is pid 1's, and pid 1's pid as seen from here, where signals are sent)."""
    command = ['sh', '-c', 'hostname "$0" && exec "$@"', hostname, sys.executable, '-m',
               module, *args]  # exec: python replaces the shell as pid 1
    with open(log_path, 'w') as log:
        unshare = subprocess.Popen(['unshare', *UNSHARE_ARGS, *command], cwd=REPO, stdout=log,
                                   stderr=subprocess.STDOUT, preexec_fn=default_sigint)
    return unshare, _pid1_of(unshare)


def _pid1_of(unshare: subprocess.Popen, timeout: float = 30) -> int:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(f'/proc/{unshare.pid}/task/{unshare.pid}/children') as f:
                children = f.read().split()
            if children:
                with open(f'/proc/{children[0]}/status') as f:
                    nspid = next(line.split() for line in f if line.startswith('NSpid:'))
                if nspid[-1] == '1':  # its pid inside the namespace
                    return int(children[0])
        except (FileNotFoundError, StopIteration):
            pass
        if unshare.poll() is not None:
            raise AssertionError(f'unshare exited {unshare.returncode} before its child started')
        time.sleep(0.02)
    raise AssertionError('no pid 1 appeared under unshare')
