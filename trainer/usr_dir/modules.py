"""Importing the modules of --usr_dir folders, so that their registrations apply.

A folder with an __init__.py is a package, imported by its name (its parent goes on sys.path;
the package imports its own modules). Any other folder goes on sys.path and each of its
top-level modules is imported, in name order. The built-in models and input kinds register
first, so a clash names the user's module.
"""
import importlib
import importlib.util
import os
import sys
import traceback
from typing import List, Sequence

from common.errors import UserError
from models import registry as models
from trainer.input_kinds import registry as input_kinds
from trainer.usr_dir.folders import Folder


def import_folders(folders: Sequence[Folder]) -> None:
    """Imports every folder's modules, then checks what they registered."""
    models.names(), input_kinds.names()  # noqa: B018: the built-ins register first
    for folder in folders:
        for name, file_path in _modules(folder):
            _import(folder, name, file_path)
    _check_input_kinds()


def _modules(folder: Folder) -> List[tuple]:
    """[(module name, file)] to import, with the folder (or its parent) on sys.path."""
    # folder.local is on this machine: a bucket folder was copied to the cache first.
    if os.path.exists(os.path.join(folder.local, '__init__.py')):  # local: see above
        search_path, names = os.path.dirname(folder.local), [os.path.basename(folder.local)]
        found = [(names[0], os.path.join(folder.local, '__init__.py'))]
    else:
        search_path = folder.local
        found = [(name[:-3], os.path.join(folder.local, name))
                 for name in sorted(os.listdir(folder.local))  # local: as above
                 if name.endswith('.py') and name[:-3].isidentifier()]
    for name, file_path in found:
        _refuse_shadowing(folder, name, file_path)
    if search_path not in sys.path:
        sys.path.insert(0, search_path)
    return found


def _refuse_shadowing(folder: Folder, name: str, file_path: str) -> None:
    """A user module named as one already importable (models, json...) would hide one of them."""
    existing = importlib.util.find_spec(name) if name not in sys.modules else sys.modules[name]
    origin = getattr(existing, 'origin', None) or getattr(existing, '__file__', None)
    if existing is not None and origin and not origin.startswith(folder.local + os.sep):
        raise UserError(f'{folder.flag}: its module {name} ({file_path}) has the name of '
                        f'{origin}; rename it')


def _import(folder: Folder, name: str, file_path: str) -> None:
    try:
        importlib.import_module(name)
    except UserError as error:  # the service's own check (a name registered twice...)
        raise UserError(f'{folder.flag}: {error}') from None
    except Exception as error:  # noqa: B902: any error in the user's code is theirs to fix
        _print_user_traceback(error, folder.local)
        raise UserError(f'{folder.flag}: importing {name} ({file_path}) raised '
                        f'{type(error).__name__}: {error}; fix it (the traceback above is '
                        'from your module)') from None


def _print_user_traceback(error: Exception, folder: str) -> None:
    """The traceback from the first frame in the user's folder on: their code, not ours."""
    trace = traceback.TracebackException.from_exception(error)
    theirs = [i for i, frame in enumerate(trace.stack) if frame.filename.startswith(folder)]
    if theirs:
        trace.stack = traceback.StackSummary.from_list(trace.stack[theirs[0]:])
    print(''.join(trace.format() if theirs else trace.format_exception_only()).rstrip(),
          file=sys.stderr)


def _check_input_kinds() -> None:
    """Every model names a registered input kind (it may be registered after the model)."""
    kinds = input_kinds.names()
    for name in models.names():
        kind = models.get(name).input_kind
        if kind not in kinds:
            raise UserError(f'model {name} ({models.module_of(name)}) names input_kind '
                            f'{kind!r}, which no module registers; registered: '
                            f'{", ".join(kinds)} (register yours with api.register_input_kind)')
