"""A model_dir's checkpoints: every complete one, oldest first, and one named by a flag."""
import os
import re
from typing import List, Tuple

import tensorflow as tf

from common.errors import UserError

CHECKPOINT_INDEX = re.compile(r'^model\.ckpt-(\d+)\.index$')


def list_checkpoints(model_dir: str) -> List[Tuple[int, str]]:
    """(step, path) of every complete checkpoint in model_dir, oldest first.

    Lists the .index files rather than the `checkpoint` state file, which names only
    the last keep_checkpoint_max. A file counts once the state file names a checkpoint
    at least as new: a trainer killed mid-save leaves files of a step it saves again.
    """
    state = tf.train.get_checkpoint_state(model_dir) if os.path.isdir(model_dir) else None
    if state is None:
        return []
    newest = step_of(state.model_checkpoint_path)
    found = []
    for name in os.listdir(model_dir):
        match = CHECKPOINT_INDEX.match(name)
        if match and int(match.group(1)) <= newest:
            found.append((int(match.group(1)), os.path.join(model_dir, name[:-len('.index')])))
    return sorted(found)


def step_of(checkpoint_path: str) -> int:
    """The global step in a checkpoint's name (model.ckpt-STEP), as Estimator names them."""
    match = re.search(r'-(\d+)$', checkpoint_path)
    if match:
        return int(match.group(1))
    return int(tf.train.load_variable(checkpoint_path, 'global_step'))


def exists(checkpoint_path: str) -> bool:
    return os.path.exists(checkpoint_path + '.index')


def resolve(model_dir: str, which: str) -> List[Tuple[int, str]]:
    """--checkpoint=latest|all|STEP|PATH as (step, path) pairs; all of them for 'all'."""
    if which not in ('latest', 'all') and not which.isdigit():
        return [(step_of(which), which)]
    available = list_checkpoints(model_dir)
    if not available:
        raise UserError(f'--model_dir={model_dir}: no checkpoint yet; train first '
                        'or pass --checkpoint')
    if which == 'all':
        return available
    if which == 'latest':
        return available[-1:]
    chosen = [pair for pair in available if pair[0] == int(which)]
    if not chosen:
        raise UserError(f'--checkpoint={which}: no checkpoint for that step in {model_dir}; it has '
                        'steps ' + ', '.join(str(step) for step, _ in available))
    return chosen
