"""SavedModel export into EXPORT_DIR/<global step>/, marked complete last, with the input kind's
signature names.

An export is written under a hidden staging folder, then moved into EXPORT_DIR/<step>/, and
EXPORT_DIR/<step>/export_complete.json is written last. Whatever reads exports ignores a version
without that marker: a job killed midway leaves nothing that looks complete. On a local disk the
staging folder is EXPORT_DIR/.staging-HOST-PID/ and the move a rename. For a bucket it is a local
temporary folder, uploaded file by file: a bucket has no rename (TF's is a copy and a delete per
object, and its folder rename on gs:// takes the folder for an object when the listing that tells
them apart fails once: a 404), and TF Serving, which knows no marker but loads no folder without
saved_model.pb, gets saved_model.pb last.

EXPORT_DIR is also TF Serving's base path; the pointers EXPORT_DIR/best and EXPORT_DIR/latest
are small files naming a version's step (a bucket has no symlinks).
"""
import dataclasses
import re
import tempfile
import time
from typing import Dict, List, Optional

import numpy as np
from absl import logging
from tensorflow.core.protobuf import saved_model_pb2

from common import atomic_writes, file_trees, files, paths, termination
from trainer.model_dir import checkpoint_fit, checkpoints
from trainer.serving import warmup

COMPLETE_MARKER = 'export_complete.json'
STAGING_PREFIX = '.staging-'
_SWAPPED_OUT = re.compile(rf'\d+{re.escape(file_trees.SWAPPED_OUT_MARK)}.+')  # STEP.old-HOST-PID
SAVED_MODEL_PB = 'saved_model.pb'
EXTRA_DIR = 'assets.extra'  # TF Serving's folder for files beside the model (warm-up requests)
THRESHOLD_FILE = 'threshold.json'
# How the training rows were read (input_fns/tables/table_reading.py), for --mode=predict to read so;
# exports before it kept only their file format, CSV_FORMAT_FILE.
TABLE_READING_FILE = 'table_reading.json'
CSV_FORMAT_FILE = 'csv_format.json'
POINTERS = ('best', 'latest')  # the eval job's choice, or the newest


@dataclasses.dataclass(frozen=True)
class ServingExtras:
    """What an export adds to Estimator's SavedModel for TF Serving, from the input kind."""
    # Estimator's '<receiver>:<output>' signature names renamed ({old: new}) or dropped ({old: None}).
    signature_renames: Dict[str, Optional[str]]
    warmup_inputs: Dict[str, np.ndarray]  # a synthetic batch for each signature input name
    threshold: Optional[Dict] = None  # the decision baked into the graph: assets.extra/threshold.json
    table_reading: Optional[Dict] = None  # the training table's, from its schema: TABLE_READING_FILE


def _read_saved_model(saved_model_dir: str) -> saved_model_pb2.SavedModel:
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString(files.read_bytes(paths.join(saved_model_dir, SAVED_MODEL_PB)))
    return saved_model


def signature_defs(saved_model_dir: str) -> Dict:
    """The serving signatures by name (Estimator exports one meta graph)."""
    [meta_graph] = _read_saved_model(saved_model_dir).meta_graphs
    return dict(meta_graph.signature_def)


def rename_signatures(saved_model_dir: str, renames) -> None:
    """Estimator names alternative-input signatures '<receiver>:<output>'; give them plain names."""
    path = paths.join(saved_model_dir, SAVED_MODEL_PB)
    saved_model = _read_saved_model(saved_model_dir)
    for meta_graph in saved_model.meta_graphs:
        signatures = meta_graph.signature_def
        taken = {}  # remove every renamed or dropped signature first, then add the new names
        for old in renames:
            if old in signatures:
                taken[old] = type(signatures[old])()
                taken[old].CopyFrom(signatures[old])
                del signatures[old]
        for old, new in renames.items():
            if old in taken and new:
                signatures[new].CopyFrom(taken[old])
    atomic_writes.write_bytes_atomic(path, saved_model.SerializeToString())


def is_complete(version_dir: str) -> bool:
    return files.exists(paths.join(version_dir, COMPLETE_MARKER))


def remove_version(version_dir: str) -> None:
    """Removes an export, its marker first (one cut short never looks complete), then its
    saved_model.pb (TF Serving never loads a version whose variables are going)."""
    files.remove(paths.join(version_dir, COMPLETE_MARKER))
    files.remove(paths.join(version_dir, SAVED_MODEL_PB))
    file_trees.remove_tree(version_dir)


def complete_versions(export_dir: str) -> List[int]:
    """The steps of EXPORT_DIR's complete exports, oldest first."""
    return sorted(int(name) for name in files.listdir(export_dir)
                  if name.isdigit() and is_complete(paths.join(export_dir, name)))


