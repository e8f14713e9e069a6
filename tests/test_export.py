"""Export pieces that need no training: renaming Estimator's signatures, leftovers of killed exports."""
import os
import socket
import time

from tensorflow.core.protobuf import saved_model_pb2

from common import atomic_writes
from trainer.serving import export


def write_saved_model(folder, signature_names):
    saved_model = saved_model_pb2.SavedModel()
    meta_graph = saved_model.meta_graphs.add()
    for name in signature_names:
        meta_graph.signature_def[name].method_name = f'method of {name}'
    (folder / 'saved_model.pb').write_bytes(saved_model.SerializeToString())


def read_signatures(folder):
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((folder / 'saved_model.pb').read_bytes())
    return {name: signature.method_name
            for name, signature in saved_model.meta_graphs[0].signature_def.items()}


def test_signatures_are_renamed_and_dropped(tmp_path):
    # Estimator's names for a face model: the pair receiver's outputs, and the single receiver's.
    write_saved_model(tmp_path, ['serving_default', 'embed', 'single:embed',
                                 'single:serving_default'])
    export.rename_signatures(str(tmp_path), {'single:embed': 'embed', 'embed': None})
    assert read_signatures(tmp_path) == {
        'serving_default': 'method of serving_default',
        'embed': 'method of single:embed',  # renamed onto a name that was dropped first
        'single:serving_default': 'method of single:serving_default'}


def test_renames_of_absent_signatures_change_nothing(tmp_path):
    write_saved_model(tmp_path, ['serving_default'])
    export.rename_signatures(str(tmp_path), {'pixels:serving_default': 'predict_pixels'})
    assert read_signatures(tmp_path) == {'serving_default': 'method of serving_default'}


def test_leftovers_of_dead_exporters_are_removed(tmp_path):
    """This machine's by their dead pid; another machine's only once days old: a process id says
    nothing about another machine's exporter."""
    dead_pid = 2 ** 22 + 12345  # above the default pid_max: no such process
    host = socket.gethostname()
    kept = [f'.staging-{host}-{os.getpid()}', f'.staging-otherhost-{dead_pid}', '7',
            f'7.old-otherhost-{dead_pid}']
    old_foreign = f'.staging-otherhost-{os.getpid()}'
    for name in [f'.staging-{host}-{dead_pid}', f'7.old-{host}-{dead_pid}', old_foreign] + kept:
        (tmp_path / name).mkdir()
    days_ago = time.time() - atomic_writes.FOREIGN_TEMPORARY_MAX_AGE_SECS - 60
    os.utime(tmp_path / old_foreign, (days_ago, days_ago))
    export._remove_leftovers(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted(kept)
