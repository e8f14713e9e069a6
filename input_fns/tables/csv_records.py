"""CSV shards: one example a line, the feature floats then an integer label; no header.

The source documents' example data (write_example_split): rows of 1,024
standard-normal floats, label 1 when their sum is positive. Read with the shared
record pipeline: parallel interleave of TextLineDataset, shuffle, batch, then one
tf.io.decode_csv over the whole batch, prefetch.
"""
from typing import Optional

import numpy as np
import tensorflow as tf

from common import files
from common.errors import UserError
from input_fns.records import listed_files, pipeline, stream_shards

CSV_SUFFIX = '.csv'
FEATURE_KEY = 'inputs'
EXAMPLE_NUM_FEATURES = 1024
DECIMALS = 4  # written as %.4f: small files, and the label is computed on exactly these values


def format_row(values: np.ndarray, label: int) -> bytes:
    return (','.join(f'{v:.{DECIMALS}f}' for v in values) + f',{int(label)}\n').encode()


def example_rows(num_rows: int, num_features: int, seed: int):
    """(values float64 [rows, features] as they will be written, labels: sum of a row > 0)."""
    values = np.round(np.random.RandomState(seed).standard_normal((num_rows, num_features)),
                      DECIMALS)
    return values, (values.sum(axis=1) > 0).astype(np.int64)


def write_example_split(output_dir: str, split: str, num_shards: int, rows_per_shard: int,
                        num_features: int, seed: int):
    values, labels = example_rows(num_shards * rows_per_shard, num_features, seed)
    return stream_shards.write_split(
        output_dir, split, len(labels), lambda i: format_row(values[i], labels[i]),
        num_shards=num_shards, seed=seed, dataset='csv_example',
        features={'columns': f'{num_features} floats, then the label (1 if their sum > 0, else 0)'},
        sources=[f'generated: standard normal, seed {seed}'],
        extra={'num_features': num_features}, suffix=CSV_SUFFIX,
        open_writer=lambda path: files.open_file(path, 'wb'))


def parse_batch_fn(num_features: int):
    """[batch] lines -> ({'inputs': float32 [batch, num_features]}, int32 labels [batch])."""
    def parse_batch(lines):
        # Empty defaults make every column required: an empty field is an error, not a zero.
        record_defaults = ([tf.constant([], tf.float32)] * num_features
                           + [tf.constant([], tf.int32)])
        columns = tf.io.decode_csv(lines, record_defaults)
        labels = columns[-1]
        # The label is a class of a binary model: any other value would train on a wrong loss.
        binary = tf.debugging.assert_equal(
            tf.reduce_all(tf.logical_or(tf.equal(labels, 0), tf.equal(labels, 1))), True,
            message='a label is not 0 or 1')
        with tf.control_dependencies([binary]):
            labels = tf.identity(labels)
        return {FEATURE_KEY: tf.stack(columns[:-1], axis=1)}, labels

    return parse_batch


def check_csv_files(files, num_features: int) -> None:
    """Fails early, naming the file, on shards whose first line the parser would reject (each
    file no manifest vouches for, and a shard of each listed split)."""
    _, samples = listed_files.check_listed_samples(files)
    for path in samples:
        not_text = UserError(f'{path}: not a CSV text file (binary data on line 1); this model '
                             'reads CSV shards (one line an example: the features, then the label)')
        with tf.io.gfile.GFile(path, 'rb') as f:
            if b'\0' in f.read(4096):  # TFRecord framing has NULs and can be valid UTF-8
                raise not_text
        try:
            with tf.io.gfile.GFile(path, 'r') as f:
                line = f.readline().strip()
        except UnicodeDecodeError:
            raise not_text
        if not line:
            continue
        fields = line.split(',')
        if len(fields) != num_features + 1:
            raise UserError(f'{path}: line 1 has {len(fields)} columns; the model expects '
                            f'{num_features} features and a label ({num_features + 1} columns)')
        try:
            for field in fields[:-1]:
                float(field)
            int(fields[-1])
        except ValueError as e:
            raise UserError(f'{path}: line 1 is not {num_features} numbers and an integer '
                            f'label ({e})')


def make_input_fn(file_pattern: str, num_features: int, batch_size: int, training: bool,
                  seed: Optional[int] = None, flag_name: str = 'file pattern',
                  shuffle_buffer: int = pipeline.DEFAULT_SHUFFLE_BUFFER):
    """An Estimator input_fn over CSV shards; checks the files now, not mid-training."""
    files = pipeline.list_record_files(file_pattern, flag_name)
    check_csv_files(files, num_features)
    return pipeline.record_input_fn(files, parse_batch_fn(num_features), batch_size, training,
                                    seed, shuffle_buffer, reader=tf.data.TextLineDataset)
