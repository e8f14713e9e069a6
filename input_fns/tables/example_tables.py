"""`prepare examples`: a user's TFRecord files of tf.Example, described by a schema.

The features, their types and their list forms come from a sample of the records
(input_fns/tables/example_values.py: int64_list int, float_list float, bytes_list text; one
value, a fixed-length list or one of any length); the statistics from every record.
Without --output_dir the records are read where they are: manifest.json, written beside them,
lists them as one split (--split, default train) with their sizes, and the schema. With
--output_dir they are resharded into train and validation splits by a hash of each record,
as `prepare csv` writes them, or every record into --split. --schema_from (held-out records)
takes the label, task and weight of the data a model was trained on, and refuses a feature of
another type or a class that data lacks.
"""
import itertools
import os
import re
from typing import Dict, Iterator, List, Optional, Tuple

import tensorflow as tf
from google.protobuf.message import DecodeError

from common import atomic_writes, files, paths
from common.errors import op_error_summary, UserError
from features import free_text, iso_dates, value_lists
from input_fns.records import file_patterns, shards, split as data_split, stream_shards
from input_fns.tables import (column_choice, example_values, held_out, table_schema,
                              table_splits)

SAMPLE_RECORDS = 10_000
GZIP_MAGIC = b'\x1f\x8b'


def manifest_folder(source: str) -> str:
    return os.path.dirname(source) or '.'


def _compression(path: str) -> str:
    with files.open_file(path, 'rb') as f:
        return 'GZIP' if f.read(2) == GZIP_MAGIC else ''


def _records(path_list: List[str]) -> Iterator[Tuple[str, int, tf.train.Example, bytes]]:
    """(file, record number, the parsed Example, its bytes) of every record."""
    for path in path_list:
        dataset = tf.data.TFRecordDataset(path, compression_type=_compression(path))
        number = 0
        try:
            for number, serialized in enumerate(dataset.as_numpy_iterator(), 1):
                yield path, number, _parse(path, number, serialized), serialized
        except tf.errors.OpError as e:
            # Eager iteration wraps the cause: '{{function_node ...}} CAUSE [Op:...] name: '.
            cause = re.sub(r'\{\{function_node [^}]*\}\}\s*|\s*\[Op:.*$', '',
                           op_error_summary(e))
            raise UserError(f'{path}: not a readable TFRecord file after record {number} '
                            f'({cause}); give TFRecord files of tf.Example (plain or GZIP)'
                            ) from None


def _parse(path: str, number: int, serialized: bytes) -> tf.train.Example:
    try:
        example = tf.train.Example.FromString(serialized)
    except DecodeError:
        example = None
    if example is None or not example.features.feature:
        raise UserError(f'{path} record {number}: not a tf.Example (no features in it); give '
                        'TFRecord files of tf.train.Example records')
    return example


def prepare_examples(*, source: str, label: str, output_dir: Optional[str], task: Optional[str],
                     max_vocabulary: int, weight_column: Optional[str], split: Optional[str],
                     validation_fraction: float, num_shards: int, num_eval_shards: int, seed: int,
                     schema_from: Optional[str] = None,
                     ignore_columns: Optional[List[str]] = None) -> Dict:
    """Describes the records in place as one split, or reshards them into --output_dir: train
    and validation, or every record into --split. With --schema_from (a held-out set): the
    label, task and weight of the data a model was trained on, and the same feature types."""
    known_types, trained = held_out.trained_schema(schema_from)
    label, task, weight_column, ignore_columns = held_out.trained_defaults(
        trained, label, task, weight_column, ignore_columns)
    if not label:
        raise UserError('--label is required for examples: the feature to predict')
    path_list = file_patterns.source_files(source, 'a glob of TFRecord files', '*')
    sample = [(path, number, example) for path, number, example, _ in
              itertools.islice(_records(path_list), SAMPLE_RECORDS)]
    columns, dtypes, forms, ignored = _features_of(sample, label, f'--source={source}', trained,
                                                   ignore_columns, weight_column)
    label_index = columns.index(label)
    typed_sample = [example_values.typed(example, path, number, columns, dtypes, forms)
                    for path, number, example in sample]
    present = [[value for value in column if value is not None] for column in zip(*typed_sample)]
    dtypes = [_text_type(name, values, known_types)
              if dtype == 'string' and name != label and name not in forms
              else dtype for name, dtype, values in zip(columns, dtypes, present)]
    _check_trained_types(columns, dtypes, known_types, schema_from, f'--source={source}')
    column_choice.warn_of_identifiers(columns, dtypes, present, label, f'--source={source}')
    label_values = present[label_index]
    task = task or table_schema.infer_task(dtypes[label_index], label_values)
    statistics_of = split or 'train'
    stats = table_schema.TableStats(columns, dtypes, label, task, max_vocabulary, seed,
                                    weight_column, statistics_of, (schema_from, trained),
                                    forms=forms)
    if not output_dir:
        return _describe_in_place(path_list, stats, columns, dtypes, statistics_of, source,
                                  ignored)
    data_split.check_fraction(validation_fraction)
    rows = ((record, example_values.typed(example, path, number, columns, dtypes, forms), record)
            for path, number, example, record in _records(path_list))
    counts = table_splits.shard_counts(num_shards, num_eval_shards, validation_fraction, split)
    with stream_shards.streamed_splits(output_dir, counts, seed) as writers:
        skipped = table_splits.write_table(writers, rows, stats, label, validation_fraction,
                                           f'--source={source}', split)
        entries = {name: dict(skipped=skipped[name], features=dict(zip(columns, dtypes)),
                              sources=path_list, seed=seed,
                              extra={'skipped_because': 'the label is missing',
                                     **stats.split_entry_extra(name)})
                   for name in writers}
        schema = {**stats.schema(ignored), 'source': source}
        return stream_shards.publish(output_dir, writers, entries, 'examples', schema)


