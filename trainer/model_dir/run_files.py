"""What the trainer keeps beside the checkpoints in model_dir."""
import dataclasses
import re
import time
from typing import Dict, Optional

import tensorflow as tf

from common import atomic_writes, files, paths
from common.errors import UserError
from trainer.model_dir import checkpoints

# The flags of the last training run, in --flagfile format: rerun with --flagfile=MODEL_DIR/flags.txt.
FLAGS_FILE = 'flags.txt'
# The record of a finished training run (TrainFinished).
TRAIN_FINISHED_FILE = 'train_finished.json'
# The data schema a model built from its data was trained on (models.registry.ModelSpec.schema_kind):
# evaluation and export build the same model without the training files' manifest.
SCHEMA_FILE = 'schema.json'
# Where a warm-started model_dir's first run took its weights from (--warm_start_from).
WARM_START_FILE = 'warm_start.json'


# What to do when a model_dir holds another model than the one being trained.
TRAIN_IT_ON = ('to train it on, pass --model={previous} and its flags again, or --flagfile='
               '{flags_file} and the flags to change (such as --train_steps); else use another '
               '--model_dir')


def check_model(model_dir: str, model_name: str, what_to_do: str) -> None:
    """Refuses to train, evaluate or export --model on a model_dir that holds another model."""
    path = paths.join(model_dir, FLAGS_FILE)
    if not files.exists(path):
        return
    check_recorded_model(model_dir, read_flagfile(files.read_text(path)).get('model'),
                         model_name, what_to_do)


def check_recorded_model(model_dir: str, recorded_model: Optional[str], model_name: str,
                         what_to_do: str) -> None:
    """check_model with flags.txt's --model already read (None: it records none)."""
    if recorded_model and recorded_model != model_name:
        raise UserError(f'--model={model_name}: --model_dir={model_dir} was trained as '
                        f'--model={recorded_model} (see {paths.join(model_dir, FLAGS_FILE)}); '
                        + what_to_do.format(previous=recorded_model,
                                            flags_file=paths.join(model_dir, FLAGS_FILE)))


def record_flags(model_dir: str, model_name: str, flagfile_text: str) -> None:
    """Writes the trainer's flags to model_dir/flags.txt, refusing to resume a different model."""
    check_model(model_dir, model_name, f'use another --model_dir for {model_name}')
    files.makedirs(model_dir)
    atomic_writes.write_text_atomic(paths.join(model_dir, FLAGS_FILE), flagfile_text)


def recorded_flags(model_dir: str) -> Optional[str]:
    """The text of model_dir/flags.txt, or None before the first training run."""
    path = paths.join(model_dir, FLAGS_FILE)
    return files.read_text(path) if files.exists(path) else None


def record_warm_start(model_dir: str, record: Dict) -> None:
    """{'source', 'checkpoint', 'variables'}: kept through resumes, which never warm-start."""
    atomic_writes.write_json_atomic(paths.join(model_dir, WARM_START_FILE), record)


def recorded_warm_start(model_dir: str) -> Optional[Dict]:
    path = paths.join(model_dir, WARM_START_FILE)
    return files.read_json(path) if files.exists(path) else None


def record_schema(model_dir: str, schema: Dict) -> None:
    files.makedirs(model_dir)
    atomic_writes.write_json_atomic(paths.join(model_dir, SCHEMA_FILE), schema)


def recorded_schema(model_dir: str) -> Optional[Dict]:
    """model_dir/schema.json, or None before the first training run of such a model."""
    path = paths.join(model_dir, SCHEMA_FILE)
    if not files.exists(path):
        return None
    try:
        schema = files.read_json(path)
    except ValueError:
        schema = None
    if not isinstance(schema, dict) or not schema.get('kind'):
        raise UserError(f'{path}: not a data schema; delete it and train again, or restore it')
    return schema


def read_flagfile(text: str) -> Dict[str, str]:
    """flags.txt lines '--name=value' (and '--noname' for False booleans) as {name: value}."""
    values = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith('--') and '=' in line:
            name, value = line[2:].split('=', 1)
            values[name] = value
        elif line.startswith('--no'):
            values[line[4:]] = 'false'
        elif line.startswith('--'):
            values[line[2:]] = 'true'
    return values


@dataclasses.dataclass(frozen=True)
class TrainFinished:
    """train_finished.json, which the chief writes when training ends: its final step, so that
    eval jobs know the last checkpoint (on a cluster past --train_steps; after early stopping,
    short of it)."""
    step: int
    train_steps: int
    early_stopped: bool
    reason: Optional[str] = None
    time: Optional[str] = None  # tells this run's record from an earlier one with the same steps

    @classmethod
    def from_json(cls, record: Dict) -> 'TrainFinished':
        """Raises ValueError, KeyError or TypeError when record is not one."""
        return cls(step=int(record['step']), train_steps=int(record['train_steps']),
                   early_stopped=bool(record['early_stopped']), reason=record.get('reason'),
                   time=record.get('time'))

    def to_json(self) -> Dict:
        return dataclasses.asdict(self)


def write_train_finished(model_dir: str, train_steps: int, early_stop_reason=None) -> None:
    step = checkpoints.latest_saved_step(model_dir)
    # Short of train_steps with no early stop: the model's own hook ended it (boosted trees,
    # once every tree is grown); a signal's stop writes no record.
    reached = 'reached train_steps' if step >= train_steps else 'the model ended training'
    finished = TrainFinished(
        step=step, train_steps=train_steps,
        early_stopped=bool(early_stop_reason), reason=early_stop_reason or reached,
        time=time.strftime('%Y-%m-%dT%H:%M:%S%z'))
    atomic_writes.write_json_atomic(paths.join(model_dir, TRAIN_FINISHED_FILE), finished.to_json())


def clear_train_finished(model_dir: str) -> None:
    files.remove(paths.join(model_dir, TRAIN_FINISHED_FILE))


def train_finished(model_dir: str) -> Optional[TrainFinished]:
    """What the last finished training run wrote (its final step...), or None."""
    path = paths.join(model_dir, TRAIN_FINISHED_FILE)
    try:
        return TrainFinished.from_json(files.read_json(path)) if files.exists(path) else None
    except tf.errors.NotFoundError:  # removed by a new training run since it was listed
        return None
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f'{path}: unreadable ({e}); delete it')


# What a file under model_dir or export_dir is, by its name, for the full-disk error.
WRITTEN = ((r'model\.ckpt-(\d+)', 'the checkpoint of step {0}'),
           (r'events\.out\.tfevents', 'TensorBoard summaries'),
           (r'/results/step-0*(\d+)\.json', 'the eval ledger entry of step {0}'),
           (r'/claims/', 'an eval claim'), (r'train\.(lock|lease)', 'the training lock'),
           (r'\.staging-|/variables/|saved_model\.pb|export_complete|assets', 'an export'),
           (r'graph\.pbtxt', 'the graph'), (r'\.tfrecord', 'a shard'))


def what_is_written(path: str) -> str:
    for pattern, what in WRITTEN:
        match = re.search(pattern, path)
        if match:
            return what.format(*match.groups())
    return 'a file'


def full_disk_message(path: str, resumes: bool) -> str:
    """error: ... for a write a full disk stopped: which file, what it was, what to do."""
    then = ('run the same command again: it goes on from the last complete checkpoint and '
            'ledger entry' if resumes else 'run the same command again')
    return (f'error: no space left on the disk: writing {path} ({what_is_written(path)}) failed; '
            f'nothing half-written is read later; free space there, then {then}')
