"""The files a folder's manifest.json lists, as the readers take them: listed (not left over
from an interrupted prepare), all there, at the sizes listed (not cut short), compressed as listed.

The manifest vouches for each shard's records and bytes, so a pattern's files cost one listing
of their folder with each file's size (common.files.folder_sizes: 1,000 objects a request in a
bucket) and one read of its manifest, whatever their number: list_pattern hands both on to the
checks and the reader (ListedFiles; not kept past the build, since prepare rewrites manifests),
and a shard's bytes are read only where no manifest vouches for them.
"""
import fnmatch
import functools
import os
from typing import Callable, Dict, List, Optional, Tuple

import tensorflow as tf

from common import files as common_files
from common.errors import UserError
from input_fns.records import shards
from input_fns.records.file_patterns import data_files


class ListedFiles(list):
    """Sorted files as one listing found them, with each one's size there (sizes) and its entry
    in its folder's manifest (entries: (the manifest's path or None without one, the entry or
    None)), for the checks and the reader of one input_fn build. Made like a list from paths
    alone (as tf.nest remakes a sequence), it knows nothing of them."""

    def __init__(self, paths=(), sizes: Optional[Dict[str, int]] = None,
                 entries: Optional[Dict[str, Tuple]] = None):
        super().__init__(paths)
        self.sizes, self.entries = sizes, entries

    @classmethod
    def of(cls, sizes: Dict[str, int], entries: Dict[str, Tuple]) -> 'ListedFiles':
        return cls(sorted(sizes), sizes, entries)

    def part(self, paths: List[str]) -> 'ListedFiles':
        return ListedFiles.of({path: self.sizes[path] for path in paths},
                              {path: self.entries[path] for path in paths})

    def joined(self, other: 'ListedFiles') -> 'ListedFiles':
        return ListedFiles.of({**self.sizes, **other.sizes}, {**self.entries, **other.entries})


def list_pattern(file_pattern: str,
                 folders_seen: Optional[Dict[str, Tuple]] = None) -> ListedFiles:
    """The data files file_pattern matches (not the manifest), from one listing of its folder with
    sizes and one read of the manifest there; a shard the manifest lists and the pattern names
    that is missing from the listing is refused, naming it. A pattern over folders ('runs/*/x-*')
    is a glob, a stat a file (in parallel) and each folder's manifest. folders_seen: {folder:
    (its sizes, its manifest's shards)} that this build has read already, filled in here, so
    that comma-separated patterns in one folder list it once."""
    folder, name_glob = os.path.split(file_pattern)
    if common_files.is_glob(folder):  # one folder's manifest cannot speak for a pattern over folders
        matched = data_files(common_files.glob(file_pattern))
        return ListedFiles.of(dict(zip(matched, common_files.sizes(matched))),
                              _manifest_entries(matched))
    folders_seen = {} if folders_seen is None else folders_seen
    if folder not in folders_seen:
        in_folder = common_files.folder_sizes(folder)
        folders_seen[folder] = in_folder, _listed_shards(folder, shards.MANIFEST_NAME in in_folder)
    in_folder, listed = folders_seen[folder]
    matched = data_files(common_files.matching_names(list(in_folder), name_glob))
    manifest_path = os.path.join(folder, shards.MANIFEST_NAME)
    for name, entry in sorted((listed or {}).items()):
        if fnmatch.fnmatchcase(name, name_glob) and name not in in_folder:
            raise UserError(f'{os.path.join(folder, name)}: listed in {manifest_path} '
                            f'({entry["records"]} records) but missing; restore it, or run '
                            'prepare again')
    return ListedFiles.of(
        {os.path.join(folder, name): in_folder[name] for name in matched},
        {os.path.join(folder, name): (None, None) if listed is None else
         (manifest_path, listed.get(name)) for name in matched})


def part_of(files: List[str], paths: List[str]) -> List[str]:
    """paths (some of files), with what files' listing knew of them where it was one."""
    return files.part(paths) if _knows(files) else paths


