"""The files a folder's manifest.json lists, as the readers take them: listed (not left over
from an interrupted prepare), at the sizes listed (not cut short), compressed as listed."""
import functools
import os
from typing import Callable, Dict, List, Optional, Tuple

import tensorflow as tf

from common import files as common_files
from common.errors import UserError
from input_fns.records import shards


def check_listed(files: List[str]) -> Callable:
    """Where a folder has a manifest.json, each file must be listed in it (else it is left
    over from an interrupted job) and be the size it lists (else it was cut short or
    damaged): refuse it, naming it, before reading anything. Returns record_reader's reader,
    from the same reading of the manifests."""
    entries = _manifest_entries(files)
    for path, (manifest_path, entry) in entries.items():
        if manifest_path is None:
            continue
        if entry is None:
            raise UserError(f'{path}: not listed in {manifest_path}; it may be left over from an '
                            'interrupted or older prepare run: delete it or run prepare again')
        size = tf.io.gfile.stat(path).length
        if 'bytes' in entry and size != entry['bytes']:  # older manifests list no sizes
            raise UserError(f'{path}: {size} bytes, but {manifest_path} lists {entry["bytes"]} bytes '
                            f'({entry["records"]} records); it was cut short or damaged: restore '
                            'it, or run prepare again')
    return _reader(entries)


def record_reader(files: List[str]) -> Callable:
    """TFRecordDataset over the files as their manifests list them: GZIP where an entry says
    so (a user's compressed records read in place by `prepare examples`), else plain."""
    return _reader(_manifest_entries(files))


def _reader(entries) -> Callable:
    compressions = {path: (entry or {}).get('compression', '')
                    for path, (_, entry) in entries.items()}
    kinds = sorted(set(compressions.values()))
    if len(kinds) > 1:
        gzip_file = next(path for path, kind in compressions.items() if kind)
        plain_file = next(path for path, kind in compressions.items() if not kind)
        raise UserError(f'{gzip_file} is GZIP-compressed and {plain_file} is not: one file '
                        'pattern reads one kind; give them in separate runs, or reshard them '
                        'with `prepare examples --output_dir`')
    if kinds and kinds[0]:
        return functools.partial(tf.data.TFRecordDataset, compression_type=kinds[0])
    return tf.data.TFRecordDataset


def _manifest_entries(files: List[str]) -> Dict[str, Tuple[Optional[str], Optional[Dict]]]:
    """{file: (its folder's manifest path or None without one, the file's entry there or None)}."""
    manifests, entries = {}, {}
    for path in files:
        folder = os.path.dirname(path)
        if folder not in manifests:
            manifests[folder] = _listed_shards(folder)
        listed = manifests[folder]
        entries[path] = ((None, None) if listed is None else
                         (os.path.join(folder, shards.MANIFEST_NAME),
                          listed.get(os.path.basename(path))))
    return entries


def _listed_shards(folder: str) -> Optional[Dict[str, Dict]]:
    """{file name: its manifest entry (records, bytes)}, or None without a manifest."""
    path = os.path.join(folder, shards.MANIFEST_NAME)
    if not common_files.exists(path):
        return None
    try:
        manifest = shards.read_manifest(folder)
        return {s['file']: s for split in manifest['splits'].values() for s in split['shards']}
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f'{path}: unreadable manifest ({e}); run prepare again')
