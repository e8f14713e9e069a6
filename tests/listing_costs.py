"""What many shards cost before the first training step and the first evaluation (issue 71): the
seconds and the store requests of `trainer --mode=train --train_steps=1` and `--mode=evaluate`
of csv_mlp over `prepare csv_example` shards, on s3:// (moto) and gs:// (fake-gcs-server), every
request delayed by --latency_ms in tests/store_faults.py's proxy.

  ./run.sh python -m tests.listing_costs --shards=20,2000 [--stores=s3,gs] [--repos=A,B]

--repos runs the trainers of other checkouts (the same .venv) on the same shards, one after
the other, to compare commits in one run. Prepare
writes to the server directly (not through the proxy): only the trainer's requests are counted.
Prints one JSON line a run (with the requests by kind), then a table.
"""
import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from tests import gcs_server, s3_server
from tests.store_faults import in_front_of

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The line each measured command reaches: the first training step logged, the metrics printed.
FIRST_STEP = re.compile(r'loss = .*step = \d+|step 1\b')
RESULT = re.compile(r'^\{.*"global_step"')


@contextlib.contextmanager
def store_server(store, work):
    """(the server, a new bucket's root URL) of store 's3' or 'gs'."""
    if store == 's3':
        with s3_server.running_server(os.path.join(work, 'moto.log')) as server:
            yield server, 's3://' + server.make_bucket('listing')
    else:
        with gcs_server.running_server(work) as server:
            yield server, 'gs://' + server.make_bucket('listing')


def requests_by_kind(proxy):
    return {kind: row['requests'] for kind, row in proxy.counts.as_dict().items()}


def timed_run(argv, repo, proxy, until):
    """Runs python -m argv in repo; returns (seconds, requests, requests by kind) from its start
    to the first output line matching until (or its exit); raises if it exits with an error."""
    before = requests_by_kind(proxy)
    started = time.time()
    process = subprocess.Popen([sys.executable, '-m', *argv], cwd=repo, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, 'PYTHONPATH': repo})
    reached, output = [], []
    for line in process.stdout:
        output.append(line)
        if not reached and until.search(line):
            reached.append((time.time() - started, requests_by_kind(proxy)))
    process.wait()
    if process.returncode != 0:
        raise RuntimeError(f'{argv} exited {process.returncode}:\n{"".join(output[-30:])}')
    secs, after = reached[0] if reached else (time.time() - started, requests_by_kind(proxy))
    by_kind = {kind: count - before.get(kind, 0) for kind, count in sorted(after.items())
               if count - before.get(kind, 0)}
    return round(secs, 1), sum(by_kind.values()), by_kind


def measure(store, shard_counts, repos, latency_secs, work):
    rows = []
    with store_server(store, work) as (server, root):
        for shards in shard_counts:
            data = f'{root}/data{shards}'
            subprocess.run([sys.executable, '-m', 'input_fns.prepare', 'csv_example',
                            f'--output_dir={data}', f'--num_shards={shards}',
                            f'--num_eval_shards={shards}', '--rows_per_shard=1'],
                           cwd=REPO, check=True, capture_output=True, timeout=1800)
            for number, repo in enumerate(repos):
                model_dir = f'{root}/model{shards}-{number}'
                with in_front_of(store, server, latency_secs=latency_secs) as proxy:
                    train = timed_run(['trainer.main', '--model=csv_mlp', '--mode=train',
                                       f'--model_dir={model_dir}',
                                       f'--train_files={data}/train-*', '--train_steps=1',
                                       '--batch_size=8'], repo, proxy, FIRST_STEP)
                    evaluate = timed_run(['trainer.main', '--mode=evaluate',
                                          f'--model_dir={model_dir}', '--eval_name=validation',
                                          f'--eval_files={data}/validation-*',
                                          '--batch_size=64'], repo, proxy, RESULT)
                row = {'store': store, 'shards': shards, 'repo': repo, 'train_secs': train[0],
                       'train_requests': train[1], 'eval_secs': evaluate[0],
                       'eval_requests': evaluate[1], 'train_by_kind': train[2],
                       'eval_by_kind': evaluate[2]}
                print(json.dumps(row), flush=True)
                rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--shards', default='20,2000')
    parser.add_argument('--stores', default='s3,gs')
    parser.add_argument('--latency_ms', type=float, default=20)
    parser.add_argument('--repos', default=REPO, help='the checkouts whose trainers run, by commas')
    args = parser.parse_args()
    rows = []
    for store in args.stores.split(','):
        with tempfile.TemporaryDirectory() as work:
            rows += measure(store, [int(n) for n in args.shards.split(',')],
                            args.repos.split(','), args.latency_ms / 1000, work)
    print(f'{"store":<6}{"shards":>7}{"train s":>9}{"requests":>9}{"eval s":>8}{"requests":>9}  repo')
    for row in rows:
        print(f'{row["store"]:<6}{row["shards"]:>7}{row["train_secs"]:>9}'
              f'{row["train_requests"]:>9}{row["eval_secs"]:>8}{row["eval_requests"]:>9}  '
              f'{row["repo"]}')


if __name__ == '__main__':
    main()
