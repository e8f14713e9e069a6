"""Runs a printed TFJob as docker containers, the way Kubeflow's training operator runs it.

A test harness for `./run.sh test-container`: it stands for the operator, it is not a
product feature. Each rule below is the operator's (kubeflow/training-operator,
release-1.9: pkg/controller.v1/tensorflow/tensorflow.go, tfjob_controller.go,
pkg/controller.v1/common/pod.go and job.go, pkg/core/pod.go):

- one container per replica, named like its pod NAME-TYPE-INDEX, with that hostname, on a
  private docker network where its service names, NAME-TYPE-INDEX and
  NAME-TYPE-INDEX.NAMESPACE.svc, resolve to it;
- TF_CONFIG as genTFConfigJSONStr writes it: every replica type in `cluster` (the evaluator
  too) at NAME-TYPE-INDEX.NAMESPACE.svc:PORT, the task, "environment": "cloud"; none for a
  job of one replica (isDistributed);
- the container's `env` and the keys of each `envFrom` Secret (`env` wins, as in Kubernetes);
  the container's `args` follow the image's entry point, as Kubernetes runs `args` alone;
- restartPolicy ExitCode: a replica that exits 128-255 is deleted and created again under
  the same name; 1-127 fails the job; more re-creations than runPolicy.backoffLimit fail it;
- a job with a Chief succeeds when the chief has exited 0;
- a finished job's pods still running are deleted (cleanPodPolicy Running): SIGTERM, then
  SIGKILL after the pod's terminationGracePeriodSeconds, as the kubelet stops a pod.

Not emulated: resource requests, scheduling, the NetworkPolicy, pod IPs behind services.
"""
import dataclasses
import json
import os
import subprocess
import time
from typing import Callable, Dict, List, Optional

POLL_SECS = 0.5


def docker(*args, check=True, env=None) -> str:
    result = subprocess.run(['docker', *args], capture_output=True, text=True, env=env)
    if check and result.returncode != 0:
        raise RuntimeError(f'docker {" ".join(args[:3])} ...: {result.stderr.strip()}')
    return result.stdout


def tensorflow_container(replica_spec: dict) -> dict:
    """The container the operator configures: the one named `tensorflow`."""
    [container] = [c for c in replica_spec['template']['spec']['containers']
                   if c['name'] == 'tensorflow']
    return container


@dataclasses.dataclass
class Replica:
    task_type: str  # lowercase, as TF_CONFIG and pod names have it
    index: int
    pod_name: str
    container: dict  # the pod template's `tensorflow` container
    grace_secs: int
    exit_codes: List[int] = dataclasses.field(default_factory=list)  # of its pods, in order
    exit_times: List[float] = dataclasses.field(default_factory=list)  # when each was seen
    succeeded: bool = False
    running: bool = False
    kill_at: Optional[float] = None  # SIGKILL then, if it still runs (a pod being stopped)
    sigterm_at: Optional[float] = None  # when it was last sent SIGTERM

    @property
    def attempts(self) -> int:
        return len(self.exit_codes) + int(self.running)


