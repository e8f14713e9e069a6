"""A local hyperparameter sweep with Optuna: each trial is the trainer in a subprocess.

  ./run.sh sweep --study_dir=runs/sweep --trials=8 --objective=accuracy:maximize \
      --param=dropout_rate:double:0.1:0.7 --param=learning_rate:double:1e-4:1e-2:log \
      [--parallel=2] -- --train_files='shards/train-*' --eval_files='shards/validation-*' ...

Trial N trains with --mode=train_and_evaluate into STUDY_DIR/trial-NNN/ (log:
STUDY_DIR/logs/trial-NNN.log), each tuned param passed as its own flag. Its evaluations go
to its eval ledger; the sweep reads them as they come, reports each to Optuna, and Optuna's
median pruner stops a trial whose evaluations trail the median of earlier trials at the same
step: the sweep interrupts its trainer (SIGINT, as Ctrl-C: it stops at once and could resume).
The objective is the final evaluation's metric. The study lives in STUDY_DIR/study.db
(Optuna's SQLite storage): --trials is the study's size, so the same command run again goes
on where it stopped (a trial cut short by Ctrl-C or a kill resumes from its checkpoints, and
finished trials are not run again), and a larger --trials adds trials. It prints a table of
the trials and the best, and writes an HParams experiment summary to STUDY_DIR, so that
`tensorboard --logdir=STUDY_DIR` compares the trials in its HParams dashboard.
"""
import os
import signal
import subprocess
import sys
import threading
import time

import optuna
from absl import flags

from common import cli, paths, process_lock, termination
from common.errors import UserError
from tools import sweep_study
from trainer.config import search_space
from trainer.config.flags import defaults as trainer_defaults
from trainer.model_dir import ledger
from trainer.model_dir.metric_goal import evaluated_by_step
from trainer.observe.tuner_metrics import scalar_metrics
from trainer.usr_dir import command_line as usr_dir

FLAGS = flags.FLAGS
POLL_SECS = 1.0
STOP_GRACE_SECS = 60  # for an interrupted trainer to stop before it is killed
OWN_TRAINER_FLAGS = ('model_dir', 'mode')  # set per trial by the sweep


def define_flags():
    flags.DEFINE_string('study_dir', None, 'Local folder of the study: study.db, trial-NNN/, logs/.')
    flags.DEFINE_integer('trials', None, 'Trials the study should hold; run again with more to '
                         'add trials.', lower_bound=1)
    flags.DEFINE_multi_string('param', [], f'A param to tune, repeatable: {search_space.PARAM_FORMS}.')
    flags.DEFINE_string('objective', None, 'METRIC:maximize or METRIC:minimize, a metric of the '
                        'model\'s evaluation; a trial\'s value is its final evaluation\'s.')
    flags.DEFINE_integer('parallel', 1, 'Trials at once.', lower_bound=1)
    flags.DEFINE_boolean('prune', True, 'Stop trials whose evaluations trail the median of '
                         'earlier trials at the same step (Optuna\'s MedianPruner).')
    flags.DEFINE_integer('prune_after_trials', 5, 'Prune only once this many trials have '
                         'finished (MedianPruner\'s n_startup_trials).', lower_bound=0)
    flags.DEFINE_integer('seed', 0, 'Seed of the sampler (TPE).')


class TrialFailed(RuntimeError):
    """The trainer of a trial exited with a failure: the trial is FAIL, the sweep goes on."""


class TrialInterrupted(RuntimeError):
    """Ctrl-C stopped the trial's trainer: the same command resumes it."""