def read_pointer(export_dir: str, name: str) -> Optional[int]:
    """The step that EXPORT_DIR/name (best, latest) names; None without such a pointer, or
    with a damaged one."""
    path = paths.join(export_dir, name)
    try:
        return files.read_parsed(path, _pointer_step) if files.exists(path) else None
    except ValueError:
        return None


def _pointer_step(text: str) -> int:
    """A pointer is written whole with its newline: without it, it was read cut short ('16' of
    '1602\n', as a bucket's reader can return it while the pointer is replaced)."""
    if not text.endswith('\n') or not text.strip().isdigit():
        raise ValueError(f'not a whole pointer: {text!r}')
    return int(text)


def point_latest(export_dir: str) -> None:
    """--mode=export: EXPORT_DIR/latest names the newest complete version, as the base path serves."""
    steps = complete_versions(export_dir)
    if steps:
        write_pointer(export_dir, 'latest', steps[-1])
        logging.info('%s names version %d', paths.join(export_dir, 'latest'), steps[-1])


def write_pointer(export_dir: str, name: str, step: int) -> None:
    """Points EXPORT_DIR/name at a version, replaced whole, and only when it changes."""
    if read_pointer(export_dir, name) != step:
        atomic_writes.write_text_atomic(paths.join(export_dir, name), f'{step}\n')


def _remove_leftovers(export_dir: str) -> None:
    """Staging folders (.staging-HOST-PID) and swapped-out versions (STEP.old-HOST-PID) of exports
    killed midway (kill -9 skips the cleanup below), by the rule for temporaries
    (atomic_writes.is_abandoned: this machine's whose pid is gone; another machine's only after
    days)."""
    for name in files.listdir(export_dir):
        path = paths.join(export_dir, name)
        mark = (STAGING_PREFIX if name.startswith(STAGING_PREFIX) else
                file_trees.SWAPPED_OUT_MARK if _SWAPPED_OUT.fullmatch(name) else None)
        if mark and atomic_writes.is_abandoned(path, mark):
            file_trees.remove_tree(path)


def export_saved_model(estimator, receiver_fn, export_dir: str, checkpoint_path: str,
                       extras: ServingExtras) -> str:
    """Exports a checkpoint to EXPORT_DIR/<its global step>/ and marks it complete."""
    step = checkpoints.saved_step(checkpoint_path)
    created_here = not files.isdir(export_dir)
    _remove_leftovers(export_dir)
    final_dir = paths.join(export_dir, str(step))
    staging_base = (paths.join(export_dir, f'{STAGING_PREFIX}{atomic_writes.writer_tag()}')
                    if paths.is_local(export_dir) else tempfile.mkdtemp(prefix=STAGING_PREFIX))
    try:
        with checkpoint_fit.restoring(checkpoint_path):
            staged = estimator.export_saved_model(staging_base, receiver_fn,
                                                  checkpoint_path=checkpoint_path)
        staged = staged.decode() if isinstance(staged, bytes) else staged
        rename_signatures(staged, extras.signature_renames)
        extra_dir = paths.join(staged, EXTRA_DIR)
        warmup.write(paths.join(extra_dir, warmup.FILE_NAME),
                     warmup.prediction_logs(signature_defs(staged), extras.warmup_inputs))
        for name, written in ((THRESHOLD_FILE, extras.threshold),
                              (TABLE_READING_FILE, extras.table_reading)):
            if written:
                atomic_writes.write_json_atomic(paths.join(extra_dir, name), written)
        # A signal here would leave EXPORT_DIR/<step>/ without its marker (half a copy, in
        # a bucket): the move and the marker are finished first.
        with termination.finish_first(f'finishing the export to {final_dir}'):
            _publish(staged, final_dir, staging_base)
            atomic_writes.write_json_atomic(paths.join(final_dir, COMPLETE_MARKER), {
                'step': step, 'checkpoint': checkpoint_path,
                'time': time.strftime('%Y-%m-%dT%H:%M:%S%z')})
    finally:
        file_trees.remove_tree(staging_base)
        if created_here and files.isdir(export_dir) and not files.listdir(export_dir):
            file_trees.remove_tree(export_dir)  # a failed first export leaves no empty export_dir
    return final_dir


def _publish(staged: str, final_dir: str, staging_base: str) -> None:
    """Moves the staged version (always local) to final_dir. Into a bucket, copied file by file:
    saved_model.pb is held back and put last (after variables/ and assets*), and an older copy's
    goes first, so a listing never shows saved_model.pb beside incomplete variables."""
    if paths.is_local(final_dir):
        file_trees.move_tree(staged, final_dir)  # a rename: atomic
        return
    held_back = paths.join(staging_base, SAVED_MODEL_PB)
    files.rename(paths.join(staged, SAVED_MODEL_PB), held_back)
    files.remove(paths.join(final_dir, SAVED_MODEL_PB))
    file_trees.move_tree(staged, final_dir)
    files.copy(held_back, paths.join(final_dir, SAVED_MODEL_PB))
