"""A private network namespace for the loopback launcher and its tasks (`unshare --user --net`).

TensorFlow's gRPC servers listen on every interface whatever the cluster spec says, and its
distributed runtime has no authentication: inside the namespace the tasks reach each other on
127.0.0.1 and nothing outside can connect to them.
"""
import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys

from absl import logging

# Set in the launcher once it runs in its private network namespace.
PRIVATE_NETWORK_ENV = 'LOCAL_CLUSTER_PRIVATE_NETWORK'
UNSHARE_ARGS = ['--user', '--net', '--map-root-user']


def possible() -> bool:
    """Whether this system lets an unprivileged user make a network namespace."""
    unshare = shutil.which('unshare')  # local: a program on this machine's PATH
    return bool(unshare) and subprocess.run([unshare, *UNSHARE_ARGS, 'true'],
                                            capture_output=True).returncode == 0


def enter(module: str) -> bool:
    """Re-runs `python -m module` with this process's arguments (same pid: exec) in a new
    network namespace with loopback up.

    Returns True once in it; False, with a warning, where the system does not allow it.
    """
    if os.environ.get(PRIVATE_NETWORK_ENV) == '1':
        _bring_loopback_up()
        logging.info('tasks run in a private network namespace: their ports are reachable '
                     'only from inside it')
        return True
    if not possible():
        logging.warning('no private network namespace here (unshare --user --net is not '
                        'allowed): the task ports are open on all interfaces while the cluster '
                        'runs, and TensorFlow\'s runtime has no authentication')
        return False
    sys.stdout.flush()
    sys.stderr.flush()
    os.environ[PRIVATE_NETWORK_ENV] = '1'
    unshare = shutil.which('unshare')  # local: a program on this machine's PATH
    os.execv(unshare, [unshare, *UNSHARE_ARGS, sys.executable, '-m', module, *sys.argv[1:]])


def _bring_loopback_up():
    """`ip link set lo up`, without needing the ip tool: a new namespace's loopback is down."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack('16sH22x', b'lo', 0)
        flags_now = struct.unpack('16sH22x', fcntl.ioctl(s, siocgifflags, request))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack('16sH22x', b'lo', flags_now | iff_up))