def _features_of(sample, label: str, where: str, trained: Optional[Dict], ignore_columns,
                 weight_column) -> Tuple[List[str], List[str], Dict, List[str]]:
    """The features the records are read as: (names, types, list forms, those ignored); with
    --schema_from, a list feature's form is the training data's."""
    columns, dtypes, forms = example_values.column_types(
        [example for _, _, example in sample], label, where)
    ignored = column_choice.ignored_columns(ignore_columns, columns, label, weight_column)
    kept = [(name, dtype) for name, dtype in zip(columns, dtypes) if name not in ignored]
    forms = {name: found for name, found in forms.items() if name not in ignored}
    if trained:
        names = {name for name, _ in kept}
        forms = {**forms, **{entry['name']: value_lists.form(entry)
                             for entry in trained['features'] if entry['name'] in names}}
        forms = {name: found for name, found in forms.items() if found is not None}
    return [name for name, _ in kept], [dtype for _, dtype in kept], forms, ignored


def _text_type(name: str, values: List[str], known_types: Dict[str, str]) -> str:
    """'date' for a text feature of ISO dates, 'text' for free text, else 'string'; the training
    data's, if it has one of them (--schema_from)."""
    if known_types.get(name) in table_schema.TEXT_DTYPES:
        return known_types[name]
    if iso_dates.is_dates(values):
        return 'date'
    return 'text' if free_text.is_free_text(values) else 'string'


def _check_trained_types(columns, dtypes, known_types, schema_from, where) -> None:
    """A feature the model was trained on must hold the same kind of value here: the model parses
    it as that type (a float_list read as int64 stops evaluation at its first batch)."""
    for name, dtype in zip(columns, dtypes):
        if known_types.get(name, dtype) != dtype:
            raise UserError(f'{where}: feature {name!r} holds {dtype} values, where the training '
                            f'data (--schema_from={schema_from}) has {known_types[name]}; write '
                            'it as the training records do')


def _describe_in_place(path_list, stats, columns, dtypes, split, source, ignored) -> Dict:
    """The manifest beside the user's records: them as one split, and the schema."""
    folder = manifest_folder(source)
    if any(os.path.dirname(path) != os.path.dirname(path_list[0]) for path in path_list):
        raise UserError(f'--source={source}: files in several folders cannot be read in place '
                        '(the manifest lists the files of its own folder); pass --output_dir to '
                        'reshard them')
    compressions = {path: _compression(path) for path in path_list}
    if len(set(compressions.values())) > 1:
        raise UserError(f'--source={source}: some files are GZIP-compressed and some are not; '
                        'a split is read one way: pass --output_dir to reshard them')
    counts = dict.fromkeys(path_list, 0)
    chunk = []
    for path, number, example, _ in _records(path_list):
        values = example_values.typed(example, path, number, columns, dtypes, stats.forms)
        if values[stats.label_index] is None:
            raise UserError(f'{path} record {number}: no {columns[stats.label_index]!r} (the '
                            'label); pass --output_dir to reshard the records without such ones')
        counts[path] += 1
        chunk.append(values)
        if len(chunk) == table_splits.CHUNK_ROWS:
            stats.add_rows(chunk)
            chunk = []
    if chunk:
        stats.add_rows(chunk)
    if stats.classes:
        stats.classes.refuse_untrained(split, f'--source={source}')
    # The trainer's reader takes GZIP from here (listed_files); plain files list none.
    listed = [{'file': os.path.basename(path), 'records': counts[path], 'bytes': files.size(path),
               **({'compression': compressions[path]} if compressions[path] else {})}
              for path in path_list]
    manifest = shards.read_manifest(folder)
    if shards.takes_schema(manifest, [split]):
        manifest['schema'] = {**stats.schema(ignored), 'source': source}
    manifest.setdefault('splits', {})[split] = shards.split_entry(
        listed, 0, dict(zip(columns, dtypes)), path_list, 0,
        {'read_in_place': True, **stats.split_entry_extra(split)})
    manifest.setdefault('dataset', 'examples')
    atomic_writes.write_json_atomic(paths.join(folder, shards.MANIFEST_NAME), manifest)
    return {split: manifest['splits'][split]}
