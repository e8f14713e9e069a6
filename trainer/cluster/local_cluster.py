"""A local TensorFlow cluster on loopback ports, with the same flags as a single-machine run.

  python -m trainer.cluster.local_cluster --model_dir=DIR --train_files=GLOB --eval_files=GLOB \
      --train_steps=1000 [--workers=1 --ps=1 --evaluators=1] [trainer flags]
  python -m trainer.cluster.local_cluster --sync --ps=0 ... (synchronous, no ps)

Starts a chief, the workers and parameter servers, and the evaluators, each a
`python -m trainer.main --mode=train_and_evaluate` process with its own TF_CONFIG
(the layout Kubeflow's TFJob and Vertex AI use), prints their log lines prefixed
with their role, and returns when every task has finished (parameter servers finish
once the chief has written train_finished.json). Any task failing, Ctrl-C or SIGTERM
stops every task: each gets SIGTERM, so the chief saves the step it reached.

The replica flags are deploy's (trainer/cluster/replicas.py). Where the system allows it,
the launcher and its tasks run in a private network namespace (private_network.py), unless a
path is in a bucket: the tasks must reach it over the network.
"""
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from absl import flags, logging

from common import cli, paths, tf_config
from common.errors import UserError
from trainer.cluster import private_network, replicas

FLAGS = flags.FLAGS
STOP_GRACE_SECS = 30  # from SIGTERM to SIGKILL, as Kubernetes' default grace period
PR_SET_PDEATHSIG = 1


def cluster_spec(num_workers: int, num_ps: int):
    """{'chief': [...], 'worker': [...], 'ps': [...]} on free loopback ports."""
    sockets = [socket.socket() for _ in range(1 + num_workers + num_ps)]
    for s in sockets:
        s.bind(('127.0.0.1', 0))
    addresses = [f'127.0.0.1:{s.getsockname()[1]}' for s in sockets]
    for s in sockets:
        s.close()
    spec = {'chief': addresses[:1], 'worker': addresses[1:1 + num_workers],
            'ps': addresses[1 + num_workers:]}
    return {job: tasks for job, tasks in spec.items() if tasks}


def tasks(spec, evaluator: int):
    """(role, TF_CONFIG) per task; evaluator: how many evaluators (True: one). The evaluators
    are not in the cluster, as TF_CONFIG defines it; several are evaluator0, evaluator1..."""
    configs = [{'cluster': spec, 'task': {'type': job, 'index': index}}
               for job in ('ps', 'chief', 'worker') for index in range(len(spec.get(job, [])))]
    configs += [{'cluster': spec, 'task': {'type': 'evaluator', 'index': index}}
                for index in range(int(evaluator))]

    def label(config):
        task = config['task']
        if task['type'] == 'evaluator' and evaluator > 1:
            return f'evaluator{task["index"]}'
        return tf_config.role(config).label
    return [(label(config), config) for config in configs]


def _die_with_launcher():
    """Runs in each child: the kernel kills it if the launcher dies, even by kill -9."""
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: stop_all still covers a normal exit
        pass


class Cluster:
    def __init__(self, trainer_args, evaluator: bool, num_workers: int, num_ps: int):
        self._args = list(trainer_args) + ['--mode=train_and_evaluate']
        self._tasks = tasks(cluster_spec(num_workers, num_ps), evaluator)
        self._processes = {}
        self._print_lock = threading.Lock()

    def start(self):
        for role, task_config in self._tasks:
            env = dict(os.environ, TF_CONFIG=json.dumps(task_config))
            # Own session: a terminal's Ctrl-C reaches only the launcher, which stops the tasks.
            self._processes[role] = subprocess.Popen(  # local: tasks are processes here
                [sys.executable, '-m', 'trainer.main'] + self._args, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                start_new_session=True, preexec_fn=_die_with_launcher)
        for role, process in self._processes.items():  # threads only after the forks
            threading.Thread(target=self._relay, args=(role, process.stdout), daemon=True).start()
        logging.info('started %s; TF_CONFIG cluster %s', ', '.join(
            f'{role} (pid {process.pid})' for role, process in self._processes.items()),
            json.dumps(self._tasks[0][1]['cluster']))

    def _relay(self, role, stream):
        for line in stream:
            with self._print_lock:
                sys.stdout.write(f'[{role}] {line}')
                sys.stdout.flush()

    def wait(self, poll_secs=0.5) -> int:
        """0 once every task has finished well; 1 when any fails."""
        while True:
            codes = {role: process.poll() for role, process in self._processes.items()}
            failed = [role for role, code in codes.items() if code not in (None, 0)]
            if failed:
                logging.error('%s exited with %s; stopping the cluster', ', '.join(failed),
                              ', '.join(str(codes[role]) for role in failed))
                return 1
            if all(code == 0 for code in codes.values()):
                logging.info('every task finished: %s', ', '.join(codes))
                return 0
            time.sleep(poll_secs)

    def stop_all(self):
        running = {role: p for role, p in self._processes.items() if p.poll() is None}
        for process in running.values():
            os.killpg(process.pid, signal.SIGTERM)
        deadline = time.time() + STOP_GRACE_SECS
        for process in running.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if running:  # 143: stopped cleanly on SIGTERM; -9: killed after the grace period
            logging.info('stopped %s', ', '.join(f'{role} (exit {process.returncode})'
                                                 for role, process in running.items()))


