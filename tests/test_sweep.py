"""`./run.sh sweep`: trials as trainer subprocesses, the study in STUDY_DIR/study.db, the median
pruner on the trials' ledgers, Ctrl-C and the same command going on, as a user runs it (run.sh
installs the pinned Optuna set the first time)."""
import json
import os
import signal
import subprocess
import time

import pytest

from helpers import REPO, assert_one_line_error, default_sigint

pytestmark = pytest.mark.slow  # each test runs whole sweeps: ./run.sh test-slow

GOOD, HOPELESS = '0.01', '1e-09'  # learning rates: the second leaves the model where it began


def sweep_args(study_dir, digit_shards, trials, *extra, train_steps=8, checkpoint_steps=4):
    return ['bash', os.path.join(REPO, 'run.sh'), 'sweep', f'--study_dir={study_dir}',
            f'--trials={trials}', '--objective=accuracy:maximize',
            f'--param=learning_rate:categorical:{GOOD},{HOPELESS}',
            '--param=dropout_rate:double:0.1:0.5', '--prune_after_trials=1', *extra, '--',
            f'--train_files={digit_shards.train_pattern}',
            f'--eval_files={digit_shards.validation_pattern}', '--batch_size=16',
            f'--train_steps={train_steps}', f'--save_checkpoints_steps={checkpoint_steps}',
            '--eval_throttle_secs=0']


