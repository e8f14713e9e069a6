"""Shards written from a stream of records (a CSV read once, records resharded), with the schema.

shards.write_split makes records by index in a seeded order; a stream of unknown length is
dealt instead, record by record, round-robin into each split's shards, all open at once under
temporary names. Nothing in output_dir changes until the stream has been read to its end
without error: then the manifest forgets the splits, the shards are renamed into place, and
the manifest lists them and the schema in one write. A bad row found midway (or a kill) leaves
the data prepared before as it was.
"""
import contextlib
from typing import Dict, List

import tensorflow as tf
from absl import logging

from common import files, paths, termination
from input_fns.records import shards


class SplitWriter:
    """One split's shards, open for writing; write(record) deals records round-robin."""

    def __init__(self, output_dir: str, split: str, num_shards: int):
        self.output_dir, self.split = output_dir, split
        self.names = [shards.shard_name(split, index, num_shards) for index in range(num_shards)]
        self.final_paths = [paths.join(output_dir, name) for name in self.names]
        self.temporaries = [files.Temporary(path) for path in self.final_paths]
        self.counts = [0] * num_shards
        self.written = 0
        self._writers = []

    def open(self) -> None:
        self._writers = [tf.io.TFRecordWriter(temporary.path) for temporary in self.temporaries]

    def write(self, record: bytes) -> None:
        index = self.written % len(self._writers)
        self._writers[index].write(record)
        self.counts[index] += 1
        self.written += 1

    def close(self) -> None:
        for writer in self._writers:
            writer.close()
        self._writers = []

    def remove_temporaries(self) -> None:
        for temporary in self.temporaries:
            temporary.discard()

    def publish(self) -> List[Dict]:
        """Renames the shards into place; their manifest entries ({file, records, bytes})."""
        for temporary in self.temporaries:
            temporary.put_in_place()
        shards.remove_stale_shards(self.output_dir, self.split, self.names, shards.SHARD_SUFFIX)
        return [{'file': name, 'records': count, 'bytes': files.size(path)}
                for name, count, path in zip(self.names, self.counts, self.final_paths)]


@contextlib.contextmanager
def streamed_splits(output_dir: str, shard_counts: Dict[str, int]):
    """{split: SplitWriter} to write records into; on an error every temporary is removed."""
    files.makedirs(output_dir)
    files.remove_abandoned_temporaries(output_dir)
    writers = {split: SplitWriter(output_dir, split, count) for split, count in shard_counts.items()}
    try:
        for writer in writers.values():
            writer.open()
        yield writers
        for writer in writers.values():
            writer.close()
    except BaseException:
        for writer in writers.values():
            writer.close()
            writer.remove_temporaries()
        raise


def publish(output_dir: str, writers: Dict[str, SplitWriter], entries: Dict[str, Dict],
            dataset: str, schema: Dict) -> Dict[str, Dict]:
    """Puts the written shards in place and lists them, with the schema, in manifest.json.

    entries: {split: shards.split_entry's arguments but the shards}.
    """
    with termination.finish_first(f'putting the shards in place under {output_dir}'):
        manifest = shards.read_manifest(output_dir)
        for split in writers:
            manifest.setdefault('splits', {}).pop(split, None)
        shards.write_manifest(output_dir, manifest)
        for split, writer in writers.items():
            entries[split] = shards.split_entry(writer.publish(), **entries[split])
        manifest['dataset'] = dataset
        if shards.takes_schema(manifest, writers):
            manifest['schema'] = schema
        manifest['splits'].update(entries)
        shards.write_manifest(output_dir, manifest)
    for split, entry in entries.items():
        logging.info('%s: %d records in %d shards under %s', split, entry['num_records'],
                     len(entry['shards']), output_dir)
    return entries
