"""SavedModel export into EXPORT_DIR/<global step>/, marked complete last, with the input kind's
signature names.

An export is written under a hidden staging folder, EXPORT_DIR/.staging-HOST-PID/, then moved
into EXPORT_DIR/<step>/ (a rename on a local disk; a copy in a bucket, which has no atomic
rename of a folder), and EXPORT_DIR/<step>/export_complete.json is written last. Whatever reads
exports ignores a version without that marker: a job killed midway leaves nothing that looks
complete.
"""
import os
import re
import socket
import time
from typing import List

from tensorflow.core.protobuf import saved_model_pb2

from common import files, paths, process_lock, termination
from trainer.run import checkpoints

COMPLETE_MARKER = 'export_complete.json'
STAGING_PREFIX = '.staging-'


def rename_signatures(saved_model_dir: str, renames) -> None:
    """Estimator names alternative-input signatures '<receiver>:<output>'; give them plain names."""
    path = paths.join(saved_model_dir, 'saved_model.pb')
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString(files.read_bytes(path))
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
    files.write_bytes_atomic(path, saved_model.SerializeToString())


def is_complete(version_dir: str) -> bool:
    return files.exists(paths.join(version_dir, COMPLETE_MARKER))


def remove_version(version_dir: str) -> None:
    """Removes an export, its marker first: one cut short never looks complete."""
    files.remove(paths.join(version_dir, COMPLETE_MARKER))
    files.remove_tree(version_dir)


def complete_versions(export_dir: str) -> List[int]:
    """The steps of EXPORT_DIR's complete exports, oldest first."""
    return sorted(int(name) for name in files.listdir(export_dir)
                  if name.isdigit() and is_complete(paths.join(export_dir, name)))


def _remove_leftovers(export_dir: str) -> None:
    """Staging folders of this machine's exports killed midway (kill -9 skips the cleanup below);
    another machine's are left alone (readers ignore them)."""
    pattern = re.compile(rf'(?:{re.escape(STAGING_PREFIX)}{re.escape(socket.gethostname())}'
                         r'|\d+\.old)-(\d+)')
    for name in files.listdir(export_dir):
        match = pattern.fullmatch(name)
        if match and not process_lock.pid_alive(int(match.group(1))):
            files.remove_tree(paths.join(export_dir, name))


def export_saved_model(estimator, receiver_fn, export_dir: str, checkpoint_path: str,
                       signature_renames=None) -> str:
    """Exports a checkpoint to EXPORT_DIR/<its global step>/ and marks it complete."""
    step = checkpoints.saved_step(checkpoint_path)
    created_here = not files.isdir(export_dir)
    _remove_leftovers(export_dir)
    final_dir = paths.join(export_dir, str(step))
    staging_base = paths.join(export_dir, f'{STAGING_PREFIX}{socket.gethostname()}-{os.getpid()}')
    try:
        staged = estimator.export_saved_model(staging_base, receiver_fn,
                                              checkpoint_path=checkpoint_path)
        staged = staged.decode() if isinstance(staged, bytes) else staged
        rename_signatures(staged, signature_renames or {})
        # A signal here would leave EXPORT_DIR/<step>/ without its marker (half a copy, in
        # a bucket): the move and the marker are finished first.
        with termination.finish_first(f'finishing the export to {final_dir}'):
            files.move_tree(staged, final_dir)
            files.write_json_atomic(paths.join(final_dir, COMPLETE_MARKER), {
                'step': step, 'checkpoint': checkpoint_path,
                'time': time.strftime('%Y-%m-%dT%H:%M:%S%z')})
    finally:
        files.remove_tree(staging_base)
        if created_here and files.isdir(export_dir) and not files.listdir(export_dir):
            files.remove_tree(export_dir)  # a failed first export leaves no empty export_dir
    return final_dir
