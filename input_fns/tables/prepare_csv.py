"""`prepare csv`: a user's table (CSV files or an Excel workbook) -> tf.Example shards and their
schema, in one streaming pass: each batch of rows typed (input_fns/tables/csv_tables.py; a CSV's
whole columns at a time, input_fns/tables/csv_batches.py), encoded (example_batches.py; both in
worker processes beside this one where the source is big: batch_work.py), added to
the training split's statistics and taken by its split's writer (input_fns/tables/table_splits.py),
which writes the shards in a seeded random order over the whole split
(input_fns/records/stream_shards.py)."""
from typing import Dict, List, Optional

from absl import logging

from common.errors import UserError
from input_fns.records import file_patterns, split as data_split, stream_shards
from input_fns.tables import (batch_work, csv_tables, example_batches, held_out, table_reading,
                              table_schema, table_splits)


def prepare_csv(*, source: str, label: str, output_dir: str, column_types: Optional[str],
                task: Optional[str], na_values: Optional[List[str]], max_vocabulary: int,
                weight_column: Optional[str], validation_fraction: float, num_shards: int,
                num_eval_shards: int, seed: int, schema_from: Optional[str] = None,
                split: Optional[str] = None, delimiter: Optional[str] = None,
                decimal: Optional[str] = None, ignore_columns: Optional[List[str]] = None,
                date_format: Optional[str] = None, thousands: Optional[str] = None,
                encoding: Optional[str] = None, sheet: Optional[str] = None,
                float_overflow: Optional[str] = None) -> Dict:
    """Writes the 'train' (and 'validation') split of a CSV source, or every row to --split,
    and the schema; with --schema_from, the columns take that table's types, --thousands,
    --encoding, --na_values, --float_overflow and number styles (table_reading). The files are
    read as the first one is written, unless told (file_format)."""
    data_split.check_fraction(validation_fraction)
    known_types, trained = held_out.trained_schema(schema_from)
    label, task, weight_column, ignore_columns = held_out.trained_defaults(
        trained, label, task, weight_column, ignore_columns)
    if not label:
        raise UserError('--label is required for csv: the column to predict')
    paths = file_patterns.source_files(source, 'a CSV file (.csv, .csv.gz), an Excel workbook '
                                       '(.xlsx) or a glob of them', '*.csv')
    workers = batch_work.worker_count(paths)
    batch_work.start_early(workers)
    csv_format, taken = held_out.rows_format(
        paths[0], (trained or {}).get('csv_format', {}), delimiter=delimiter, decimal=decimal,
        thousands=thousands, encoding=encoding, sheet=sheet)
    logging.info('--source=%s: read as %s%s', source, csv_format.description(), (
        f' (as --schema_from\'s rows were: {" ".join(taken)})' if taken else '') + ('' if
        csv_format.workbook else ' (--delimiter, --decimal, --encoding say otherwise)'))
    reading = table_reading.TableReading.of_schema(trained, na_values, float_overflow)
    table = csv_tables.Table(paths, label, column_types, task, reading, known_types, csv_format,
                             ignore_columns, weight_column, date_format)
    stats = table_schema.TableStats(table.columns, table.dtypes, label, table.task,
                                    max_vocabulary, seed, weight_column, split or 'train',
                                    (schema_from, trained), table.date_formats)
    counts = table_splits.shard_counts(num_shards, num_eval_shards, validation_fraction, split)
    # The pool closes first: no worker is writing a shard when the temporaries are removed.
    with stream_shards.streamed_splits(output_dir, counts, seed, hold=not workers) as writers, \
            batch_work.worker_pool(workers) as pool:
        work = batch_work.BatchWork(table.column_typing(),
                                    example_batches.BatchEncoder(table.names, table.dtypes),
                                    table.label_index, validation_fraction, split, list(writers),
                                    seed, stats.statistics_of)
        batches = batch_work.worked_batches(table, work, pool)
        skipped = table_splits.write_batches(writers, batches, stats, label,
                                             f'--source={source}', split)
        schema = table.reading.record_in(stats.schema(table.ignored))
        schema['label']['missing'] = sum(skipped.values())
        features = dict(zip(table.names, table.dtypes))
        entries = {split: dict(skipped=skipped[split], features=features, sources=table.paths,
                               seed=seed,
                               extra={'skipped_because': 'the label is missing',
                                      'validation_fraction': validation_fraction,
                                      **stats.split_entry_extra(split)})
                   for split in writers}
        schema.update(source=source, csv_format=csv_format.to_json())
        return stream_shards.publish(output_dir, writers, entries, 'csv', schema, pool)
