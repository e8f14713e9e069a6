"""Eval jobs in their own processes beside a trainer: the ledger, one-shot evaluation, exports
chosen from the ledger across a restart, and early stopping that reads the ledger."""
import json
import os
import re
import shutil

import pytest

from common.errors import UserError
from helpers import run_module, run_together
from trainer.model_dir import checkpoints
from trainer.model_dir.ledger import Ledger
from trainer.model_dir.metric_goal import MetricGoal
from trainer.observe import status
from trainer.serving import model_config


def train_args(model_dir, shards, steps, *extra):
    return ['--mode=train', f'--model_dir={model_dir}', f'--train_files={shards.train_pattern}',
            f'--train_steps={steps}', '--batch_size=16', '--save_checkpoints_steps=2',
            '--keep_checkpoint_max=0', *extra]


def eval_args(model_dir, eval_files, name, *extra):
    return ['--mode=continuous_eval', f'--model_dir={model_dir}', f'--eval_files={eval_files}',
            f'--eval_name={name}', '--batch_size=50', '--eval_timeout_secs=120', *extra]


def steps_of(entries):
    return [entry.step for entry in entries]


@pytest.fixture(scope='module')
def status_report(side_by_side):
    """`python -m trainer.observe.status --format=json` of side_by_side's model_dir."""
    model_dir, _, _ = side_by_side
    return json.loads(run_module('trainer.observe.status', f'--model_dir={model_dir}',
                                 '--format=json').stdout)


@pytest.fixture(scope='module')
def side_by_side(digit_shards, tmp_path_factory):
    """Two named eval jobs (different data), started before a trainer in another process; the
    name validation has two jobs sharing its checkpoints."""
    work = tmp_path_factory.mktemp('side_by_side')
    model_dir, export_dir = work / 'model', work / 'exports'
    jobs = {
        'validation': eval_args(model_dir, digit_shards.validation_pattern, 'validation',
                                f'--export_dir={export_dir}', '--export_metric=accuracy'),
        'validation_b': eval_args(model_dir, digit_shards.validation_pattern, 'validation',
                                  f'--export_dir={export_dir}', '--export_metric=accuracy'),
        'train': eval_args(model_dir, digit_shards.train_pattern, 'train'),
        'trainer': train_args(model_dir, digit_shards, 8),
    }
    logs = run_together(work, jobs)
    return model_dir, export_dir, logs


def test_each_checkpoint_is_evaluated_once_in_order_and_the_job_exits(side_by_side):
    model_dir, _, logs = side_by_side
    saved = [step for step, _ in checkpoints.list_checkpoints(str(model_dir))]
    assert saved == [0, 2, 4, 6, 8]
    for name in ('validation', 'train'):
        entries = Ledger(str(model_dir), name).entries()
        assert steps_of(entries) == saved
        assert all(e.status == 'evaluated' and e.metrics['global_step'] == e.step
                   for e in entries)
        assert f'eval_{name}: evaluated the final checkpoint (step 8); done' in logs[name]
        assert any(f.startswith('events.out.tfevents') for f in os.listdir(model_dir / f'eval_{name}'))
    # Different data, different results.
    assert (Ledger(str(model_dir), 'train').entries()[-1].metrics
            != Ledger(str(model_dir), 'validation').entries()[-1].metrics)


def test_best_export_and_pointer(side_by_side):
    model_dir, export_dir, _ = side_by_side
    entries = Ledger(str(model_dir), 'validation').entries()
    best = max(entries, key=lambda e: e.metrics['accuracy'])  # the first of equals
    assert (export_dir / 'best').read_text() == f'{best.step}\n'
    assert os.path.exists(export_dir / str(best.step) / 'export_complete.json')
    # TF Serving serves the best, not the highest version, through models.config.
    assert (export_dir / 'models.config').read_text() == model_config.config_text(
        'mnist_cnn', str(export_dir), best.step)
    exported = sorted(int(name) for name in os.listdir(export_dir) if name.isdigit())
    # Never an export of a step that did not beat the best before it. A new best may go
    # unexported when a better one was already in the ledger by the time the exports were
    # updated (two jobs share this name and finish out of order), so a subset, with the best.
    running_best, new_bests = -1.0, []
    for entry in entries:
        if entry.metrics['accuracy'] > running_best:
            running_best = entry.metrics['accuracy']
            new_bests.append(entry.step)
    assert best.step in exported
    assert set(exported) <= set(new_bests), (exported, new_bests)