def check_listed(files: List[str]) -> Callable:
    """Where a folder has a manifest.json, each file must be listed in it (else it is left
    over from an interrupted job) and be the size it lists (else it was cut short or
    damaged): refuse it, naming it, before reading anything. Returns record_reader's reader,
    from the same reading of the manifests."""
    return _checked(files)


def check_listed_samples(files: List[str]) -> Tuple[Callable, List[str]]:
    """check_listed's reader, and the files whose records are to be looked at: each one no
    manifest vouches for, and one shard of each split the manifests list (its other shards were
    written alike; the split's features, not a shard's, may differ from what a model reads)."""
    entries = _entries(files)
    reader = _checked(files)
    sampled_splits, samples = set(), []
    for path in files:
        manifest_path, entry = entries[path]
        split = (manifest_path, entry.get('split')) if entry else None
        if split not in sampled_splits:
            samples.append(path)
            if split is not None:
                sampled_splits.add(split)
    return reader, samples


def any_records(files: List[str]) -> bool:
    """Whether some file holds a record: the manifests say so without a request, else a file
    that is not empty does."""
    if any((entry or {}).get('records') for _, entry in _entries(files).values()):
        return True
    return any(size > 0 for size in _sizes(files, files))


def total_bytes(files: List[str]) -> int:
    """The files' bytes: as their manifests list them (checked by check_listed), else their
    listing's sizes, else stat."""
    entries = _entries(files)
    unlisted = [path for path, (_, entry) in entries.items() if 'bytes' not in (entry or {})]
    return (sum(entry['bytes'] for _, entry in entries.values() if 'bytes' in (entry or {}))
            + sum(_sizes(files, unlisted)))


def shard_records(files: List[str]) -> Optional[Tuple[List[int], bool]]:
    """(each file's records, whether prepare wrote them all shuffled across their whole split, so
    that each shard is a random sample of it) as the manifests list them; None unless they list
    every file's records."""
    entries = [entry or {} for _, entry in _entries(files).values()]
    if any('records' not in entry for entry in entries):
        return None
    return [entry['records'] for entry in entries], all(entry.get('shuffled') for entry in entries)


def record_reader(files: List[str]) -> Callable:
    """TFRecordDataset over the files as their manifests list them: GZIP where an entry says
    so (a user's compressed records read in place by `prepare examples`), else plain."""
    return _reader(_entries(files))


def _knows(files: List[str]) -> bool:
    return isinstance(files, ListedFiles) and files.entries is not None


def _entries(files: List[str]) -> Dict[str, Tuple[Optional[str], Optional[Dict]]]:
    return files.entries if _knows(files) else _manifest_entries(files)


def _sizes(files: List[str], paths: List[str]) -> List[int]:
    """The sizes of paths (some of files): from files' listing where it was one, else stat."""
    if _knows(files):
        return [files.sizes[path] for path in paths]
    return common_files.sizes(paths)


def _checked(files: List[str]) -> Callable:
    entries = _entries(files)
    for path, (manifest_path, entry) in entries.items():
        if manifest_path is not None and entry is None:
            raise UserError(f'{path}: not listed in {manifest_path}; it may be left over from an '
                            'interrupted or older prepare run: delete it or run prepare again')
    sized = [path for path, (_, entry) in entries.items() if 'bytes' in (entry or {})]
    try:
        sizes = _sizes(files, sized)  # older manifests list no sizes
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


def _listed_shards(folder: str, present: Optional[bool] = None) -> Optional[Dict[str, Dict]]:
    """{file name: its manifest entry (records, bytes), its 'split' and whether prepare shuffled
    that split's records across its shards ('shuffled'; not records read in place), or None
    without a manifest; present: whether a listing found one (else asked)."""
    path = os.path.join(folder, shards.MANIFEST_NAME)
    if not (common_files.exists(path) if present is None else present):
        return None
    try:
        manifest = common_files.read_json(path)
        return {s['file']: {**s, 'split': name, 'shuffled': not split.get('read_in_place')}
                for name, split in manifest['splits'].items() for s in split['shards']}
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f'{path}: unreadable manifest ({e}); run prepare again')
