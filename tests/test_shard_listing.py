"""Many shards at the cost of one listing (issue 71): the manifest vouches for each shard's
records and bytes, so an input_fn build lists the folder once, reads the manifest and stats each
shard (in parallel), and reads the records of one shard a split; a shard missing from the
listing, or not at its listed size, is still one line naming it."""
import os
import subprocess
import sys

import pytest

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


def test_an_input_fn_build_lists_once_and_stats_each_shard_once(s3_server, s3_bucket):
    for shards in (5, 50):
        run_prepare(prepare.prepare_csv_example, output_dir=f'{s3_bucket}/d{shards}',
                    num_shards=shards, num_eval_shards=1, rows_per_shard=1, seed=0)
    with in_front_of('s3', s3_server) as proxy:
        # The first build also probes the bucket and loads the S3 client: not compared.
        _, few, many = build_requests(proxy, [f'{s3_bucket}/d5/train-*',
                                              f'{s3_bucket}/d5/train-*',
                                              f'{s3_bucket}/d50/train-*'])
    more = {kind: many[kind] - few[kind] for kind in KINDS}
    # One stat a shard (tensorflow-io's is a HEAD and a LIST); nothing else grows: one listing,
    # the manifest, the first line of one shard a split. Before: eight requests a shard.
    assert more == {**dict.fromkeys(KINDS, 0), 'HEAD': 45, 'LIST': 45}, (few, many)


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
