"""The modes of `python -m trainer.main --mode=...`: the one table of them.

The --mode flag's choices and help, the flags each mode cannot run without, which modes
resume when run again, which build the model as MODEL_DIR/flags.txt recorded it, and which
files a bad record is looked for in, all come from MODES. trainer.main dispatches each mode
to its runner, run_<mode> in trainer.run.mode_runners.RUNNERS.
"""
import dataclasses
from typing import Dict, Tuple


@dataclasses.dataclass(frozen=True)
class Mode:
    name: str
    summary: str  # one line for --helpshort
    needs: Tuple[str, ...]  # the flags it cannot run without
    data_flags: Tuple[str, ...] = ()  # the flags naming the record files it reads
    resumes: bool = False  # the same command, run again, takes up where it stopped
    reads_trained_model: bool = False  # builds the model as MODEL_DIR/flags.txt recorded it
    writes: Tuple[str, ...] = ()  # the flags naming where it writes: checked writable at start


MODES: Dict[str, Mode] = {mode.name: mode for mode in (
    Mode('train', 'train on --train_files up to --train_steps', ('model_dir', 'train_files'),
         data_flags=('train_files',), resumes=True, writes=('model_dir',)),
    Mode('evaluate', 'evaluate --checkpoint (latest, all, a step) once into the eval ledger',
         ('model_dir', 'eval_files'), data_flags=('eval_files',), resumes=True,
         reads_trained_model=True, writes=('model_dir', 'export_dir')),
    Mode('continuous_eval', 'the eval job: evaluate every checkpoint exactly once as training '
         'writes them', ('model_dir', 'eval_files'), data_flags=('eval_files',), resumes=True,
         reads_trained_model=True, writes=('model_dir', 'export_dir')),
    Mode('train_and_evaluate', 'tf.estimator.train_and_evaluate; on a TF_CONFIG cluster, the '
         'task\'s role', ('model_dir', 'train_files', 'eval_files'),
         data_flags=('train_files', 'eval_files'), resumes=True,
         writes=('model_dir', 'export_dir')),
    Mode('export', 'export --checkpoint as a SavedModel to EXPORT_DIR/<step>/',
         ('model_dir', 'export_dir'), reads_trained_model=True, writes=('export_dir',)),
    Mode('predict', 'run a SavedModel on the files named after the flags', ('saved_model',)),
    Mode('benchmark_input', 'time each input pipeline stage, and training on it',
         ('train_files',)),
)}


def help_text() -> str:
    return 'What to do. ' + '; '.join(f'{mode.name}: {mode.summary}' for mode in MODES.values())
