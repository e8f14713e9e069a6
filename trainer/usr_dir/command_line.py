"""--usr_dir, read from the command line before absl parses it, and as flags.txt records it.

The trainer's flags include the params of the models the folders register (--my_param), so
the folders are imported first: found in the arguments or a --flagfile they name; when none
is given, a command on a model_dir imports the folders its MODEL_DIR/flags.txt records.
"""
import os
import re
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from absl import flags

from common import files, paths
from common.errors import UserError
from trainer.cluster import vertex_env
from trainer.model_dir import run_files
from trainer.usr_dir import folders, modules

HELP = ('A folder of your own modules (or a package), local or in a bucket, imported before '
        'the flags are read: the models and input kinds they register (trainer/api.py) become '
        '--model choices, with a flag per param. Repeatable. Commands on a model_dir import '
        'the folders its flags.txt records unless given. docs/your-model.md.')
# flags.txt: '# --usr_dir=PATH: sha256 HEX of its files' after each run's --usr_dir lines.
HASH_LINE = re.compile(r'^# --usr_dir=(.+): sha256 ([0-9a-f]{64}) ', re.MULTILINE)
FLAG_LINE = re.compile(r'^--usr_dir=(.+)$', re.MULTILINE)

_imported: List[folders.Folder] = []


def import_for_command(argv: Sequence[str], read_model_dir: bool = True) -> List[folders.Folder]:
    """Imports the --usr_dir folders of a trainer command line, or (read_model_dir) those its
    model_dir's flags.txt records. A launcher (sweep, deploy) reads the trainer flags it passes
    on with read_model_dir=False: what is recorded there is for the trainer to read."""
    given, model_dir = _scan(argv)
    model_dir = model_dir if read_model_dir else None
    recorded = recorded_folders(model_dir and run_files.recorded_flags(model_dir) or '')
    flags_path = model_dir and paths.join(model_dir, run_files.FLAGS_FILE)
    if not given:
        for path in recorded:
            if not files.exists(path):
                raise UserError(f'{flags_path} records --usr_dir={path}, which is not there; '
                                'add --usr_dir=FOLDER naming where those modules are now')
        given = list(recorded)
    found = [folders.find(path) for path in given]
    for folder in found:
        _warn_if_changed(folder, recorded, flags_path)
    modules.import_folders(found)
    _imported[:] = found
    return found


def _scan(argv: Sequence[str]) -> Tuple[List[str], Optional[str]]:
    """(--usr_dir values, --model_dir) of argv and the --flagfile it names; the trainer's own
    parse reports anything wrong with them."""
    values = flags.FlagValues()
    flags.DEFINE_multi_string('usr_dir', [], HELP, flag_values=values)
    flags.DEFINE_string('model_dir', vertex_env.default_dirs().get('model_dir'), '',
                        flag_values=values)
    try:
        values(list(argv), known_only=True)
    except flags.Error:
        return [], None
    return list(values.usr_dir), values.model_dir


def recorded_folders(flags_text: str) -> Dict[str, Optional[str]]:
    """{--usr_dir path: sha256 of its files then, or None} as a flags.txt records them."""
    hashes = dict(HASH_LINE.findall(flags_text))
    return {path: hashes.get(path) for path in FLAG_LINE.findall(flags_text)}


def _warn_if_changed(folder: folders.Folder, recorded: Dict, flags_path: str) -> None:
    """One line when the folder (or, given elsewhere now, the recorded one of its name) holds
    other files than flags.txt recorded."""
    same_name = [path for path in recorded
                 if path.rstrip('/').rsplit('/', 1)[-1] == os.path.basename(folder.local)]
    then_path = folder.path if folder.path in recorded else (
        same_name[0] if len(same_name) == 1 else None)
    then = then_path and recorded[then_path]
    if not then or then == folder.sha256:
        return
    what = ('its files changed since' if then_path == folder.path else
            f'its files differ from those of --usr_dir={then_path} that')
    print(f'warning: {folder.flag}: {what} {flags_path} recorded them (sha256 {then[:12]}, now '
          f'{folder.sha256[:12]}); the model is built from them as they are now', file=sys.stderr)


def flagfile_lines() -> str:
    """What flags.txt records of the imported folders: each flag, then its files' hash."""
    return (''.join(f'{folder.flag}\n' for folder in _imported)
            + ''.join(f'# {folder.flag}: sha256 {folder.sha256} of its files\n'
                      for folder in _imported))


def imported() -> List[folders.Folder]:
    return list(_imported)