def test_eval_job_logs_its_checkpoint_and_how_many_wait(side_by_side):
    model_dir, _, logs = side_by_side
    assert (f'eval_validation: on checkpoint {model_dir}/model.ckpt-8, 0 waiting'
            in logs['validation'] + logs['validation_b'])


def test_two_jobs_on_one_name_evaluate_each_checkpoint_once_and_say_who(side_by_side,
                                                                       status_report):
    """Every checkpoint has one ledger entry, written by the one job that evaluated it (each
    job logs the checkpoints it takes); status names the job of each step."""
    model_dir, _, logs = side_by_side
    entries = Ledger(str(model_dir), 'validation').entries()
    assert steps_of(entries) == [0, 2, 4, 6, 8]
    taken = {name: {int(step) for step in re.findall(r'eval_validation: on checkpoint \S+'
                                                     r'model\.ckpt-(\d+),', logs[name])}
             for name in ('validation', 'validation_b')}
    assert not taken['validation'] & taken['validation_b']  # none evaluated twice
    pids = {}
    for entry in entries:
        [name] = [name for name, steps in taken.items() if entry.step in steps]
        pids.setdefault(name, set()).add(entry.evaluated_by.pid)
        assert entry.evaluated_by.task == 'local'
    assert all(len(found) == 1 for found in pids.values())  # one process per job
    for name in ('validation', 'validation_b'):
        assert 'eval_validation: evaluated the final checkpoint (step 8); done' in logs[name]
    [validation] = [job for job in status_report['eval_jobs'] if job['name'] == 'validation']
    assert sorted(step for who in validation['evaluated_by'] for step in who['steps']) == [
        0, 2, 4, 6, 8]
    assert all(who['evaluator'].startswith('local (pid ') for who in validation['evaluated_by'])


def test_status_of_a_model_dir_with_a_trainer_eval_jobs_and_exports(side_by_side, status_report,
                                                                    digit_shards):
    model_dir, export_dir, _ = side_by_side
    report = status_report
    assert report['model'] == 'mnist_cnn' and report['flags']['train_steps'] == '8'
    assert report['training'] == {'latest_step': 8, 'train_steps': 8, 'percent': 100.0,
                                  'state': 'finished', 'final_step': 8,
                                  'reason': 'reached train_steps'}
    assert report['checkpoints'] == [0, 2, 4, 6, 8]
    jobs = {job['name']: job for job in report['eval_jobs']}
    assert set(jobs) == {'train', 'validation'}
    validation = jobs['validation']
    assert validation['evaluated'] == [0, 2, 4, 6, 8] and validation['waiting'] == []
    assert validation['eval_files'] == digit_shards.validation_pattern
    entries = Ledger(str(model_dir), 'validation').entries()
    best = max(entries, key=lambda e: e.metrics['accuracy'])
    assert validation['best']['accuracy'] == {'step': best.step, 'mode': 'max',
                                              'value': best.metrics['accuracy']}
    [exports] = report['exports']  # found through the eval job's ledger
    assert exports['export_dir'] == str(export_dir)
    assert exports['pointers'] == {'best': best.step}

    text = status.render_text(report)  # what the command prints without --format=json
    assert 'training    step 8/8 (100%), finished: reached train_steps' in text.splitlines()
    assert f'exports     {export_dir}: ' in text and f'best -> {best.step}' in text


