"""The files a folder's manifest.json lists, as the readers take them: listed (not left over
from an interrupted prepare), all there, at the sizes listed (not cut short), compressed as listed.

The manifest vouches for each shard's records and bytes, so a pattern's files cost one listing
of their folder, one read of its manifest and one stat a shard (asked in parallel in a bucket),
whatever their number: a shard's bytes are read only where no manifest vouches for them.
"""
import fnmatch
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
    return _checked(_manifest_entries(files))


def check_listed_samples(files: List[str]) -> Tuple[Callable, List[str]]:
    """check_listed's reader, and the files whose records are to be looked at: each one no
    manifest vouches for, and one shard of each split the manifests list (its other shards were
    written alike; the split's features, not a shard's, may differ from what a model reads)."""
    entries = _manifest_entries(files)
    reader = _checked(entries)
    sampled_splits, samples = set(), []
    for path in files:
        manifest_path, entry = entries[path]
        split = (manifest_path, entry.get('split')) if entry else None
        if split not in sampled_splits:
            samples.append(path)
            if split is not None:
                sampled_splits.add(split)
    return reader, samples


def check_complete(file_pattern: str, matched: List[str]) -> None:
    """Each shard the manifest beside file_pattern lists and the pattern names is among the
    pattern's matches (one listing of the folder): a missing one is named, not trained without."""
    folder = os.path.dirname(file_pattern)
    if common_files.is_glob(folder):
        return  # one folder's manifest cannot speak for a pattern over folders
    listed = _listed_shards(folder)
    if listed is None:
        return
    name_glob, found = os.path.basename(file_pattern), {os.path.basename(p) for p in matched}
    for name, entry in sorted(listed.items()):
        if fnmatch.fnmatchcase(name, name_glob) and name not in found:
            manifest_path = os.path.join(folder, shards.MANIFEST_NAME)
            raise UserError(f'{os.path.join(folder, name)}: listed in {manifest_path} '
                            f'({entry["records"]} records) but missing; restore it, or run '
                            'prepare again')


def any_records(files: List[str]) -> bool:
    """Whether some file holds a record: the manifests say so without a request, else a file
    that is not empty does."""
    entries = _manifest_entries(files)
    if any((entry or {}).get('records') for _, entry in entries.values()):
        return True
    return any(common_files.size(path) > 0 for path in files)


def total_bytes(files: List[str]) -> int:
    """The files' bytes: as their manifests list them (checked by check_listed), else stat."""
    entries = _manifest_entries(files)
    unlisted = [path for path, (_, entry) in entries.items() if 'bytes' not in (entry or {})]
    return (sum(entry['bytes'] for _, entry in entries.values() if 'bytes' in (entry or {}))
            + sum(common_files.sizes(unlisted)))


def record_reader(files: List[str]) -> Callable:
    """TFRecordDataset over the files as their manifests list them: GZIP where an entry says
    so (a user's compressed records read in place by `prepare examples`), else plain."""
    return _reader(_manifest_entries(files))


def _checked(entries) -> Callable:
    for path, (manifest_path, entry) in entries.items():
        if manifest_path is not None and entry is None:
            raise UserError(f'{path}: not listed in {manifest_path}; it may be left over from an '
                            'interrupted or older prepare run: delete it or run prepare again')
    sized = [path for path, (_, entry) in entries.items() if 'bytes' in (entry or {})]
    try:
        sizes = common_files.sizes(sized)  # older manifests list no sizes
    except tf.errors.NotFoundError as e:  # gone since the listing
        raise UserError(f'{e.message.splitlines()[0]}: a listed shard went missing while it was '
                        'checked; restore it, or run prepare again')
    for path, size in zip(sized, sizes):
        manifest_path, entry = entries[path]
        if size != entry['bytes']:
            raise UserError(f'{path}: {size} bytes, but {manifest_path} lists {entry["bytes"]} bytes '
                            f'({entry["records"]} records); it was cut short or damaged: restore '
                            'it, or run prepare again')
    return _reader(entries)


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
    """{file name: its manifest entry (records, bytes) and its 'split'}, or None without a
    manifest."""
    path = os.path.join(folder, shards.MANIFEST_NAME)
    if not common_files.exists(path):
        return None
    try:
        manifest = shards.read_manifest(folder)
        return {s['file']: {**s, 'split': name} for name, split in manifest['splits'].items()
                for s in split['shards']}
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f'{path}: unreadable manifest ({e}); run prepare again')
