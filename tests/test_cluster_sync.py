"""./run.sh cluster --sync: a chief and a worker all-reduce every step (MultiWorkerMirroredStrategy
under tf.estimator), an evaluator evaluates; checkpoints move between sync and one device."""
import os
import re

import pytest

from helpers import run_module
from test_cluster import cluster_args
from trainer.model_dir import checkpoints
from trainer.model_dir.ledger import Ledger

pytestmark = pytest.mark.slow  # loopback clusters: ./run.sh test-slow


def sync_cluster(model_dir, shards, steps, *extra):
    return run_module('trainer.cluster.local_cluster', '--sync', '--workers=1',
                      '--ps=0', *cluster_args(model_dir, shards, steps,
                                                      '--save_checkpoints_steps=10', *extra))


def steps_of(model_dir):
    return [step for step, _ in checkpoints.list_checkpoints(str(model_dir))]


def test_sync_cluster_trains_evaluates_and_resumes_either_way(digit_shards, tmp_path):
    model_dir = tmp_path / 'model'
    result = sync_cluster(model_dir, digit_shards, 20)
    out = result.stdout
    assert re.search(r'^\[chief\] .*synchronous all-reduce over 2 replicas on 2 workers', out,
                     re.MULTILINE)
    assert re.search(r'^\[worker0\] .*Collective all_reduce tensors: .*group_size = 2', out,
                     re.MULTILINE)
    shares = dict(re.findall(r'^\[(\w+)\] .*training worker \d of 2 reads its share: (.*)$', out,
                             re.MULTILINE))
    assert sorted(shares) == ['chief', 'worker0']
    assert sorted(' '.join(shares.values()).split()) == sorted(
        f for f in os.listdir(digit_shards.dir) if f.startswith('train-'))
    # One global step per all-reduced step: the chief saved 0, 10, 20 and nothing past it.
    assert steps_of(model_dir)[-1] == 20
    assert [e.step for e in Ledger(str(model_dir), 'val').entries()][-1] == 20
    assert 'every task finished: chief, worker0, evaluator' in result.stderr
    assert not os.path.exists(model_dir / 'tmp_worker_0')  # the worker's copies, removed

    # Written under MultiWorkerMirroredStrategy, resumed on one device...
    one = run_module('trainer.main', '--mode=train', f'--model_dir={model_dir}',
                     f'--train_files={digit_shards.train_pattern}', '--train_steps=30',
                     '--batch_size=16', '--save_checkpoints_steps=10')
    assert 'Restoring parameters from' in one.stderr and 'model.ckpt-20' in one.stderr
    assert steps_of(model_dir)[-1] == 30
    # ... and back: both sync tasks restore the one-device checkpoint.
    again = sync_cluster(model_dir, digit_shards, 40, '--noevaluator')
    for role in ('chief', 'worker0'):
        assert re.search(rf'^\[{role}\] .*Restoring parameters from .*model\.ckpt-30$',
                         again.stdout, re.MULTILINE)
    assert steps_of(model_dir)[-1] == 40
