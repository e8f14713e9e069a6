"""Shards' names, and the manifest.json that vouches for them: its splits, schema and entries.

input_fns/records/stream_shards.py writes every prepare's shards and lists them here: a split is in the
manifest only once all its shards are in place, and a split being rewritten is removed from it
first, so a killed job never leaves a manifest that describes shards which are not all there.
"""
import os
import time
from typing import Dict, Iterable, List, Optional

from common import files, paths
from common.atomic_writes import write_json_atomic

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


def split_entry(shards: List[Dict], skipped: int, features, sources: List[str], seed: int,
                extra: Optional[Dict] = None) -> Dict:
    """A split's manifest entry: its shards ({file, records, bytes}) and where they came from."""
    return {'num_records': sum(s['records'] for s in shards), 'num_skipped': skipped,
            'shards': shards, 'features': features, 'sources': sources, 'seed': seed,
            'written_at': time.strftime('%Y-%m-%dT%H:%M:%S%z'), **(extra or {})}
