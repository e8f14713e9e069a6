"""What a TF_CONFIG makes of a task: its role, and its share of the training files.

One function for every place that reads a TF_CONFIG: the loopback launcher
(`./run.sh cluster`) labels its tasks with it, and the deploy tests check with it
that each replica of a generated TFJob or Vertex AI job gets the role and file
share it should. The share itself comes from the input pipeline's own reading of
TF_CONFIG (input_fns.pipeline), so what is tested is what the trainer does.
"""
import dataclasses
import json
from typing import List, Optional, Union

from input_fns import pipeline

TRAINING_TYPES = ('chief', 'master', 'worker')  # `master`: the chief of older Vertex/CMLE jobs


@dataclasses.dataclass(frozen=True)
class Role:
    task_type: str  # as TF_CONFIG names it: chief, master, worker, ps, evaluator ('' alone)
    index: int
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

    def file_share(self, files: List[str]) -> List[str]:
        """The training files this task reads (every one of them outside a cluster)."""
        return pipeline.worker_share(sorted(files), self.readers, self.reader_index)


def role(tf_config: Optional[Union[str, dict]]) -> Role:
    """The role of the task a TF_CONFIG (JSON text or its dict; None/'' = one machine) describes."""
    raw = json.dumps(tf_config) if isinstance(tf_config, dict) else (tf_config or '')
    readers, reader_index = pipeline.worker_share_from_tf_config(raw)  # checks the JSON too
    config = json.loads(raw) if raw else {}
    task = config.get('task', {})
    task_type, index = task.get('type', ''), int(task.get('index', 0))
    if not config.get('cluster'):  # tf.estimator.RunConfig: one machine, whatever the task says
        return Role(task_type, index, is_chief=True, trains=True, readers=1, reader_index=0)
    return Role(task_type, index, is_chief=task_type in ('chief', 'master'),
                trains=task_type in TRAINING_TYPES, readers=readers, reader_index=reader_index)
