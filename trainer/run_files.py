"""What the trainer keeps beside the checkpoints in model_dir."""
import json
import os

import numpy as np

from common.atomic_files import write_json_atomic, write_text_atomic
from common.errors import UserError
from trainer import checkpoints

# The flags of the last training run, in --flagfile format: rerun with --flagfile=MODEL_DIR/flags.txt.
FLAGS_FILE = 'flags.txt'
# Written by the chief when training ends, so eval jobs know which checkpoint is the final one
# (on a cluster the last is past --train_steps; after early stopping, short of it).
TRAIN_FINISHED_FILE = 'train_finished.json'


def check_model(model_dir: str, model_name: str, what_to_do: str) -> None:
    """Refuses to train, evaluate or export --model on a model_dir that holds another model."""
    path = os.path.join(model_dir, FLAGS_FILE)
    if not os.path.exists(path):
        return
    with open(path) as f:
        previous = [line.strip()[len('--model='):] for line in f if line.startswith('--model=')]
    if previous and previous[0] != model_name:
        raise UserError(f'--model={model_name}: --model_dir={model_dir} holds a {previous[0]} model '
                        f'(see {path}); {what_to_do.format(previous=previous[0])}')


def record_flags(model_dir: str, model_name: str, flagfile_text: str) -> None:
    """Writes the trainer's flags to model_dir/flags.txt, refusing to resume a different model."""
    check_model(model_dir, model_name, f'use another --model_dir for {model_name}')
    os.makedirs(model_dir, exist_ok=True)
    write_text_atomic(os.path.join(model_dir, FLAGS_FILE), flagfile_text)


def write_train_finished(model_dir: str, train_steps: int, early_stop_reason=None) -> None:
    write_json_atomic(os.path.join(model_dir, TRAIN_FINISHED_FILE), {
        'step': checkpoints.latest_saved_step(model_dir), 'train_steps': train_steps,
        'early_stopped': bool(early_stop_reason), 'reason': early_stop_reason or 'reached train_steps'})


def clear_train_finished(model_dir: str) -> None:
    path = os.path.join(model_dir, TRAIN_FINISHED_FILE)
    if os.path.exists(path):
        os.remove(path)


def train_finished(model_dir: str):
    """What the last finished training run wrote (its final step...), or None."""
    path = os.path.join(model_dir, TRAIN_FINISHED_FILE)
    try:
        with open(path) as f:
            finished = json.load(f)
        return {'step': int(finished['step']), 'train_steps': int(finished['train_steps']),
                'early_stopped': bool(finished['early_stopped'])}
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f'{path}: unreadable ({e}); delete it')


def json_value(value):
    """NumPy scalars from Estimator results as plain JSON numbers."""
    return value.item() if isinstance(value, np.generic) else value
