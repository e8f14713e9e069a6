"""The sweep's Optuna study: opened from STUDY_DIR/study.db, resumed, reported (tools/sweep.py)."""
import os
import time
from typing import Dict, List, Sequence

import optuna
from optuna.trial import TrialState

from common.errors import UserError
from trainer.config import search_space

STUDY_DB = 'study.db'
STUDY_NAME = 'sweep'
# Trial user attributes: its model_dir, its last evaluated step, whether Ctrl-C (or a kill)
# cut it short, and which such trial it goes on with.
TRIAL_DIR, STEP, INTERRUPTED, RESUMES = 'trial_dir', 'step', 'interrupted', 'resumes'
FAILURE = 'failure'  # why a trial failed


def suggest(trial: optuna.Trial, param: search_space.Param):
    if param.kind == 'categorical':
        return trial.suggest_categorical(param.name, list(param.choices))
    suggest_number = trial.suggest_float if param.kind == 'double' else trial.suggest_int
    return suggest_number(param.name, param.low, param.high, log=param.log)


def open_study(study_dir: str, model: str, param_texts: Sequence[str],
               objective: search_space.Objective, trainer_flags: List[str], prune: bool,
               prune_after_trials: int, seed: int) -> optuna.Study:
    """The study in study_dir (made on first use); one made with other flags is refused, so
    that every trial in it is comparable."""
    pruner = (optuna.pruners.MedianPruner(n_startup_trials=prune_after_trials) if prune
              else optuna.pruners.NopPruner())
    study = optuna.create_study(
        study_name=STUDY_NAME, storage=f'sqlite:///{os.path.join(study_dir, STUDY_DB)}',
        load_if_exists=True, direction=objective.goal, pruner=pruner)
    # Seeded by the trials so far too: each run of the command draws new params, not the
    # first run's again.
    study.sampler = optuna.samplers.TPESampler(seed=seed + len(study.get_trials(deepcopy=False)))
    wanted = {'model': model, 'param': list(param_texts),
              'objective': f'{objective.metric}:{objective.goal}', 'trainer flags': trainer_flags}
    made_with = study.user_attrs.get('made_with')
    if made_with is None:
        study.set_user_attr('made_with', wanted)
    elif made_with != wanted:
        differ = [f'{name} {made_with[name]}' for name in wanted if made_with[name] != wanted[name]]
        raise UserError(f'{os.path.join(study_dir, STUDY_DB)}: its study was made with '
                        f'{"; ".join(differ)}; give the same, or use another --study_dir')
    return study


def to_resume(study: optuna.Study) -> List[optuna.trial.FrozenTrial]:
    """Trials cut short by Ctrl-C (marked interrupted) or by a kill (left running), that no
    trial goes on with yet."""
    trials = study.get_trials(deepcopy=False)
    resumed = {trial.user_attrs.get(RESUMES) for trial in trials}
    return [trial for trial in trials if trial.number not in resumed and (
        trial.state == TrialState.RUNNING
        or (trial.state == TrialState.FAIL and trial.user_attrs.get(INTERRUPTED)))]