def main(argv):
    trainer_args = argv[1:]
    modes = [arg.split('=', 1)[1] for arg in trainer_args if arg.startswith('--mode=')]
    if any(mode not in ('train', 'train_and_evaluate') for mode in modes):
        raise UserError(f'--mode={modes[-1]}: a cluster trains (--mode=train or '
                        'train_and_evaluate)')
    cluster_replicas = replicas.Replicas.from_flags()
    if cluster_replicas.evaluators and 'train' in modes:
        raise UserError(f'{evaluators_flag()} with --mode=train: evaluators run only beside '
                        '--mode=train_and_evaluate; drop --mode=train, or give --noevaluator '
                        'and run eval jobs yourself (--mode=continuous_eval)')
    if cluster_replicas.sync:  # all-reduce across the chief and workers
        trainer_args = [*trainer_args, '--distribution=multi_worker_mirrored']
    if FLAGS.cluster_private_network:
        buckets = bucket_paths(trainer_args)
        if not buckets:
            private_network.enter('trainer.cluster.local_cluster')
        elif FLAGS['cluster_private_network'].present:
            raise UserError(f'--cluster_private_network: the tasks could not reach {buckets[0]} '
                            'from a private network namespace (it has only loopback); drop the '
                            'flag, or give local paths')
        else:
            logging.warning('%s is in a bucket, which the tasks reach over the network: no private '
                            'network namespace, so the task ports are open on all interfaces '
                            'while the cluster runs, and TensorFlow\'s runtime has no '
                            'authentication', buckets[0])
    cluster = Cluster(trainer_args, cluster_replicas.evaluators, cluster_replicas.workers,
                      cluster_replicas.ps)
    try:  # SIGTERM or Ctrl-C raise here (common.termination); the tasks get SIGTERM in turn
        cluster.start()
        return cluster.wait()
    finally:
        cluster.stop_all()


def bucket_paths(trainer_args):
    """The bucket paths (gs://, s3://...) among the tasks' flags: a private network namespace
    has only loopback, so the tasks could not reach them from inside one."""
    values = [arg.split('=', 1)[1] for arg in trainer_args if arg.startswith('--') and '=' in arg]
    return [path for value in values for path in value.split(',') if paths.is_bucket(path)]


def evaluators_flag() -> str:
    """The flag that asked for evaluators, as the user gave it."""
    return f'--evaluators={FLAGS.evaluators}' if FLAGS['evaluators'].present else '--evaluator'


def define_cluster_flags():
    """The launcher's own flags; all the others go on to every task."""
    replicas.define_flags()
    flags.DEFINE_boolean('cluster_private_network', True, 'Run the tasks in a private network '
                         'namespace (unshare --user --net) so that nothing outside can reach '
                         'their ports; where the system does not allow it, or a path is in a '
                         'bucket (the namespace has only loopback), warn and run without.')


if __name__ == '__main__':
    define_cluster_flags()
    # known_only: the launcher's flags; the others go on to every task.
    cli.run(main, own_modules=[replicas.__name__], user_errors=(UserError,), known_only=True)
