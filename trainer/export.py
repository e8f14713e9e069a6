"""SavedModel export into EXPORT_DIR/<global step>/, atomically, with the input kind's signature names."""
import os
import re
import shutil

from tensorflow.core.protobuf import saved_model_pb2

from common.atomic_files import pid_alive
from trainer import checkpoints


def rename_signatures(saved_model_dir: str, renames) -> None:
    """Estimator names alternative-input signatures '<receiver>:<output>'; give them plain names."""
    path = os.path.join(saved_model_dir, 'saved_model.pb')
    saved_model = saved_model_pb2.SavedModel()
    with open(path, 'rb') as f:
        saved_model.ParseFromString(f.read())
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
    with open(path, 'wb') as f:
        f.write(saved_model.SerializeToString())


def _remove_leftovers(export_dir: str) -> None:
    """Staging folders of exports killed midway (kill -9 skips the cleanup below)."""
    if not os.path.isdir(export_dir):
        return
    for name in os.listdir(export_dir):
        match = re.fullmatch(r'(?:\.staging|\d+\.old)-(\d+)', name)
        if match and not pid_alive(int(match.group(1))):
            shutil.rmtree(os.path.join(export_dir, name), ignore_errors=True)


def export_saved_model(estimator, receiver_fn, export_dir: str, checkpoint_path: str,
                       signature_renames=None) -> str:
    """Exports a checkpoint to EXPORT_DIR/<its global step>/."""
    step = checkpoints.saved_step(checkpoint_path)
    _remove_leftovers(export_dir)
    final_dir = os.path.join(export_dir, str(step))
    staging_base = os.path.join(export_dir, f'.staging-{os.getpid()}')
    try:
        staged = estimator.export_saved_model(staging_base, receiver_fn,
                                              checkpoint_path=checkpoint_path)
        staged = staged.decode() if isinstance(staged, bytes) else staged
        rename_signatures(staged, signature_renames or {})
        if os.path.exists(final_dir):  # re-export of the same step: swap it in
            old_dir = f'{final_dir}.old-{os.getpid()}'
            os.rename(final_dir, old_dir)
            os.rename(staged, final_dir)
            shutil.rmtree(old_dir)
        else:
            os.rename(staged, final_dir)
    finally:
        shutil.rmtree(staging_base, ignore_errors=True)
    return final_dir
