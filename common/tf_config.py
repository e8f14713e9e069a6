"""TF_CONFIG, as Kubeflow's training operator, Vertex AI and `./run.sh cluster` set it.

The one reader of the variable: the input pipeline asks it for this task's share of the
training files, the devices for whether a cluster is configured, the loopback launcher and
the deploy tests for each task's role. The chief counts as training worker 0, as in
tf.estimator.RunConfig; so does a `master` (older Vertex AI and Cloud ML Engine jobs name
the chief so). Tasks that do not train (evaluator, ps) and single-machine runs read all
of the data.
"""
import dataclasses
import json
import os
from typing import Optional, Union

from common.errors import UserError

TRAINING_TYPES = ('chief', 'master', 'worker')
CHIEF_TYPES = ('chief', 'master')


@dataclasses.dataclass(frozen=True)
class Role:
    task_type: str  # as TF_CONFIG names it: chief, master, worker, ps, evaluator ('' alone)
    index: int
    in_cluster: bool  # TF_CONFIG names a cluster (the evaluator's lists the others)
    is_chief: bool  # saves checkpoints and the run's files
    trains: bool  # runs training steps and reads training files
    readers: int  # training tasks the training files are shared among
    reader_index: int  # which share this task reads (the chief's is 0)

    @property
    def label(self) -> str:
        """How logs name it: chief, worker0, ps1, evaluator."""
        if self.task_type in ('', 'chief', 'master', 'evaluator'):
            return self.task_type or 'local'
        return f'{self.task_type}{self.index}'


def parse(raw: Union[str, dict, None]) -> dict:
    """The TF_CONFIG dict from JSON text (or a dict); {} for None or ''."""
    if isinstance(raw, dict):
        return raw
    try:
        return json.loads(raw) if raw else {}
    except ValueError as e:
        raise UserError(f'TF_CONFIG is not valid JSON ({e}); fix the environment variable')


def role(tf_config: Optional[Union[str, dict]] = None) -> Role:
    """The role of this task (TF_CONFIG from the environment), or of the one tf_config describes."""
    config = parse(os.environ.get('TF_CONFIG', '') if tf_config is None else tf_config)
    cluster, task = config.get('cluster') or {}, config.get('task', {})
    task_type, index = task.get('type', ''), int(task.get('index', 0))
    if not cluster:  # tf.estimator.RunConfig: one machine, whatever the task says
        return Role(task_type, index, in_cluster=False, is_chief=True, trains=True,
                    readers=1, reader_index=0)
    num_chiefs = sum(len(cluster.get(kind, [])) for kind in CHIEF_TYPES)
    readers = num_chiefs + len(cluster.get('worker', []))
    trains = task_type in TRAINING_TYPES
    if readers <= 1 or not trains:
        readers, reader_index = 1, 0
    else:
        reader_index = num_chiefs + index if task_type == 'worker' else 0
    return Role(task_type, index, in_cluster=True, is_chief=task_type in CHIEF_TYPES,
                trains=trains, readers=readers, reader_index=reader_index)


def cluster_jobs(tf_config: Optional[Union[str, dict]] = None) -> dict:
    """{task type: its number of tasks} in TF_CONFIG's cluster (the environment's by default);
    {} on one machine. Synchronous training checks it has no parameter servers."""
    config = parse(os.environ.get('TF_CONFIG', '') if tf_config is None else tf_config)
    return {job: len(tasks) for job, tasks in (config.get('cluster') or {}).items()}
