"""`./run.sh sweep`: trials as trainer subprocesses, the study in STUDY_DIR/study.db, the median
pruner on the trials' ledgers, Ctrl-C and the same command going on, as a user runs it (run.sh
installs the pinned Optuna set the first time)."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import REPO, assert_one_line_error, default_sigint

GOOD, HOPELESS = '0.01', '1e-09'  # learning rates: the second leaves the model where it began


def sweep_args(study_dir, digit_shards, trials, *extra):
    return ['bash', os.path.join(REPO, 'run.sh'), 'sweep', f'--study_dir={study_dir}',
            f'--trials={trials}', '--objective=accuracy:maximize',
            f'--param=learning_rate:categorical:{GOOD},{HOPELESS}',
            '--param=dropout_rate:double:0.1:0.5', '--prune_after_trials=1', *extra, '--',
            f'--train_files={digit_shards.train_pattern}',
            f'--eval_files={digit_shards.validation_pattern}', '--batch_size=16',
            '--train_steps=8', '--save_checkpoints_steps=4', '--eval_throttle_secs=0']


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
    """A sweep stopped by Ctrl-C during its second trial, then the same command."""
    study_dir = tmp_path_factory.mktemp('sweep') / 'study'
    args = sweep_args(study_dir, digit_shards, 4)
    first_entry = study_dir / 'trial-001' / 'eval_default' / 'results' / 'step-000000004.json'
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
    assert first_log.strip().splitlines()[-1].startswith('interrupted: the sweep stopped; run '
                                                          'the same command to go on')
    rows = table_rows(again.stdout)
    assert rows[1]['state'] == 'cut short, resumed as 2'
    assert rows[2]['learning_rate'] == rows[1]['learning_rate']  # the same trial, going on
    assert 'Restoring parameters from' in (study_dir / 'logs' / 'trial-001.log').read_text()
    # the finished trial ran once: its trainer's log has one end
    assert (study_dir / 'logs' / 'trial-000.log').read_text().count('Loss for final step') == 1
    counted = [row for row in rows.values() if row['state'] in ('complete', 'pruned')]
    assert len(counted) == 4 and (study_dir / 'study.db').exists()


def test_each_trial_is_its_ledgers_final_evaluation_and_hopeless_ones_are_pruned(
        interrupted_then_continued):
    _, _, again, study_dir = interrupted_then_continued
    rows = table_rows(again.stdout)
    assert {row['learning_rate'] for row in rows.values()} == {GOOD, HOPELESS}  # both were tried
    folders = {number: study_dir / f'trial-{number:03d}' for number in rows}
    folders.update({int(row['state'].split()[-1]): folders[number] for number, row in rows.items()
                    if row['state'].startswith('cut short, resumed as')})  # it goes on there
    for number, row in rows.items():
        if row['state'] == 'complete':
            results = folders[number] / 'eval_default' / 'results'
            final = json.loads((results / 'step-000000008.json').read_text())
            assert row['accuracy'] == f'{final["metrics"]["accuracy"]:.4g}' and row['step'] == '8'
            flags = (folders[number] / 'flags.txt').read_text().splitlines()
            assert f'--learning_rate={float(row["learning_rate"])}' in flags
        completed_good_before = any(
            other['state'] == 'complete' and other['learning_rate'] == GOOD
            for earlier, other in rows.items() if earlier < number)
        if row['learning_rate'] == HOPELESS and completed_good_before:
            assert row['state'] == 'pruned' and row['step'] == '4', row
    pruned = [str(n) for n, row in rows.items() if row['state'] == 'pruned']
    assert pruned, again.stdout  # the sampler's seed makes a hopeless trial follow a good one
    assert again.stdout.strip().splitlines()[-1] == f'pruned: {", ".join(pruned) or "none"}'
    assert any(line.startswith('best: trial ') for line in again.stdout.splitlines())
    assert any(name.startswith('events.out') for name in os.listdir(study_dir))  # HParams


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