def run_sweep(*args, timeout=600):
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def table_rows(stdout):
    """The trials' table as {trial number: {column: text}}, cut at the header's columns."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('trial  '))
    header = lines[start]
    names = header.split()
    starts = [header.index(f' {name}') + 1 if i else 0 for i, name in enumerate(names)]
    rows = {}
    for line in lines[start + 1:]:
        if line.startswith(('best:', 'pruned:')):
            break
        cells = [line[begin:end].strip() for begin, end in zip(starts, starts[1:] + [None])]
        rows[int(cells[0])] = dict(zip(names, cells))
    return rows


@pytest.fixture(scope='module')
def interrupted_then_continued(digit_shards, tmp_path_factory):
    """A sweep of two trials at a time stopped by Ctrl-C during its third trial, then the same
    command. Without pruning, so that the third trial is still training when Ctrl-C comes (a
    pruned trial ends at the very evaluation this waits for)."""
    study_dir = tmp_path_factory.mktemp('sweep') / 'study'
    args = sweep_args(study_dir, digit_shards, 4, '--parallel=2', '--noprune')
    first_entry = study_dir / 'trial-002' / 'eval_default' / 'results' / 'step-000000004.json'
    with open(study_dir.parent / 'first.log', 'w') as log:
        first = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True, preexec_fn=default_sigint)
        deadline = time.time() + 480
        while not first_entry.exists() and first.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        os.killpg(first.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole group
        first.wait(120)
    again = run_sweep(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    return first, (study_dir.parent / 'first.log').read_text(), again, study_dir


def test_ctrl_c_stops_the_sweep_and_the_same_command_goes_on(interrupted_then_continued):
    first, first_log, again, study_dir = interrupted_then_continued
    assert first.returncode == 130, first_log[-3000:]
    assert 'Traceback' not in first_log, first_log[-3000:]
    assert first_log.strip().splitlines()[-1].startswith('interrupted: the sweep stopped; run '
                                                          'the same command to go on')
    rows = table_rows(again.stdout)
    cut = {number: int(row['state'].split()[-1]) for number, row in rows.items()
           if row['state'].startswith('cut short, resumed as')}
    assert cut, again.stdout
    for number, resumed_as in cut.items():  # the same trial goes on from its checkpoint
        assert rows[resumed_as]['learning_rate'] == rows[number]['learning_rate'], again.stdout
        assert 'Restoring parameters from' in (
            study_dir / 'logs' / f'trial-{number:03d}.log').read_text()
    finished_first = [number for number, row in rows.items()
                      if row['state'] in ('complete', 'pruned') and number < min(cut)]
    assert finished_first, again.stdout
    for number in finished_first:  # not run again: its trainer's log has one start
        log = (study_dir / 'logs' / f'trial-{number:03d}.log').read_text()
        assert log.count('Running training and evaluation locally') == 1
    counted = [row for row in rows.values() if row['state'] in ('complete', 'pruned')]
    assert len(counted) == 4 and (study_dir / 'study.db').exists()


def test_each_trial_is_its_ledgers_final_evaluation(interrupted_then_continued):
    _, _, again, study_dir = interrupted_then_continued
    rows = table_rows(again.stdout)
    folders = {number: study_dir / f'trial-{number:03d}' for number in rows}
    folders.update({int(row['state'].split()[-1]): folders[number] for number, row in rows.items()
                    if row['state'].startswith('cut short, resumed as')})  # it goes on there
    complete = [number for number, row in rows.items() if row['state'] == 'complete']
    assert complete, again.stdout
    for number in complete:
        row = rows[number]
        final = json.loads((folders[number] / 'eval_default' / 'results' /
                            'step-000000008.json').read_text())
        assert row['accuracy'] == f'{final["metrics"]["accuracy"]:.4g}' and row['step'] == '8'
        flags = (folders[number] / 'flags.txt').read_text().splitlines()
        assert f'--learning_rate={float(row["learning_rate"])}' in flags
    best = max(complete, key=lambda number: float(rows[number]['accuracy']))
    assert any(line.startswith(f'best: trial {best}, accuracy=') for line in again.stdout.splitlines())
    [experiment] = hparams_experiments(study_dir)  # for TensorBoard's HParams dashboard
    assert [info.name for info in experiment.hparam_infos] == ['learning_rate', 'dropout_rate']
    assert [(info.name.group, info.name.tag) for info in experiment.metric_infos] == [
        ('eval_default', 'accuracy'), ('eval_default', 'loss')]


def first_accuracy(study_dir, number):
    """A trial's accuracy at its first evaluation (step 20), from its eval job's ledger."""
    path = study_dir / f'trial-{number:03d}' / 'eval_default' / 'results' / 'step-000000020.json'
    return json.loads(path.read_text())['metrics']['accuracy']


def test_the_median_pruner_stops_hopeless_trials(digit_shards, tmp_path):
    """One trial at a time: a hopeless trial after a good one trails the median at its first
    evaluation, and its trainer is stopped there; a good one is pruned only where it trailed
    (once in five runs a good trial was still at chance at step 20: stop 61)."""
    # The first evaluation at step 20, where a good trial is past chance (at step 4 one trailed
    # another good one and was pruned); 80 steps: a pruned trainer is still training when the
    # sweep (polling each second) stops it.
    result = run_sweep(*sweep_args(tmp_path / 'study', digit_shards, 3, train_steps=80,
                                   checkpoint_steps=20))
    assert result.returncode == 0, result.stderr[-3000:]
    rows = table_rows(result.stdout)
    assert {row['learning_rate'] for row in rows.values()} == {GOOD, HOPELESS}  # both were tried
    for number, row in rows.items():
        good_before = any(other['state'] == 'complete' and other['learning_rate'] == GOOD
                          for earlier, other in rows.items() if earlier < number)
        if row['learning_rate'] == HOPELESS and good_before:
            assert row['state'] == 'pruned' and row['step'] == '20', row
            log = (tmp_path / 'study' / 'logs' / f'trial-{number:03d}.log').read_text()
            assert 'interrupted: --mode=train_and_evaluate stopped' in log  # stopped, resumable
        if row['learning_rate'] == GOOD and row['state'] != 'complete':
            assert row['state'] == 'pruned' and number > min(rows), row
            assert first_accuracy(tmp_path / 'study', number) <= max(
                first_accuracy(tmp_path / 'study', earlier) for earlier in rows
                if earlier < number), row  # it trailed an earlier trial, so the median
    pruned = [str(n) for n, row in rows.items() if row['state'] == 'pruned']
    assert pruned and result.stdout.strip().splitlines()[-1] == f'pruned: {", ".join(pruned)}'


def hparams_experiments(study_dir):
    import tensorflow as tf
    from tensorboard.plugins.hparams import plugin_data_pb2
    found = []
    for name in os.listdir(study_dir):
        if name.startswith('events.out'):
            for event in tf.compat.v1.train.summary_iterator(str(study_dir / name)):
                found += [plugin_data_pb2.HParamsPluginData.FromString(
                    value.metadata.plugin_data.content).experiment
                    for value in event.summary.value if value.tag == '_hparams_/experiment']
    return found


def test_a_study_dir_holds_one_study_and_flags_are_checked(interrupted_then_continued, digit_shards):
    _, _, _, study_dir = interrupted_then_continued
    other = sweep_args(study_dir, digit_shards, 4)
    other[other.index('--objective=accuracy:maximize')] = '--objective=loss:minimize'
    assert_one_line_error(run_sweep(*other), 2, 'study.db: its study was made with objective '
                          'accuracy:maximize; give the same, or use another --study_dir')
    result = run_sweep(*sweep_args(study_dir, digit_shards, 4), '--model_dir=elsewhere')
    assert_one_line_error(result, 2, '--model_dir=elsewhere: the sweep sets --model_dir')
    result = run_sweep(*sweep_args(study_dir, digit_shards, 0))
    assert result.returncode == 2
    assert 'error: flag --trials=0: 0 is not a positive integer' in result.stderr
