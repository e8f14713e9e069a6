"""The ledger file and its lock, without training."""
import os

import pytest

from common import files
from common.errors import UserError
from trainer.evaluation.eval_job import EvalJob
from trainer.model_dir.ledger import Ledger


@pytest.mark.parametrize('where', ['local', 'ram'])
def test_one_whole_object_per_checkpoint_and_a_repeat_rewrites_it(tmp_path, where):
    model_dir = str(tmp_path) if where == 'local' else f'ram://ledger-{os.getpid()}-{id(tmp_path)}'
    ledger = Ledger(model_dir, 'val')
    ledger.append(12000, 'model.ckpt-12000', 'evaluated', metrics={'loss': 1.0})
    ledger.append(0, 'model.ckpt-0', 'evaluated', metrics={'loss': 2.0})
    ledger.append(12000, 'model.ckpt-12000', 'evaluated', metrics={'loss': 1.0})  # evaluated again
    assert files.listdir(ledger.path) == ['step-000000000.json', 'step-000012000.json']
    assert [e['step'] for e in Ledger(model_dir, 'val').entries()] == [0, 12000]  # a new reader
    assert ledger.last_step() == 12000 and ledger.find(0)['metrics'] == {'loss': 2.0}


def test_a_damaged_result_names_the_file(tmp_path):
    ledger = Ledger(str(tmp_path), 'val')
    ledger.append(0, 'model.ckpt-0', 'evaluated', metrics={})
    damaged = os.path.join(ledger.path, 'step-000000005.json')
    with open(damaged, 'w') as f:
        f.write('{"step": 5, "checkpoint": "mod')
    with pytest.raises(UserError, match=f'{damaged}: not a JSON object; delete it'):
        ledger.entries()


def test_one_process_at_a_time_evaluates_under_a_name(tmp_path):
    ledger = Ledger(str(tmp_path), 'val')
    with ledger.lock():
        with pytest.raises(UserError, match=f'pid {os.getpid()} is evaluating under this name'):
            with Ledger(str(tmp_path), 'val').lock():
                pass
        with Ledger(str(tmp_path), 'other').lock():  # another name is independent
            pass
    with ledger.lock():  # released
        pass


def test_a_deleted_checkpoint_is_logged_as_skipped(tmp_path):
    ledger = Ledger(str(tmp_path), 'val')
    entry = EvalJob(None, None, 'data/*', ledger).evaluate(7, str(tmp_path / 'model.ckpt-7'))
    assert entry['status'] == 'skipped' and entry['reason'] == 'deleted before evaluation'
    assert ledger.entries() == [entry]
