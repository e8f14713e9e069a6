"""The ledger file and its lock, without training."""
import json
import os

import pytest
import tensorflow as tf

from common import files
from common.errors import UserError
from trainer.evaluation.eval_job import EvalJob
from trainer.model_dir.ledger import Evaluator, Ledger


@pytest.mark.parametrize('where', ['local', 'ram'])
def test_one_whole_object_per_checkpoint_and_a_repeat_rewrites_it(tmp_path, where):
    model_dir = str(tmp_path) if where == 'local' else f'ram://ledger-{os.getpid()}-{id(tmp_path)}'
    ledger = Ledger(model_dir, 'val')
    for step, loss in [(12000, 1.0), (0, 2.0), (12000, 1.0)]:  # 12000 evaluated again
        ledger.append(step, f'model.ckpt-{step}', 'evaluated', eval_files='data/*',
                      metrics={'loss': loss})
    assert files.listdir(ledger.path) == ['step-000000000.json', 'step-000012000.json']
    assert [e.step for e in Ledger(model_dir, 'val').entries()] == [0, 12000]  # a new reader
    assert ledger.last_step() == 12000 and ledger.find(0).metrics == {'loss': 2.0}


def test_a_damaged_result_names_the_file(tmp_path):
    ledger = Ledger(str(tmp_path), 'val')
    ledger.append(0, 'model.ckpt-0', 'evaluated', eval_files='data/*', metrics={})
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
    assert entry.status == 'skipped' and entry.reason == 'deleted before evaluation'
    assert ledger.entries() == [entry]


class FakeEstimator:
    """Estimator.evaluate's contract: metrics for a checkpoint, or the error it raises."""

    def __init__(self, error=None):
        self.error = error

    def evaluate(self, input_fn, checkpoint_path, name):
        if self.error:
            os.remove(checkpoint_path + '.index')  # the store now answers nothing about it
            raise self.error
        return {'loss': 0.5, 'global_step': 7}


def test_a_checkpoint_a_failing_store_calls_missing_is_evaluated_while_its_folder_lists_it(
        tmp_path, monkeypatch):
    (tmp_path / 'model.ckpt-7.index').write_text('')
    monkeypatch.setattr(files, 'exists', lambda _: False)  # a stat that failed, on s3://
    ledger = Ledger(str(tmp_path), 'val')
    entry = EvalJob(FakeEstimator(), None, 'data/*', ledger).evaluate(
        7, str(tmp_path / 'model.ckpt-7'))
    assert entry.status == 'evaluated' and entry.metrics == {'global_step': 7, 'loss': 0.5}


def test_a_store_failing_mid_evaluation_is_raised_to_be_resumed_not_recorded(tmp_path):
    # Restoring fails, and then the store answers nothing about the checkpoint either.
    (tmp_path / 'model.ckpt-7.index').write_text('')
    ledger = Ledger(str(tmp_path), 'val')
    job = EvalJob(FakeEstimator(tf.errors.UnavailableError(None, None, '503 SlowDown')), None,
                  'data/*', ledger)
    with pytest.raises(tf.errors.UnavailableError):
        job.evaluate(7, str(tmp_path / 'model.ckpt-7'))
    assert ledger.entries() == []


# Entries as eval jobs write them: an evaluation (export_dir null when it exports nothing), a
# checkpoint deleted before its evaluation, a damaged one, and an evaluation from before claims.
WRITTEN = {
    3: {'step': 3, 'checkpoint': 'm/model.ckpt-3', 'status': 'evaluated',
        'time': '2026-11-25T10:00:00+0000', 'eval_files': 'data/validation-*',
        'evaluated_by': {'host': 'h', 'pid': 7, 'task': 'evaluator1'}, 'export_dir': None,
        'eval_secs': 1.5, 'metrics': {'accuracy': 0.5, 'global_step': 3, 'loss': 0.7}},
    4: {'step': 4, 'checkpoint': 'm/model.ckpt-4', 'status': 'skipped',
        'time': '2026-11-25T10:00:01+0000', 'eval_files': 'data/validation-*',
        'evaluated_by': {'host': 'h', 'pid': 7, 'task': 'local'},
        'reason': 'deleted before evaluation'},
    5: {'step': 5, 'checkpoint': 'm/model.ckpt-5', 'status': 'damaged',
        'time': '2026-11-25T10:00:02+0000', 'eval_files': 'data/validation-*',
        'evaluated_by': {'host': 'h', 'pid': 7, 'task': 'local'},
        'reason': 'its data file is shorter than its index says'},
    6: {'step': 6, 'checkpoint': 'm/model.ckpt-6', 'status': 'evaluated',
        'time': '2026-11-23T10:00:00+0000', 'eval_files': 'data/validation-*',
        'export_dir': 'exports/m', 'metrics': {'loss': 0.5}},
}


def test_entries_in_the_written_format_read_and_write_back_byte_for_byte(tmp_path):
    ledger = Ledger(str(tmp_path), 'val')
    os.makedirs(ledger.path)
    for step, record in WRITTEN.items():
        with open(os.path.join(ledger.path, f'step-{step:09d}.json'), 'w') as f:
            f.write(json.dumps(record, indent=2, sort_keys=True) + '\n')
    entries = ledger.entries()
    assert [(e.step, e.status) for e in entries] == [
        (3, 'evaluated'), (4, 'skipped'), (5, 'damaged'), (6, 'evaluated')]
    assert entries[0].evaluated_by == Evaluator(host='h', pid=7, task='evaluator1')
    assert entries[0].metrics['loss'] == 0.7 and entries[0].export_dir is None
    assert entries[3].evaluated_by is None and entries[3].export_dir == 'exports/m'
    for entry in entries:  # what a writer of today writes for it: the same bytes
        written = Ledger(str(tmp_path), 'again').append(**{
            name: value for name, value in vars(entry).items() if name != 'time'})
        with open(os.path.join(ledger.path, f'step-{entry.step:09d}.json')) as f:
            assert f.read() == json.dumps(dict(written.to_json(), time=entry.time), indent=2,
                                          sort_keys=True) + '\n'


@pytest.mark.parametrize('field, value, problem', [
    ('step', '3', '"step" is \'3\', not int'),
    ('status', 'done', '"status" is \'done\', not evaluated, skipped or damaged'),
    ('metrics', None, '"metrics" is None, not dict'),
    ('evaluated_by', {'host': 'h'}, '"pid" is None, not int')])
def test_a_record_that_is_not_a_ledger_entry_names_the_file_and_what_is_wrong(
        tmp_path, field, value, problem):
    ledger = Ledger(str(tmp_path), 'val')
    os.makedirs(ledger.path)
    path = os.path.join(ledger.path, 'step-000000003.json')
    with open(path, 'w') as f:
        json.dump(dict(WRITTEN[3], **{field: value}), f)
    with pytest.raises(UserError) as raised:
        ledger.entries()
    assert str(raised.value) == (f'{path}: not a ledger entry ({problem}); delete it to evaluate '
                                 'that checkpoint again')
