"""Whole folders, local or in a bucket: listed, copied, moved into place, removed (common.files
does single files and the folder calls of one level)."""
import os
import posixpath
import shutil
from typing import List

import tensorflow as tf

from common import atomic_writes, files
from common.paths import is_local, join, local_path
from common.store_retries import in_store

# The folder a move_tree swaps out, named as a temporary (atomic_writes.is_abandoned reads its
# writer).
SWAPPED_OUT_MARK = '.old-'


def remove_tree(path: str) -> None:
    """Removes a folder and everything under it; a folder already gone is fine."""
    if is_local(path):
        shutil.rmtree(local_path(path), ignore_errors=True)
    elif files.isdir(path):
        def delete_all():
            try:
                tf.io.gfile.rmtree(path)
            except tf.errors.NotFoundError:
                pass
        in_store('removing the folder', path, delete_all)


def list_tree(folder: str) -> List[str]:
    """The relative paths ('a/b.png') of every file under folder, sorted; [] when it does not exist."""
    folder = folder.rstrip('/')
    found = []
    walked = in_store('listing', folder, lambda: list(tf.io.gfile.walk(files.ready(folder))))
    for parent, _, names in walked:
        relative_parent = parent.rstrip('/')[len(folder):].lstrip('/')
        found += [posixpath.join(relative_parent, name) if relative_parent else name
                  for name in names]
    return sorted(found)


def copy_tree(source: str, destination: str) -> List[str]:
    """Copies every file under source to the same relative path under destination.

    Returns the relative paths copied. Not atomic: callers write a marker when it is done.
    """
    copied = list_tree(source)
    files.makedirs(destination)
    for relative in copied:
        files.makedirs(posixpath.dirname(join(destination, relative)))
        files.copy(join(source.rstrip('/'), relative), join(destination, relative))
    return copied


def move_tree(source: str, destination: str) -> None:
    """Puts folder source in place of destination (replacing any folder there).

    On a local disk a rename: atomic. Elsewhere a copy, then source is removed; callers mark
    completion themselves (a bucket has no atomic rename of a folder).
    """
    if is_local(source) and is_local(destination):
        source, destination = local_path(source), local_path(destination)
        if os.path.exists(destination):  # swap it in: the old one out of the way first
            old = f'{destination}{SWAPPED_OUT_MARK}{atomic_writes.writer_tag()}'
            os.rename(destination, old)
            os.rename(source, destination)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(source, destination)
    else:
        remove_tree(destination)  # an incomplete copy left by a kill, or an older version
        copy_tree(source, destination)
        remove_tree(source)
