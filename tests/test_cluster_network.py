"""The loopback cluster cannot be reached from outside, and Ctrl-C stops every task (issue 11, case 12)."""
import json
import os
import re
import signal
import socket

import pytest

from helpers import start_module, wait_for_log
from test_cluster import ROLES, cluster_args
from trainer.cluster import private_network
from trainer.model_dir import checkpoints

pytestmark = pytest.mark.slow  # a whole loopback cluster in a private network: ./run.sh test-slow


def test_task_ports_are_closed_from_outside_and_ctrl_c_stops_every_task(digit_shards, tmp_path):
    log = tmp_path / 'cluster.log'
    launcher = start_module('trainer.cluster.local_cluster', *cluster_args(
        tmp_path / 'model', digit_shards, 1_000_000, '--workers=2'), log_path=log)
    started = wait_for_log(log, r'started (.*); TF_CONFIG cluster (.*)$', launcher)
    pids = [int(pid) for pid in re.findall(r'pid (\d+)', started.group(1))]
    ports = [int(address.rsplit(':', 1)[1])
             for addresses in json.loads(started.group(2)).values() for address in addresses]
    wait_for_log(log, r'^\[chief\] .*step [\d,]+/[\d,]+ \(\d+%\), loss', launcher)  # every server is listening now

    if private_network.possible():
        assert 'private network namespace' in open(log).read()
        for pid in pids:  # in one namespace, not this test's
            assert os.readlink(f'/proc/{pid}/ns/net') != os.readlink('/proc/self/ns/net')
        for port in ports:
            with socket.socket() as client:
                client.settimeout(5)
                if client.connect_ex(('127.0.0.1', port)) == 0:
                    # Ports are picked inside the namespace, so another process here may
                    # listen on the same number (CI saw one): only a task's would be a leak.
                    owners = listening_pids(port)
                    assert owners and not owners & set(pids), f'port {port} is open: {owners}'
    else:
        assert 'the task ports are open on all interfaces' in open(log).read()

    launcher.send_signal(signal.SIGINT)
    assert launcher.wait(timeout=60) == 130
    # Each task, parameter server included, stopped by itself on the launcher's SIGTERM;
    # the chief saved the step it reached, from the parameter server still serving.
    text = open(log).read()
    stopped = re.search(r'stopped (.*)$', text, re.MULTILINE).group(1)
    assert sorted(stopped.split(', ')) == sorted(f'{role} (exit 143)' for role in ROLES)
    reached = int(re.search(r'^\[chief\] .*SIGTERM: stopping training at step (\d+)', text,
                            re.MULTILINE).group(1))
    saved = int(re.search(r'^\[chief\] .*Saving checkpoints for (\d+) ', text[text.index(
        'SIGTERM: stopping training'):], re.MULTILINE).group(1))
    # Workers may take a step more before their own SIGTERM lands.
    assert checkpoints.list_checkpoints(str(tmp_path / 'model'))[-1][0] == saved >= reached
    assert len(pids) == len(ROLES) and len(ports) == len(ROLES) - 1  # the evaluator has no port
    for pid in pids:
        assert not os.path.exists(f'/proc/{pid}'), f'task {pid} still running'


def listening_pids(port):
    """The pids holding a socket that listens on `port` in this test's network namespace."""
    inodes = set()
    for table in ('/proc/self/net/tcp', '/proc/self/net/tcp6'):
        with open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if int(fields[1].rsplit(':', 1)[1], 16) == port and fields[3] == '0A':  # LISTEN
                    inodes.add(f'socket:[{fields[9]}]')
    owners = set()
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            fds = os.listdir(f'/proc/{pid}/fd')
        except OSError:  # the process ended, or its fds are not ours to read
            continue
        for fd in fds:
            try:
                if os.readlink(f'/proc/{pid}/fd/{fd}') in inodes:
                    owners.add(int(pid))
            except OSError:  # that fd closed meanwhile
                continue
    return owners