def counted(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether a trial counts towards --trials: it finished, or failed on its own."""
    return trial.state in (TrialState.COMPLETE, TrialState.PRUNED) or (
        trial.state == TrialState.FAIL and not trial.user_attrs.get(INTERRUPTED))


def run(study: optuna.Study, sweep, trials: int, parallel: int, failure) -> None:
    """Runs trials until the study holds `trials`: first the ones to resume, in their folders."""
    resumes = to_resume(study)
    for old in resumes:
        if old.state == TrialState.RUNNING:  # its sweep was killed (the study's lock is ours)
            study.tell(old.number, state=TrialState.FAIL)
        model_dir = old.user_attrs.get(TRIAL_DIR) or os.path.join(
            sweep.study_dir, f'trial-{old.number:03d}')
        study.enqueue_trial(old.params, user_attrs={TRIAL_DIR: model_dir, RESUMES: old.number},
                            skip_if_exists=False)
        print(f'trial {old.number} was cut short: it goes on in {model_dir}', flush=True)
    todo = trials - sum(counted(trial) for trial in study.get_trials(deepcopy=False))
    if todo <= 0:
        print(f'the study holds {trials} trials already; give a larger --trials to add more',
              flush=True)
        return
    # The trials to resume, waiting in the study, run one at a time: two of Optuna's threads
    # can take the same waiting trial (SQLite has no row locks), and train in one folder.
    resumed_first = min(len(resumes), todo)
    if resumed_first:
        study.optimize(sweep.run_trial, n_trials=resumed_first, n_jobs=1, catch=(failure,))
    if todo > resumed_first:
        study.optimize(sweep.run_trial, n_trials=todo - resumed_first, n_jobs=parallel,
                       catch=(failure,))


def wait_while_running(study: optuna.Study, timeout_secs: float) -> None:
    """After Ctrl-C: until the trials still running have stopped their trainers and said so."""
    deadline = time.time() + timeout_secs
    while study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)) and time.time() < deadline:
        time.sleep(0.5)


def _state(trial: optuna.trial.FrozenTrial, resumed_by: Dict[int, int]) -> str:
    if trial.number in resumed_by:
        return f'cut short, resumed as {resumed_by[trial.number]}'
    if trial.user_attrs.get(INTERRUPTED):
        return 'interrupted'
    failure = trial.user_attrs.get(FAILURE)
    return f'failed: {failure}' if failure else trial.state.name.lower()


def table(study: optuna.Study, params, objective: search_space.Objective) -> str:
    """The trials (params, objective, steps, state), then the best and the pruned ones."""
    trials = study.get_trials(deepcopy=False)
    resumed_by = {trial.user_attrs[RESUMES]: trial.number for trial in trials
                  if RESUMES in trial.user_attrs}
    header = ['trial', *(param.name for param in params), objective.metric, 'step', 'state']
    rows = [header]
    for trial in trials:
        last = trial.intermediate_values.get(trial.user_attrs.get(STEP))
        value = trial.value if trial.value is not None else last
        rows.append([str(trial.number)] + [_text(trial.params.get(param.name)) for param in params]
                    + [_text(value), str(trial.user_attrs.get(STEP, '')), _state(trial, resumed_by)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ['  '.join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in rows]
    complete = [trial for trial in trials if trial.state == TrialState.COMPLETE]
    if complete:
        best = study.best_trial
        lines.append(f'best: trial {best.number}, {objective.metric}={best.value:.6g} ('
                     + ', '.join(f'--{name}={_text(value)}' for name, value in best.params.items())
                     + f') in {best.user_attrs.get(TRIAL_DIR)}')
    pruned = [str(trial.number) for trial in trials if trial.state == TrialState.PRUNED]
    lines.append(f'pruned: {", ".join(pruned) if pruned else "none"}')
    return '\n'.join(lines)


def _text(value) -> str:
    if value is None:
        return ''
    return f'{value:.4g}' if isinstance(value, float) else str(value)


def write_hparams_experiment(study_dir: str, params, objective: search_space.Objective,
                             eval_name: str) -> None:
    """The HParams dashboard's experiment: the tuned params and the objective, so that
    `tensorboard --logdir=STUDY_DIR` lists every trial (each trial's trainer logs its own
    session: trainer/observe/hparams.py) with its evaluation's metric."""
    if any(name.startswith('events.out') for name in os.listdir(study_dir)):
        return  # written by the study's first run; TensorBoard wants one
    import tensorflow as tf  # here: the sweep's other work needs no TensorFlow
    from tensorboard.plugins.hparams import api as hp
    domains = {'double': hp.RealInterval, 'int': hp.IntInterval}
    config = hp.hparams_config_pb(
        hparams=[hp.HParam(param.name, domains[param.kind](param.low, param.high))
                 if param.kind in domains else hp.HParam(param.name) for param in params],
        metrics=[hp.Metric(metric, group=f'eval_{eval_name}')
                 for metric in dict.fromkeys([objective.metric, 'loss'])])
    with tf.Graph().as_default():  # the v1 writer refuses to be made in eager mode
        writer = tf.compat.v1.summary.FileWriter(study_dir)
    writer.add_summary(config.SerializeToString())  # TensorBoard's proto, not TensorFlow's
    writer.close()
