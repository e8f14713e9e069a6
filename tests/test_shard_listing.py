"""Many shards at the cost of one listing (issue 71): the manifest vouches for each shard's
records and bytes, so an input_fn build lists the folder once with each file's size (a bucket's
own listing: 1,000 objects a request), reads the manifest and the records of one shard a split;
a shard missing from the listing, or not at its listed size, is still one line naming it."""
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from common import atomic_writes, files
from common.errors import UserError
from helpers import REPO, run_prepare
from input_fns.prepare import command as prepare
from input_fns.records import pipeline
from input_fns.tables import csv_records
from tests.store_faults import KINDS, in_front_of

# Builds the training input_fn of each pattern given, one for each line the test writes.
BUILDER = '''
import sys
from input_fns.tables import csv_records
for pattern in sys.argv[1:]:
    sys.stdin.readline()
    csv_records.make_input_fn(pattern, 1024, 8, training=True)
    print('built', flush=True)
'''


def requests_by_kind(proxy):
    counts = proxy.counts.as_dict()
    return {kind: counts.get(kind, {}).get('requests', 0) for kind in KINDS}


def build_requests(proxy, patterns):
    """The store requests of each input_fn build, by kind, in one process through proxy."""
    builder = subprocess.Popen([sys.executable, '-c', BUILDER, *patterns], cwd=REPO, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               env={**os.environ, 'PYTHONPATH': REPO})
    counts = []
    try:
        for _ in patterns:
            before = requests_by_kind(proxy)
            builder.stdin.write('\n')
            builder.stdin.flush()
            assert builder.stdout.readline().strip() == 'built'
            after = requests_by_kind(proxy)
            counts.append({kind: after[kind] - before[kind] for kind in KINDS})
    finally:
        builder.kill()
        builder.wait()
    return counts


def bucket_of_store(request, store):
    """(the test server, a fresh bucket) of store 's3' or 'gs'."""
    if store == 's3':
        return request.getfixturevalue('s3_server'), request.getfixturevalue('s3_bucket')
    return request.getfixturevalue('gcs_server'), request.getfixturevalue('gcs_bucket')


@pytest.mark.parametrize('store', ['s3', 'gs'])
def test_an_input_fn_build_asks_as_much_of_ten_times_the_shards(request, store):
    server, bucket = bucket_of_store(request, store)
    for shards in (5, 50):
        run_prepare(prepare.prepare_csv_example, output_dir=f'{bucket}/d{shards}',
                    num_shards=shards, num_eval_shards=1, rows_per_shard=1, seed=0)
    with in_front_of(store, server) as proxy:
        # The first build also probes the bucket and loads the S3 client: not compared.
        _, few, many, two_patterns = build_requests(proxy, [
            f'{bucket}/d5/train-*', f'{bucket}/d5/train-*', f'{bucket}/d50/train-*',
            f'{bucket}/d50/train-0000*,{bucket}/d50/train-0001*'])
    # One listing with sizes (one page up to 1,000 objects), the manifest, the first line of one
    # shard a split. Before: a stat a shard on top (on s3://, a HEAD and a LIST each).
    assert sum(few.values()) <= 8, few
    assert many == few, (few, many)
    assert two_patterns == few, (few, two_patterns)  # their one folder listed and read once


@pytest.mark.parametrize('store', ['s3', 'gs'])
def test_a_bucket_folder_is_listed_with_each_file_size(request, store):
    _, bucket = bucket_of_store(request, store)
    for name, data in (('f/a', b'abc'), ('f/b', b''), ('f/sub/c', b'12345'), ('g', b'1')):
        atomic_writes.write_bytes_atomic(f'{bucket}/{name}', data)
    assert files.folder_sizes(f'{bucket}/f') == {'a': 3, 'b': 0}  # not the subfolder's files
    assert files.folder_sizes(bucket) == {'g': 1}
    assert files.folder_sizes(f'{bucket}/none') == {}


def test_a_local_folder_is_listed_with_each_file_size(tmp_path):
    (tmp_path / 'a').write_bytes(b'abc')
    (tmp_path / 'sub').mkdir()
    (tmp_path / 'sub' / 'c').write_bytes(b'12345')
    assert files.folder_sizes(str(tmp_path)) == {'a': 3}
    assert files.folder_sizes(str(tmp_path / 'none')) == {}


def test_a_folder_elsewhere_is_listed_then_each_file_asked_its_size(tmp_path):
    folder = f'ram://{tmp_path}/f'
    atomic_writes.write_bytes_atomic(f'{folder}/a', b'abc')
    atomic_writes.write_bytes_atomic(f'{folder}/b', b'')
    assert files.folder_sizes(folder) == {'a': 3, 'b': 0}
    assert files.folder_sizes(f'ram://{tmp_path}/none') == {}


@pytest.mark.parametrize('store', ['s3', 'gs'])
def test_a_bucket_shard_altered_or_missing_is_named(request, store):
    _, bucket = bucket_of_store(request, store)
    out = f'{bucket}/data'
    run_prepare(prepare.prepare_csv_example, output_dir=out, num_shards=4, num_eval_shards=1,
                rows_per_shard=2, num_features=4, seed=0)
    altered = f'{out}/train-00003-of-00004.csv'  # not the split's sampled shard
    atomic_writes.write_bytes_atomic(altered, b'1,2\n')
    with pytest.raises(UserError, match=f'{altered}: 4 bytes, but .* it was cut short or damaged'):
        csv_records.make_input_fn(f'{out}/train-*', 4, 2, training=True)
    tf.io.gfile.remove(f'{out}/train-00002-of-00004.csv')
    with pytest.raises(UserError, match=r'train-00002-of-00004.csv: listed in .*manifest.json '
                                        r'\(2 records\) but missing; restore it'):
        csv_records.make_input_fn(f'{out}/train-*', 4, 2, training=True)


def csv_shards(tmp_path, shards=4):
    out = str(tmp_path / 'data')
    run_prepare(prepare.prepare_csv_example, output_dir=out, num_shards=shards,
                num_eval_shards=1, rows_per_shard=2, num_features=4, seed=0)
    return out


def test_a_shard_missing_from_the_listing_is_named(tmp_path):
    out = csv_shards(tmp_path)
    os.remove(os.path.join(out, 'train-00002-of-00004.csv'))
    with pytest.raises(UserError, match=r'train-00002-of-00004.csv: listed in .*manifest.json '
                                        r'\(2 records\) but missing; restore it'):
        pipeline.list_record_files(f'{out}/train-*', '--train_files')
    # A pattern that names some shards on purpose asks only for those.
    assert len(pipeline.list_record_files(f'{out}/train-0000[01]-*')) == 2


def test_a_shard_not_read_is_still_checked_for_its_size(tmp_path):
    out = csv_shards(tmp_path)
    shard = os.path.join(out, 'train-00003-of-00004.csv')  # not the split's sampled shard
    with open(shard, 'r+b') as f:
        f.truncate(5)
    with pytest.raises(UserError, match=f'{shard}: 5 bytes, but .* it was cut short or damaged'):
        csv_records.make_input_fn(f'{out}/train-*', 4, 2, training=True)
