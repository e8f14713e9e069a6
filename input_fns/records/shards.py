"""Writing TFRecord shards atomically, and the manifest.json that vouches for them.

A shard is written under a temporary name and renamed when complete; a split is
recorded in manifest.json only after all its shards are in place. A split being
rewritten is first removed from the manifest, so a killed job never leaves a
manifest that describes shards which are not all there.
"""
import os
import time
from typing import Callable, Dict, Iterable, List, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from common import files, paths, progress
from common.files import write_json_atomic

MANIFEST_NAME = 'manifest.json'
SHARD_SUFFIX = '.tfrecord'


def shard_name(split: str, index: int, num_shards: int, suffix: str = SHARD_SUFFIX) -> str:
    return f'{split}-{index:05d}-of-{num_shards:05d}{suffix}'


def read_manifest(output_dir: str) -> Dict:
    path = paths.join(output_dir, MANIFEST_NAME)
    if not files.exists(path):
        return {'splits': {}}
    return files.read_json(path)


def write_manifest(output_dir: str, manifest: Dict) -> None:
    write_json_atomic(paths.join(output_dir, MANIFEST_NAME), manifest)


def _set_manifest_fields(output_dir: str, **fields) -> None:
    manifest = read_manifest(output_dir)
    manifest.update(fields)
    write_manifest(output_dir, manifest)


def _set_manifest_split(output_dir: str, split: str, entry: Optional[Dict],
                        dataset: str) -> None:
    manifest = read_manifest(output_dir)
    manifest['dataset'] = dataset
    manifest.setdefault('splits', {})
    if entry is None:
        manifest['splits'].pop(split, None)
    else:
        manifest['splits'][split] = entry
    write_manifest(output_dir, manifest)


def update_split(output_dir: str, split: str, entry: Dict) -> None:
    """Replaces a written split's manifest entry (e.g. to add what was skipped)."""
    _set_manifest_split(output_dir, split, entry, read_manifest(output_dir).get('dataset'))


def set_source_root(output_dir: str, root: str) -> None:
    """Records the folder the records came from (the generator pair sampler reads it)."""
    _set_manifest_fields(output_dir,
                         source_root=os.path.abspath(root) if paths.is_local(root) else root)


def takes_schema(manifest: Dict, splits: Iterable[str]) -> bool:
    """Whether writing these splits sets the manifest's schema: the training split's does; a
    held-out split's (a test set beside the training data) only where there is none yet."""
    return 'train' in splits or 'schema' not in manifest


def set_schema(output_dir: str, schema: Dict) -> None:
    """Records what the data is (manifest.json's 'schema': its 'kind', features, classes...), for
    the models built from it (models.registry.ModelSpec.schema_kind)."""
    _set_manifest_fields(output_dir, schema=schema)


def remove_stale_shards(output_dir: str, split: str, keep: Iterable[str], suffix: str) -> None:
    keep = set(keep)
    for path in files.glob(paths.join(output_dir, f'{split}-*-of-*{suffix}')):
        if os.path.basename(path) not in keep:
            files.remove(path)


def log_progress(split: str, done: int, total: int, rate: progress.RecentRate) -> None:
    """'train: 12,000/54,000 records (22%), 3,100/s, ETA 13s'."""
    per_sec = rate.per_sec()
    parts = [f'{split}: {progress.fraction_text(done, total, "records")}']
    if per_sec:
        parts.append(f'{per_sec:,.0f}/s')
    parts.append(progress.eta_text(done, total, per_sec))
    logging.info(', '.join(part for part in parts if part))


def write_split(output_dir: str,
                split: str,
                num_records: int,
                make_record: Callable[[int], Optional[bytes]],
                num_shards: int,
                seed: int,
                dataset: str,
                features: Dict[str, str],
                sources: List[str],
                extra: Optional[Dict] = None,
                suffix: str = SHARD_SUFFIX,
                open_writer: Callable = tf.io.TFRecordWriter) -> Dict:
    """Writes records 0..num_records-1 in a seeded random order into num_shards files.

    make_record(i) returns a serialized tf.train.Example, or None to skip record i
    (counted in the manifest as skipped). Returns the split's manifest entry.
    Other formats: open_writer(path) gives a context manager with write(bytes) (for
    CSV, a file opened 'wb', records being lines), and suffix ends the file names.
    """
    if num_shards < 1:
        raise ValueError(f'num_shards must be >= 1, got {num_shards}')
    files.makedirs(output_dir)
    files.remove_abandoned_temporaries(output_dir)
    _set_manifest_split(output_dir, split, None, dataset)

    order = np.random.RandomState(seed).permutation(num_records)
    bounds = np.linspace(0, num_records, num_shards + 1).astype(int)
    shards, skipped = [], 0
    progress_log = _SplitProgress(split, num_records)
    for shard_index in range(num_shards):
        name = shard_name(split, shard_index, num_shards, suffix)
        record_indices = order[bounds[shard_index]:bounds[shard_index + 1]]
        written = _write_shard(paths.join(output_dir, name), record_indices, make_record,
                               open_writer, progress_log)
        skipped += len(record_indices) - written
        # The input check compares sizes with these: a shard cut short is caught before reading.
        shards.append({'file': name, 'records': written,
                       'bytes': files.size(paths.join(output_dir, name))})
        logging.info('%s: wrote %s (%d records, shard %d/%d)', split, name, written,
                     shard_index + 1, num_shards)

    remove_stale_shards(output_dir, split, [s['file'] for s in shards], suffix)
    entry = split_entry(shards, skipped, features, sources, seed, extra)
    _set_manifest_split(output_dir, split, entry, dataset)
    logging.info('%s: %d records in %d shards under %s (%.1fs)', split, entry['num_records'],
                 num_shards, output_dir, time.time() - progress_log.start_time)
    return entry


def split_entry(shards: List[Dict], skipped: int, features, sources: List[str], seed: int,
                extra: Optional[Dict] = None) -> Dict:
    """A split's manifest entry: its shards ({file, records, bytes}) and where they came from."""
    return {'num_records': sum(s['records'] for s in shards), 'num_skipped': skipped,
            'shards': shards, 'features': features, 'sources': sources, 'seed': seed,
            'written_at': time.strftime('%Y-%m-%dT%H:%M:%S%z'), **(extra or {})}


class _SplitProgress:
    """Counts the records of a split as they are made, logging every 5 s."""

    def __init__(self, split: str, total: int):
        self.split, self.total, self.done = split, total, 0
        self.start_time = self._last_report = time.time()
        self._rate = progress.RecentRate()
        self._rate.add(0, self.start_time)

    def count_one(self) -> None:
        self.done += 1
        if time.time() - self._last_report > 5:
            self._last_report = time.time()
            self._rate.add(self.done, self._last_report)
            log_progress(self.split, self.done, self.total, self._rate)


def _write_shard(final_path: str, record_indices, make_record: Callable[[int], Optional[bytes]],
                 open_writer: Callable, progress_log: _SplitProgress) -> int:
    """Writes one shard whole (files.written_in_place); returns the records written
    (make_record's Nones are skipped)."""
    written = 0
    with files.written_in_place(final_path) as temp_path:
        with open_writer(temp_path) as writer:
            for record_index in record_indices:
                record = make_record(int(record_index))
                progress_log.count_one()
                if record is not None:
                    writer.write(record)
                    written += 1
    return written