class Sweep:
    def __init__(self, study_dir, model, params, objective, trainer_flags):
        self.study_dir, self.model, self.params = study_dir, model, params
        self.objective, self.trainer_flags = objective, trainer_flags
        self.stopping = threading.Event()  # Ctrl-C: every trial's trainer is stopped

    def run_trial(self, trial: optuna.Trial) -> float:
        values = {param.name: sweep_study.suggest(trial, param) for param in self.params}
        model_dir = trial.user_attrs.get(sweep_study.TRIAL_DIR) or os.path.join(
            self.study_dir, f'trial-{trial.number:03d}')
        trial.set_user_attr(sweep_study.TRIAL_DIR, model_dir)
        log_path = os.path.join(self.study_dir, 'logs', f'{os.path.basename(model_dir)}.log')
        command = [sys.executable, '-m', 'trainer.main', *self.trainer_flags,
                   '--mode=train_and_evaluate', f'--model_dir={model_dir}'] + [
                   f'--{param.name}={param.flag_value(values[param.name])}' for param in self.params]
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        with open(log_path, 'a') as log:
            trainer = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                       preexec_fn=_sigint_stops_it)
            try:
                return self._follow(trial, trainer, ledger.Ledger(model_dir, _eval_name(
                    self.trainer_flags)), log_path)
            except BaseException as error:
                _stop(trainer)
                if isinstance(error, (KeyboardInterrupt, TrialInterrupted)):
                    trial.set_user_attr(sweep_study.INTERRUPTED, True)
                raise

    def _follow(self, trial, trainer, eval_ledger, log_path) -> float:
        """Reports each evaluation in the trial's ledger to Optuna as it comes; prunes."""
        reported = set()
        while True:
            finished = trainer.poll() is not None
            for entry in evaluated_by_step(eval_ledger.entries() if os.path.isdir(eval_ledger.path)
                                           else []):
                if entry.step in reported:
                    continue
                reported.add(entry.step)
                value = self.value(entry)
                trial.report(value, entry.step)
                trial.set_user_attr(sweep_study.STEP, entry.step)
                if trial.should_prune() and not finished:
                    _stop(trainer)
                    raise optuna.TrialPruned(f'{self.objective.metric} {value:.4g} at step '
                                             f'{entry.step}')
            # 130: the trainer's own Ctrl-C exit; -SIGINT: Ctrl-C before it could set one up
            if self.stopping.is_set() or trainer.returncode in (cli.EXIT_INTERRUPTED,
                                                                 -signal.SIGINT):
                raise TrialInterrupted(f'trial {trial.number} was interrupted')
            if finished:
                break
            time.sleep(POLL_SECS)
        if trainer.returncode == cli.EXIT_USAGE:  # the same flags would fail every trial
            raise UserError(f'the trainer refused the flags (exit 2): {_last_error(log_path)}')
        if trainer.returncode != 0 or not reported:
            failure = f'the trainer exited {trainer.returncode}: {_last_error(log_path)}'
            trial.set_user_attr(sweep_study.FAILURE, f'{failure} (log: {log_path})')
            raise TrialFailed(failure)
        return self.value(evaluated_by_step(eval_ledger.entries())[-1])

    def value(self, entry: ledger.LedgerEntry) -> float:
        metrics = scalar_metrics(entry.metrics)
        if self.objective.metric not in metrics:
            raise UserError(f'--objective={self.objective.metric}: the evaluation has no such '
                            f'metric; it has {", ".join(metrics)}')
        return float(metrics[self.objective.metric])


def _sigint_stops_it():
    """For the trainer: SIGINT raises KeyboardInterrupt even where the sweep runs in the
    background, which would leave SIGINT ignored in its children."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop(trainer: subprocess.Popen) -> None:
    """Interrupts the trainer as Ctrl-C does (it stops at once, exit 130); kills it if it hangs."""
    if trainer.poll() is None:
        trainer.send_signal(signal.SIGINT)
        try:
            trainer.wait(STOP_GRACE_SECS)
        except subprocess.TimeoutExpired:
            trainer.kill()
            trainer.wait()


def _last_error(log_path: str) -> str:
    lines = [line.strip() for line in open(log_path) if line.strip()]
    errors = [line for line in lines if line.startswith('error: ')]
    return (errors or lines or ['(no output)'])[-1]


def _eval_name(trainer_flags) -> str:
    given = [arg.split('=', 1)[1] for arg in trainer_flags if arg.startswith('--eval_name=')]
    return given[-1] if given else trainer_defaults()['eval_name']


def stop_trials_on_signal(sweep: Sweep) -> None:
    """Ctrl-C or SIGTERM reaches only the main thread: it also tells the trials in the others."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if callable(handler):
            def stop(signum, frame, handler=handler):
                sweep.stopping.set()
                handler(signum, frame)
            signal.signal(signum, stop)


