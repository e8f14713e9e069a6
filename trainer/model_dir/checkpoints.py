"""A model_dir's checkpoints: every complete one, oldest first, and one named by a flag."""
import os
import re
import time
from typing import Dict, List, Optional, Tuple

import tensorflow as tf
from absl import logging
from tensorflow.python.checkpoint import checkpoint_management  # its Saver's relative names

from common import file_trees, files, paths, store_retries
from common.errors import UserError

CHECKPOINT_INDEX = re.compile(r'^model\.ckpt-(\d+)\.index$')
# How often a process waiting on another's records in a model_dir (a checkpoint, flags.txt,
# train_finished.json, a ledger entry) looks again.
POLL_SECS = 1.0


def list_checkpoints(model_dir: str) -> List[Tuple[int, str]]:
    """(step, path) of every complete checkpoint in model_dir, oldest first.

    Lists the .index files rather than the `checkpoint` state file, which names only
    the last keep_checkpoint_max. A file counts once the state file names a checkpoint
    at least as new: a trainer killed mid-save leaves files of a step it saves again.
    """
    state_file = paths.join(model_dir, 'checkpoint')
    if not files.exists(state_file):
        return []

    def read_state():
        # TensorFlow logs a failed read of the state file and answers None, as for no state: in a
        # bucket, after the file was found, that None is the store failing, not "no checkpoint".
        state = tf.train.get_checkpoint_state(model_dir)
        if state is None and not paths.is_local(model_dir):
            raise store_retries.TransientStoreFailure(f'{state_file} was found but not read')
        return state

    state = store_retries.in_store('reading the checkpoint state in', model_dir, read_state)
    if state is None:
        return []
    newest = step_of(state.model_checkpoint_path)
    found = []
    for path in files.glob(paths.join(model_dir, 'model.ckpt-*.index')):
        match = CHECKPOINT_INDEX.match(os.path.basename(path))
        if match and int(match.group(1)) <= newest:
            found.append((int(match.group(1)), path[:-len('.index')]))
    return sorted(found)


def step_of(checkpoint_path: str) -> int:
    """The step that names a checkpoint (model.ckpt-STEP) in listings and ledgers.

    Falls back to the step saved inside it for a path named otherwise.
    """
    match = re.search(r'-(\d+)$', checkpoint_path)
    if match:
        return int(match.group(1))
    return saved_step(checkpoint_path)


def saved_step(checkpoint_path: str, metrics: Optional[Dict] = None) -> int:
    """The global step saved inside a checkpoint, which names its export.

    On a cluster it can be past the step in the checkpoint's name: the other workers go
    on training while the chief saves. An evaluation's metrics hold it already
    (global_step), so a checkpoint deleted since need not be read.
    """
    if metrics is not None:
        return int(metrics['global_step']) if 'global_step' in metrics else step_of(checkpoint_path)
    return int(tf.train.load_variable(checkpoint_path, 'global_step'))


def latest_saved_step(model_dir: str) -> int:
    """The global step of model_dir's latest checkpoint; 0 before the first."""
    checkpoint = tf.train.latest_checkpoint(model_dir) if model_dir else None
    if not checkpoint:
        return 0
    try:
        return saved_step(checkpoint)
    except Exception:  # noqa: BLE001: damaged; prepare_to_resume names it before training
        return step_of(checkpoint)


def age_secs(checkpoint_path: str) -> float:
    """Seconds since the checkpoint was saved."""
    return time.time() - tf.io.gfile.stat(checkpoint_path + '.index').mtime_nsec / 1e9


def exists(checkpoint_path: str) -> bool:
    return files.exists(checkpoint_path + '.index')


def deleted(checkpoint_path: str) -> bool:
    """The checkpoint is gone: its .index file neither exists nor is listed in its folder. A
    store's failing stat reads as "does not exist" (common/bucket_probe.py), and an eval job
    records a deleted checkpoint as skipped for good, so a "no" needs a listing's word too."""
    if exists(checkpoint_path):
        return False
    folder, name = os.path.split(checkpoint_path)
    return name + '.index' not in files.listdir(folder)


