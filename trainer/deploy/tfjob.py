"""A Kubeflow TFJob (kubeflow.org/v1) for the training operator, and its names checked as it checks them."""
import re
from typing import Dict, List

import yaml

from common.errors import UserError
from trainer.deploy.job_args import chief_args, replica_counts

PORT = 2222  # the TFJob operator's default port, named tfjob-port
JOB_LABEL = 'estimator-service/job'
# Each replica's pod and service is named NAME-TYPE-INDEX, a DNS-1035 label of at most 63 characters.
DNS1035_LABEL = re.compile(r'[a-z]([-a-z0-9]*[a-z0-9])?$')
DNS_LABEL_MAX = 63
# Kubernetes names of Secrets and service accounts: DNS-1123 subdomains.
DNS1123_SUBDOMAIN = re.compile(r'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')
DNS1123_SUBDOMAIN_MAX = 253


def check_kubernetes_name(flag: str, value: str, what: str):
    if len(value) > DNS1123_SUBDOMAIN_MAX or not DNS1123_SUBDOMAIN.match(value):
        raise UserError(f'--{flag}={value}: not a {what} name; Kubernetes names are lowercase '
                        'letters, digits, - and ., starting and ending with a letter or digit')


def check_tfjob_name(name: str, counts: Dict[str, int]):
    """As the training operator's webhook (a DNS-1035 label), and short enough that every replica's
    pod and service name, NAME-TYPE-INDEX, is a DNS label too."""
    if not DNS1035_LABEL.match(name):
        raise UserError(f'--name={name}: a TFJob name is a DNS-1035 label: lowercase letters, '
                        'digits and -, starting with a letter and ending with a letter or digit')
    longest = max((f'{name}-{task_type}-{count - 1}' for task_type, count in counts.items()),
                  key=len)
    if len(longest) > DNS_LABEL_MAX:
        allowed = DNS_LABEL_MAX - (len(longest) - len(name))
        raise UserError(f'--name={name}: too long; the replica {longest} would have '
                        f'{len(longest)} characters, over the {DNS_LABEL_MAX} of a DNS label: use '
                        f'at most {allowed} characters')


def tfjob_manifests(name: str, image: str, args: List[str], workers: int, ps: int,
                    evaluator: bool, *, gpus: int = 0, cpu: str = '2', memory: str = '4Gi',
                    namespace: str = None, network_policy: bool = False, env: List[dict] = (),
                    env_from_secrets: List[str] = (), service_account: str = None,
                    grace_period_secs: int = 60, backoff_limit: int = 6,
                    wait_for_eval_secs: int = 600) -> List[dict]:
    """The TFJob, and with network_policy a NetworkPolicy for its port."""
    metadata = {'name': name, **({'namespace': namespace} if namespace else {})}
    replica_specs = {}
    for task_type, count in replica_counts(workers, ps, evaluator).items():
        requests = {'cpu': cpu, 'memory': memory}
        limits = {}
        if gpus and task_type in ('chief', 'worker'):
            requests['nvidia.com/gpu'] = limits['nvidia.com/gpu'] = gpus
        container = {
            'name': 'tensorflow',  # the operator finds the TF container by this name
            'image': image,
            'args': (chief_args(args, evaluator, wait_for_eval_secs) if task_type == 'chief'
                     else list(args)),
            'ports': [{'name': 'tfjob-port', 'containerPort': PORT}],
            'resources': {'requests': requests, **({'limits': limits} if limits else {})},
        }
        if env:
            container['env'] = [dict(var) for var in env]
        if env_from_secrets:
            container['envFrom'] = [{'secretRef': {'name': secret}} for secret in env_from_secrets]
        pod_spec = {'containers': [container], 'terminationGracePeriodSeconds': grace_period_secs}
        if service_account:
            pod_spec['serviceAccountName'] = service_account
        replica_specs[{'ps': 'PS'}.get(task_type, task_type.capitalize())] = {
            'replicas': count,
            # The operator restarts a pod that exits 128-255 (SIGTERM 143, SIGKILL 137: it
            # resumes from its checkpoint or ledger) and fails the job on 1-127 (bad flags
            # or data exit 2), so a mistake fails once instead of restarting for ever.
            'restartPolicy': 'ExitCode',
            'template': {'metadata': {'labels': {JOB_LABEL: name}}, 'spec': pod_spec},
        }
    manifests = [{'apiVersion': 'kubeflow.org/v1', 'kind': 'TFJob', 'metadata': metadata,
                  'spec': {'runPolicy': {'cleanPodPolicy': 'Running',
                                         'backoffLimit': backoff_limit},
                           'tfReplicaSpecs': replica_specs}}]
    if network_policy:
        same_job = lambda: {'matchLabels': {JOB_LABEL: name}}  # noqa: E731 (no YAML aliases)
        manifests.append({
            'apiVersion': 'networking.k8s.io/v1', 'kind': 'NetworkPolicy',
            'metadata': {**metadata, 'name': f'{name}-tfjob-port'},
            'spec': {'podSelector': same_job(), 'policyTypes': ['Ingress'],
                     'ingress': [{'from': [{'podSelector': same_job()}],
                                  'ports': [{'protocol': 'TCP', 'port': PORT}]}]},
        })
    return manifests


def to_yaml(manifests: List[dict]) -> str:
    return yaml.safe_dump_all(manifests, sort_keys=False, default_flow_style=False)