class TFJobRun:
    """One TFJob's replicas as containers; run() plays the operator until the job ends."""

    def __init__(self, tfjob: dict, secrets: Dict[str, Dict[str, str]], network: str,
                 log_dir: str, say: Callable[[str], None], namespace: str = 'default'):
        self.name, self.network, self.log_dir, self.say = (
            tfjob['metadata']['name'], network, log_dir, say)
        self.namespace = tfjob['metadata'].get('namespace', namespace)
        self.secrets = secrets
        self.backoff_limit = tfjob['spec'].get('runPolicy', {}).get('backoffLimit')
        self.specs = {kind.lower(): spec for kind, spec in tfjob['spec']['tfReplicaSpecs'].items()}
        self.replicas = []
        for task_type, spec in self.specs.items():
            if spec.get('restartPolicy') != 'ExitCode':
                raise ValueError(f'{task_type}: only restartPolicy ExitCode is emulated')
            grace_secs = spec['template']['spec'].get('terminationGracePeriodSeconds', 30)
            for index in range(spec['replicas']):
                self.replicas.append(Replica(task_type, index, f'{self.name}-{task_type}-{index}',
                                             tensorflow_container(spec), grace_secs))
        self.recreated = 0
        self.state = 'Running'  # then Succeeded or Failed
        self.reason = ''

    def replica(self, task_type: str, index: int = 0) -> Replica:
        return next(r for r in self.replicas if (r.task_type, r.index) == (task_type, index))

    def tf_config(self, replica: Replica) -> Optional[str]:
        if len(self.replicas) == 1:
            return None
        cluster = {}
        for task_type, spec in sorted(self.specs.items()):  # Go marshals map keys sorted
            port = next(p['containerPort'] for p in tensorflow_container(spec)['ports']
                        if p['name'] == 'tfjob-port')
            cluster[task_type] = [f'{self.name}-{task_type}-{i}.{self.namespace}.svc:{port}'
                                  for i in range(spec['replicas'])]
        return json.dumps({'cluster': cluster,
                           'task': {'type': replica.task_type, 'index': replica.index},
                           'environment': 'cloud'}, separators=(',', ':'))

    def pod_env(self, replica: Replica) -> Dict[str, str]:
        env = {}
        for source in replica.container.get('envFrom', []):
            env.update(self.secrets[source['secretRef']['name']])
        env.update({var['name']: var['value'] for var in replica.container.get('env', [])})
        tf_config = self.tf_config(replica)
        if tf_config is not None:
            env['TF_CONFIG'] = tf_config
        return env

    def create_pod(self, replica: Replica):
        docker('rm', '--force', replica.pod_name, check=False)  # one an earlier run left
        env = self.pod_env(replica)
        aliases = [replica.pod_name, f'{replica.pod_name}.{self.namespace}.svc']
        # `-e KEY` takes the value from docker's own environment: no secret on a command line.
        docker('run', '--detach', '--name', replica.pod_name, '--hostname', replica.pod_name,
               '--network', self.network, *[arg for a in aliases for arg in ('--network-alias', a)],
               *[arg for key in env for arg in ('-e', key)],
               replica.container['image'], *replica.container['args'],
               env={**os.environ, **env})
        replica.running, replica.kill_at = True, None
        self.say(f'{replica.pod_name}: pod created (attempt {replica.attempts})')

    def logs(self, replica: Replica) -> str:
        """The pod's output so far, stdout and stderr together."""
        return subprocess.run(['docker', 'logs', replica.pod_name], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True).stdout

    def stop_pod(self, replica: Replica, signal: str = 'TERM'):
        """As the kubelet stops a pod: SIGTERM now, SIGKILL after the grace period (run() sends
        it); signal='KILL' is kill -9 at once, as when a node dies."""
        replica.kill_at = None
        if signal == 'TERM':
            replica.sigterm_at = time.time()
            replica.kill_at = replica.sigterm_at + replica.grace_secs
        docker('kill', '--signal', signal, replica.pod_name, check=False)
        self.say(f'{replica.pod_name}: SIG{signal} sent'
                 + (f', SIGKILL in {replica.grace_secs} s if it still runs'
                    if signal == 'TERM' else ''))

    def _exit_code(self, replica: Replica) -> Optional[int]:
        """The pod's exit code once its container has exited, else None."""
        state = docker('inspect', '--format', '{{.State.Status}} {{.State.ExitCode}}',
                       replica.pod_name).split()
        return int(state[1]) if state[0] in ('exited', 'dead') else None

    def _end_pod(self, replica: Replica, code: int):
        """Keeps the pod's log and removes its container (a pod the operator deletes)."""
        replica.running = False
        replica.exit_codes.append(code)
        replica.exit_times.append(time.time())
        with open(os.path.join(self.log_dir, f'{replica.pod_name}.{len(replica.exit_codes)}.log'),
                  'w') as log:
            log.write(self.logs(replica))
        docker('rm', '--force', replica.pod_name, check=False)

    def _finish(self, state: str, reason: str):
        self.state, self.reason = state, reason
        self.say(f'job {state}: {reason}')

    def _poll(self):
        for replica in self.replicas:
            if not replica.running:
                continue
            code = self._exit_code(replica)
            if code is None:
                if replica.kill_at and time.time() > replica.kill_at:
                    self.stop_pod(replica, 'KILL')
                continue
            self._end_pod(replica, code)
            if code == 0:
                replica.succeeded = True
                self.say(f'{replica.pod_name}: exited 0, succeeded')
                if replica.task_type in ('chief', 'master') and self.state == 'Running':
                    self._finish('Succeeded', f'{replica.pod_name} succeeded')  # the chief decides
            elif self.state != 'Running':  # an end seen in the same pass as the job's
                self.say(f'{replica.pod_name}: exited {code}')
            elif code < 128:
                self.say(f'{replica.pod_name}: exited {code}: 1-127 is permanent, not restarted')
                self._finish('Failed', f'{replica.pod_name} exited {code}')
            elif self.backoff_limit is not None and self.recreated >= self.backoff_limit:
                self._finish('Failed', f'{replica.pod_name} exited {code} with the backoff '
                             f'limit ({self.backoff_limit} restarts) reached')
            else:
                self.say(f'{replica.pod_name}: exited {code}: 128-255 is retryable, '
                         'the pod is created again')
                self.recreated += 1
                self.create_pod(replica)

    def run(self, timeout_secs: float, watch: Callable[['TFJobRun'], None] = lambda run: None):
        """Creates every pod and plays the operator until the job ends (or timeout_secs: Failed);
        watch(run) is called on each poll, for a scenario's disruptions. Then cleans up."""
        deadline = time.time() + timeout_secs
        try:
            for replica in self.replicas:
                self.create_pod(replica)
            while self.state == 'Running':
                if time.time() > deadline:
                    self._finish('Failed', f'still running after {timeout_secs:.0f} s (the '
                                 'harness\'s limit, not the operator\'s)')
                    break
                watch(self)
                self._poll()
                time.sleep(POLL_SECS)
        finally:
            self.clean_up()

    def clean_up(self):
        """cleanPodPolicy Running: the pods still running are deleted, each given its grace."""
        if self.state != 'Running':
            self._poll()  # pods that ended since the last look are not running: not deleted
        running = [replica for replica in self.replicas if replica.running]
        if running:
            self.say('cleanPodPolicy Running: deleting ' + ', '.join(r.pod_name for r in running))
        for replica in running:
            self.stop_pod(replica)
        while any(replica.running for replica in running):
            for replica in running:
                if not replica.running:
                    continue
                code = self._exit_code(replica)
                if code is not None:
                    self._end_pod(replica, code)
                    self.say(f'{replica.pod_name}: deleted (exit {code})')
                elif replica.kill_at and time.time() > replica.kill_at:
                    self.stop_pod(replica, 'KILL')
            time.sleep(POLL_SECS)
