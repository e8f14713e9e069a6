"""trainer.cluster.local_cluster: chief, 2 workers, a parameter server and an evaluator on loopback."""
import os
import re

import pytest

from helpers import run_module
from trainer.model_dir import checkpoints
from trainer.model_dir.ledger import Ledger

pytestmark = pytest.mark.slow  # a whole loopback cluster: ./run.sh test-slow

ROLES = ('chief', 'worker0', 'worker1', 'ps0', 'evaluator')  # with --workers=2


def cluster_args(model_dir, shards, steps, *extra):
    return [f'--model_dir={model_dir}', f'--train_files={shards.train_pattern}',
            f'--eval_files={shards.validation_pattern}', f'--train_steps={steps}', '--batch_size=16',
            '--log_every_n_steps=10', '--eval_name=val', *extra]


def test_cluster_trains_to_its_step_count_evaluates_and_exports(digit_shards, tmp_path):
    model_dir, export_dir = tmp_path / 'model', tmp_path / 'exports'
    result = run_module('trainer.cluster.local_cluster', *cluster_args(
        model_dir, digit_shards, 60, '--workers=2', '--save_checkpoints_steps=20',
        f'--export_dir={export_dir}'))
    lines = result.stdout.splitlines()
    assert lines and all(re.match(r'\[(chief|worker[01]|ps0|evaluator)\] ', line) for line in lines)
    assert {line.split(']')[0][1:] for line in lines} == set(ROLES)

    # Each training task read its own share of the 4 train shards.
    shares = {role: share.split() for role, share in re.findall(
        r'^\[(\w+)\] .*training worker \d of 3 reads its share: (.*)$', result.stdout, re.MULTILINE)}
    assert sorted(shares) == ['chief', 'worker0', 'worker1']
    files = [name for share in shares.values() for name in share]
    assert sorted(files) == sorted(f for f in os.listdir(digit_shards.dir) if f.startswith('train-'))

    final_step = checkpoints.list_checkpoints(str(model_dir))[-1][0]
    assert final_step >= 60
    entries = Ledger(str(model_dir), 'val').entries()
    steps = [e.step for e in entries]
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == final_step
    assert all(e.status == 'evaluated' for e in entries)
    assert 'evaluated the final checkpoint' in result.stdout
    # Exports are named by the global step inside the checkpoint, past the name's on a cluster.
    best = min(entries, key=lambda e: e.metrics['loss'])
    best_step = str(best.metrics['global_step'])
    assert (export_dir / 'best').read_text() == best_step + '\n'
    assert os.path.exists(export_dir / best_step / 'export_complete.json')
    exports = [name for name in os.listdir(export_dir) if name.isdigit()]
    assert result.stdout.count('] exported ') == len(exports)  # each once
    # The parameter server left by itself once the chief wrote train_finished.json.
    assert re.search(r'^\[ps0\] .*training finished at step \d+; parameter server done$',
                     result.stdout, re.MULTILINE)
    assert 'every task finished: ps0, chief, worker0, worker1, evaluator' in result.stderr

