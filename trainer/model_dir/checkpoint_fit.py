"""Whether a checkpoint fits the model as it is built now, judged against the checkpoint in use:
the one evaluated or exported (`restoring`), else the model_dir's latest, which training
restores. A misfit is one line naming the checkpoint (UserError), never a restore's traceback
nor a store failure resumed again and again (trainer/run/store_failures)."""
import contextlib
import os
import re
from typing import Dict, List, Optional

import tensorflow as tf

from common import paths
from common.errors import UserError

# How a restore names a key the checkpoint it read lacks (or seemed to: a failed read of a
# bucket's .index reads as a checkpoint without global_step).
MISSING_KEY = re.compile(r'Key (\S+) not found in checkpoint')
# Set by `restoring`. A module global, not a contextvar: MirroredStrategy builds each replica's
# model_fn in a thread of its own.
_checkpoint_in_use: Optional[str] = None


@contextlib.contextmanager
def restoring(checkpoint_path: Optional[str]):
    """Estimator restores checkpoint_path within (train, evaluate, predict or export): the
    model_fn's check compares the model with it, and a key the restore misses that it truly
    lacks becomes one line naming it."""
    global _checkpoint_in_use
    outer, _checkpoint_in_use = _checkpoint_in_use, checkpoint_path
    try:
        yield
    except tf.errors.NotFoundError as e:
        lacking = checkpoint_path and lacked_key(e, checkpoint_path)
        if lacking:
            raise lacking from e
        raise
    finally:
        _checkpoint_in_use = outer


def saved_shapes(checkpoint_path: str) -> Optional[Dict[str, List[int]]]:
    """Each variable's shape in the checkpoint; None when it cannot be read whole (restoring it
    reports that), as after a failed read of a bucket's .index: every Estimator checkpoint
    holds global_step."""
    try:
        saved = tf.train.load_checkpoint(checkpoint_path).get_variable_to_shape_map()
    except (tf.errors.OpError, ValueError):
        return None
    return saved if 'global_step' in saved else None


def lacked_key(error: tf.errors.NotFoundError, checkpoint_path: str) -> Optional[UserError]:
    """A restore's 'Key K not found in checkpoint' as UserError when the checkpoint, read again
    now, holds everything but K; None when that read fails or finds K (the store failed)."""
    match = MISSING_KEY.search(error.message or '')
    saved = match and saved_shapes(checkpoint_path)
    if not saved or match.group(1) in saved:
        return None
    return _lacking(checkpoint_path, match.group(1))


def check_restorable(checkpoint_path: str, variables) -> None:
    """Training restores each of its graph's variables (in a graph built aside, without a
    distribution's replicas) from checkpoint_path: one it lacks (an optimizer's slot another
    --optimizer saved none of, a moving average, a loss scale) is refused now, naming it, before
    anything in model_dir changes (the restore itself fails after flags.txt is rewritten).
    Partitions are saved under their variable's name: not compared."""
    saved = saved_shapes(checkpoint_path)
    lacked = saved is not None and next(
        (name for name in (variable.name.split(':')[0] for variable in variables)
         if name not in saved and '/part_' not in name), None)
    if lacked:
        raise _lacking(checkpoint_path, lacked)


def _lacking(checkpoint_path: str, key: str) -> UserError:
    return UserError(
        f'checkpoint {checkpoint_path} lacks {key}, which the model as it is built '
        'now restores: it was saved with other flags (--optimizer, --precision, '
        '--moving_average_decay...) or by another version of the model (see '
        f'{flags_file_beside(checkpoint_path)}): use those, or train into a new --model_dir')


def flags_file_beside(checkpoint_path: str) -> str:
    """The flags.txt of the training run that saved a checkpoint (in its folder)."""
    return paths.join(os.path.dirname(checkpoint_path), 'flags.txt')


def checkpoint_mismatches(saved: Dict[str, List[int]], variables, weights=()) -> List[str]:
    """'name: [shape] in the checkpoint, [shape] in the model' for each variable they disagree on,
    and 'name: not in the checkpoint, ...' for each of `weights` (the model's trainable
    variables) the checkpoint (`saved`: saved_shapes) lacks.

    Restoring does not check shapes: a variable restored from a checkpoint of another shape
    takes that shape, and the run fails later with an unrelated-looking matmul error, or not
    at all; a missing weight fails restore with a long NotFoundError. Other variables only one
    side has (optimizer slots, partitions) are not compared: a restore that misses one is
    `lacked_key`'s.
    """
    found = []
    for variable in variables:
        name = variable.name.split(':')[0]
        shape = variable.shape.as_list()
        if name in saved and saved[name] != shape:
            found.append(f'{name}: {saved[name]} in the checkpoint, {shape} in the model')
    for variable in weights:
        name = variable.name.split(':')[0]
        if name not in saved and '/part_' not in name:
            found.append(f'{name}: not in the checkpoint, {variable.shape.as_list()} in the model')
    return found


def with_checkpoint_check(model_fn, model_name: str):
    """model_fn that, once it has built the graph, refuses the checkpoint in use when it holds
    variables of other shapes or lacks some of its weights (saved by another version of the
    model, or for another input size), naming the checkpoint, rather than letting restore
    reshape them or fail with a traceback. Each checkpoint is read once, however many graphs
    (training's check aside, evaluation, predictions, the export) are checked against it."""
    read: Dict[str, Dict[str, List[int]]] = {}  # the checkpoint last read: its shapes

    def shapes_read_once(checkpoint: str) -> Optional[Dict[str, List[int]]]:
        if checkpoint not in read:
            shapes = saved_shapes(checkpoint)
            if shapes is None:
                return None  # not kept: read again by the next graph
            read.clear()
            read[checkpoint] = shapes
        return read[checkpoint]

    # The argument names are the ones Estimator reads.
    def model_fn_checking_checkpoint(features, labels, mode, params, config):
        spec = model_fn(features, labels, mode, params)
        checkpoint = _checkpoint_in_use or (
            config.model_dir and tf.train.latest_checkpoint(config.model_dir))
        saved = checkpoint and shapes_read_once(checkpoint)
        mismatches = checkpoint_mismatches(saved, tf.compat.v1.global_variables(),
                                           tf.compat.v1.trainable_variables()) if saved else []
        if mismatches:
            more = f' (and {len(mismatches) - 1} more)' if len(mismatches) > 1 else ''
            raise UserError(
                f'checkpoint {checkpoint} does not fit --model={model_name} as it is built now: '
                f'{mismatches[0]}{more}; it was saved by another version of the model or for '
                f'another input size (see {flags_file_beside(checkpoint)}): use that version, '
                'or train into a new --model_dir')
        return spec

    return model_fn_checking_checkpoint