def resolve(model_dir: str, which: str) -> List[Tuple[int, str]]:
    """--checkpoint=latest|all|STEP|PATH as (step, path) pairs; all of them for 'all'."""
    if which not in ('latest', 'all') and not which.isdigit():
        if not exists(which):
            raise UserError(f'--checkpoint={which}: no such checkpoint ({which}.index is missing)')
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


def has_checkpoints(model_dir: str) -> bool:
    """Whether model_dir holds a checkpoint's files, whatever its state file says (training
    resumes from them: prepare_to_resume)."""
    return files.isdir(model_dir) and bool(_listed_by_files(model_dir))


def _listed_by_files(model_dir: str) -> List[Tuple[int, str]]:
    """(step, path) of every checkpoint with an .index file, oldest first, state file or not."""
    found = [(int(m.group(1)), path[:-len('.index')])
             for path in files.glob(paths.join(model_dir, 'model.ckpt-*.index'))
             for m in [CHECKPOINT_INDEX.match(os.path.basename(path))] if m]
    return sorted(found)


def damage(checkpoint_path: str) -> Optional[str]:
    """Why a checkpoint cannot be restored (missing or cut-short files), or None if it reads whole.

    Reads every variable, as restoring does, so a data file cut short is found now."""
    try:
        reader = tf.train.load_checkpoint(checkpoint_path)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except Exception as e:  # noqa: BLE001: the reader raises IndexError, OpError, ValueError...
        if store_retries.is_transient(e) and paths.is_bucket(checkpoint_path):
            raise  # the store failing (500, 503, 429), not the checkpoint
        lines = str(getattr(e, 'message', e)).strip().splitlines()
        return f'{type(e).__name__}: {lines[0] if lines else "unreadable"}'
    return None


def prepare_to_resume(model_dir: str) -> None:
    """Before a chief trains: never start again at step 0 over existing checkpoints.

    Removes the temporary folders a kill mid-save leaves (model.ckpt-N_temp). When the
    `checkpoint` state file is missing or unreadable, or names a checkpoint whose files
    are gone, while checkpoints exist, rewrites it to name the newest complete one found by
    listing (with a warning). A latest checkpoint that cannot be read stops with an error
    naming it rather than being overwritten.
    """
    if not files.isdir(model_dir):
        return
    for leftover in files.glob(paths.join(model_dir, 'model.ckpt-*_temp*')):
        logging.info('removing %s, left by a trainer killed while saving', leftover)
        file_trees.remove_tree(leftover)
    latest = tf.train.latest_checkpoint(model_dir)
    if latest:
        problem = damage(latest)
        if problem:
            older = [path for step, path in _listed_by_files(model_dir) if step < step_of(latest)]
            instead = f'to resume from {older[-1]}' if older else 'to start afresh'
            raise UserError(f'checkpoint {latest} is damaged ({problem}); restore its files, or '
                            f'move {latest}.* away {instead}')
        return
    state_file = paths.join(model_dir, 'checkpoint')
    for step, path in reversed(_listed_by_files(model_dir)):
        if damage(path) is None:
            logging.warning('the checkpoint state file %s is missing, unreadable or names no '
                            'existing checkpoint; resuming from %s, the newest complete checkpoint '
                            'found by listing (state file rewritten)', state_file, path)
            # As Estimator's Saver writes it: relative names, from full paths (the public
            # update_checkpoint_state reads a bare name as relative to the working folder when
            # model_dir has no leading '/', and s3://b/model's then reads '../../../name').
            complete = [p for _, p in _listed_by_files(model_dir) if _ <= step]
            checkpoint_management.update_checkpoint_state_internal(
                model_dir, path, all_model_checkpoint_paths=complete, save_relative_paths=True)
            return
    if _listed_by_files(model_dir):
        raise UserError(f'--model_dir={model_dir}: its checkpoints are all damaged and the state '
                        f'file {state_file} names none; restore them, or move them away to '
                        'start afresh')