def check_trainer_flags(trainer_flags, params):
    for arg in trainer_flags:
        name = arg[2:].split('=', 1)[0] if arg.startswith('--') else None
        if name in OWN_TRAINER_FLAGS:
            raise UserError(f'{arg}: the sweep sets --{name} for each trial (STUDY_DIR/trial-NNN, '
                            'train_and_evaluate); drop it from the trainer flags')
        if name in {param.name for param in params}:
            raise UserError(f'--param={name}: the trainer flags after -- set it too; drop it '
                            'there, each trial passes its own')


def main(argv):
    trainer_flags = argv[1:]
    if not FLAGS.study_dir or FLAGS.trials is None:
        raise UserError('--study_dir and --trials are required, e.g. --study_dir=runs/sweep '
                        '--trials=8')
    if not paths.is_local(FLAGS.study_dir):
        raise UserError(f'--study_dir={FLAGS.study_dir}: the study\'s SQLite database needs a '
                        'local folder; give one')
    model = next((arg.split('=', 1)[1] for arg in trainer_flags if arg.startswith('--model=')),
                 trainer_defaults()['model'])
    # A model of the user's own: its params are looked up as each trial's trainer will.
    usr_dir.import_for_command([sys.argv[0], *trainer_flags], read_model_dir=False)
    params = search_space.parse_params(FLAGS.param, model)
    objective = search_space.parse_objective(FLAGS.objective, model)
    check_trainer_flags(trainer_flags, params)
    study_dir = paths.local_path(FLAGS.study_dir)
    os.makedirs(study_dir, exist_ok=True)
    lock, holder = process_lock.try_exclusive_lock(os.path.join(study_dir, 'sweep.lock'),
                                                   f'pid {os.getpid()}\n')
    if lock is None:
        raise UserError(f'--study_dir={FLAGS.study_dir}: {holder or "another sweep"} is running '
                        'this study; wait for it, or use another --study_dir')
    with lock:
        sweep = Sweep(study_dir, model, params, objective, trainer_flags)
        study = sweep_study.open_study(study_dir, model, FLAGS.param, objective, trainer_flags,
                                       FLAGS.prune, FLAGS.prune_after_trials, FLAGS.seed)
        stop_trials_on_signal(sweep)
        sweep_study.write_hparams_experiment(study_dir, params, objective, _eval_name(trainer_flags))
        try:
            sweep_study.run(study, sweep, FLAGS.trials, FLAGS.parallel, TrialFailed)
        except (KeyboardInterrupt, termination.Terminated, TrialInterrupted) as stopped:
            # A signal, or Ctrl-C seen first by a trainer: the trials in other threads stop
            # their trainers too, and are marked interrupted before the sweep exits.
            sweep.stopping.set()
            sweep_study.wait_while_running(study, STOP_GRACE_SECS + 10)
            if isinstance(stopped, TrialInterrupted):
                raise KeyboardInterrupt from None
            raise
        finally:
            print(sweep_study.table(study, params, objective), flush=True)
    return cli.EXIT_OK


if __name__ == '__main__':
    define_flags()
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # the table says which trials failed, and why
    cli.run(main, own_modules=[], user_errors=(UserError,),
            stopped_message='the sweep stopped; run the same command to go on (the interrupted '
                            'trials resume from their checkpoints)')