def test_one_shot_evaluate_never_evaluates_a_checkpoint_twice(side_by_side, digit_shards):
    model_dir, _, _ = side_by_side
    common = ['--mode=evaluate', f'--model_dir={model_dir}', '--eval_name=scheduled',
              f'--eval_files={digit_shards.validation_pattern}', '--batch_size=50']
    one = run_module('trainer.main', *common, '--checkpoint=4')
    assert json.loads(one.stdout)['global_step'] == 4
    every = run_module('trainer.main', *common, '--checkpoint=all')
    assert [json.loads(line)['global_step'] for line in every.stdout.splitlines()] == [0, 2, 4, 6, 8]
    assert 'step 4 is already in' in every.stderr
    again = run_module('trainer.main', *common)  # latest
    assert json.loads(again.stdout) == json.loads(every.stdout.splitlines()[-1])
    assert 'step 8 is already in' in again.stderr
    assert sorted(steps_of(Ledger(str(model_dir), 'scheduled').entries())) == [0, 2, 4, 6, 8]

    # How --checkpoint=STEP is read (the busy job below shows a UserError's one line, exit 2).
    with pytest.raises(UserError) as missing:
        checkpoints.resolve(str(model_dir), '7')
    assert str(missing.value) == (f'--checkpoint=7: no checkpoint for that step in {model_dir}; '
                                  'it has steps 0, 2, 4, 6, 8')
    with Ledger(str(model_dir), 'scheduled').lock():
        busy = run_module('trainer.main', *common, check=False)
    assert busy.returncode == 2 and 'Traceback' not in busy.stderr
    assert busy.stderr.strip().splitlines()[-1].startswith(
        f'error: --eval_name=scheduled: pid {os.getpid()} is evaluating under this name')


def test_restarted_eval_job_never_exports_a_worse_model(digit_shards, tmp_path):
    model_dir, export_dir = tmp_path / 'model', tmp_path / 'exports'
    exports = [f'--export_dir={export_dir}', '--export_metric=loss', '--export_mode=min']
    run_together(tmp_path, {  # side by side, as an eval job runs
        'trainer': train_args(model_dir, digit_shards, 4),
        'eval': eval_args(model_dir, digit_shards.validation_pattern, 'val', *exports)})
    first = Ledger(str(model_dir), 'val').entries()
    assert steps_of(first) == [0, 2, 4]
    best = min(first, key=lambda e: e.metrics['loss'])
    assert (export_dir / 'best').read_text() == f'{best.step}\n'

    # Resumed with a learning rate that wrecks the model: every later checkpoint is worse.
    run_module('trainer.main', *train_args(model_dir, digit_shards, 10, '--learning_rate=1.0'))
    # Exports lost (as by a kill between a ledger line and its export): the ledger restores the best.
    shutil.rmtree(export_dir)
    restarted = run_module('trainer.main', *eval_args(
        model_dir, digit_shards.validation_pattern, 'val', *exports))
    entries = Ledger(str(model_dir), 'val').entries()
    assert steps_of(entries) == [0, 2, 4, 6, 8, 10]
    assert 'resuming after step 4' in restarted.stderr
    later = [e.metrics['loss'] for e in entries[3:]]
    assert min(later) > best.metrics['loss']  # the premise: all worse
    assert sorted(os.listdir(export_dir)) == sorted([str(best.step), 'best', 'models.config'])
    assert (export_dir / 'best').read_text() == f'{best.step}\n'


def test_trainer_stops_early_on_the_eval_jobs_ledger(digit_shards, tmp_path):
    """A learning rate so small that accuracy cannot change: no improvement after the first evaluation."""
    model_dir = tmp_path / 'model'
    jobs = {
        'eval': eval_args(model_dir, digit_shards.validation_pattern, 'val'),
        # Every checkpoint kept and large batches: the eval job evaluates each checkpoint
        # (none is deleted first) and keeps up, however busy the machine.
        'trainer': train_args(model_dir, digit_shards, 1000, '--learning_rate=1e-9',
                              '--save_checkpoints_steps=5', '--batch_size=256',
                              '--early_stopping_eval_name=val', '--early_stopping_metric=accuracy',
                              '--early_stopping_patience=2', '--early_stopping_check_secs=0'),
    }
    logs = run_together(tmp_path, jobs)
    trainer_log, eval_log = logs['trainer'], logs['eval']

    finished = json.loads((model_dir / 'train_finished.json').read_text())
    final_step = checkpoints.list_checkpoints(str(model_dir))[-1][0]
    assert finished['early_stopped'] and finished['step'] == final_step < 1000
    assert 'early stopping at step' in trainer_log and 'accuracy has not improved' in trainer_log
    entries = Ledger(str(model_dir), 'val').entries()
    assert entries[-1].step == final_step and entries[-1].status == 'evaluated'
    assert f'evaluated the final checkpoint (step {final_step})' in eval_log
    before_stop = [e for e in entries if e.step < final_step]
    assert MetricGoal('accuracy', 'max').stalled(before_stop, 2)
