"""Where a --usr_dir folder is on this machine, and a hash of what it holds.

A folder in a bucket (gs://, s3://) is copied once to a local cache keyed by the hash of its
files, so every task of a cluster imports the same code and a changed folder is a new copy.
"""
import dataclasses
import hashlib
import os
import tempfile
import uuid

from common import atomic_writes, file_trees, files, paths
from common.errors import UserError

# Left out of the hash and the copy: Python's own caches, rewritten by every import.
SKIPPED_PARTS = ('__pycache__',)
SKIPPED_SUFFIXES = ('.pyc',)


@dataclasses.dataclass(frozen=True)
class Folder:
    path: str  # as flags.txt records it: an absolute local path, or the bucket's URL
    local: str  # the folder imported: path itself, or its copy in the cache
    sha256: str  # of its files' relative paths and contents

    @property
    def flag(self) -> str:
        return f'--usr_dir={self.path}'


def cache_root() -> str:
    return os.path.join(tempfile.gettempdir(), 'trainer_usr_dir')


def _contents(folder: str):
    """{relative path: bytes} of the files under folder, caches left out."""
    return {relative: files.read_bytes(paths.join(folder, relative))
            for relative in file_trees.list_tree(folder)
            if not any(part in SKIPPED_PARTS for part in relative.split('/'))
            and not relative.endswith(SKIPPED_SUFFIXES)}


def content_hash(contents) -> str:
    digest = hashlib.sha256()
    for relative, data in sorted(contents.items()):
        digest.update(f'{relative}\0{len(data)}\0'.encode() + data)
    return digest.hexdigest()


def find(given: str) -> Folder:
    """The folder --usr_dir names, ready to import; one line naming it when it is not one."""
    path = paths.local_path(given)
    path = os.path.abspath(path) if paths.is_local(given) else given.rstrip('/')
    if not files.exists(path):
        raise UserError(f'--usr_dir={given}: no such folder; give the folder that holds your '
                        'modules (docs/your-model.md)')
    if not files.isdir(path):
        raise UserError(f'--usr_dir={given}: a file, not a folder; give the folder that holds '
                        'it (every module there is imported)')
    contents = _contents(path)
    if not any(relative.endswith('.py') for relative in contents):
        raise UserError(f'--usr_dir={given}: no Python module there; give the folder that '
                        'holds your modules (docs/your-model.md)')
    sha256 = content_hash(contents)
    if paths.is_local(path):
        return Folder(path, path, sha256)
    return Folder(path, _cached_copy(path, contents, sha256), sha256)


def _cached_copy(path: str, contents, sha256: str) -> str:
    """CACHE/<hash>/<folder name>: written beside, then renamed into place whole."""
    local = os.path.join(cache_root(), sha256[:32], path.rsplit('/', 1)[-1])
    if os.path.isdir(local):  # local: the cache is on this machine, for Python's importer
        return local
    staging = os.path.join(cache_root(), f'.staging-{uuid.uuid4().hex}')
    for relative, data in contents.items():
        atomic_writes.write_bytes_atomic(os.path.join(staging, *relative.split('/')), data)
    os.makedirs(os.path.dirname(local), exist_ok=True)  # local: the import cache
    try:
        os.rename(staging, local)  # local: atomic on this disk, so importers see all or none
    except OSError:  # another process put the same copy there first
        file_trees.remove_tree(staging)
    return local
