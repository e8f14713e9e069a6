"""What a run is built from its Settings (trainer.config.settings).

`build(settings, spec)` makes the Estimator and, when a mode asks for them, its train and eval specs, serving
receiver, exports and eval job (as tensor2tensor's create_experiment or TFX's trainer_fn).
Parts are built on first use, so a mode never checks files it does not read.
"""
import contextlib
import dataclasses
import functools
import sys
from typing import Callable, Optional

import tensorflow as tf

from common import termination, tf_config
from common.errors import UserError
from models import precision, training
from trainer.cluster import devices, vertex_env
from trainer.config import modes
from trainer.config.settings import Settings, hparam_settings, model_fn_params
from trainer.evaluation import claims, eval_job, ledger_reports
from trainer.evaluation.export_policy import LedgerExports
from trainer.input_kinds import registry as input_kinds
from trainer.model_dir import checkpoint_fit, checkpoints, ledger, run_files, train_lock
from trainer.observe import hparams, tuner_metrics
from trainer.run import data_schema, hooks, job_end, model_fn_checks, warm_starting
from trainer.serving import export


def build_estimator(settings: Settings, spec, plan: devices.Plan,
                    warm_start: warm_starting.WarmStart = None) -> tf.estimator.Estimator:
    tf_config.role()  # a bad TF_CONFIG: one line, not RunConfig's traceback
    devices.log_plan(plan)
    config = tf.estimator.RunConfig(
        model_dir=settings.model_dir, tf_random_seed=settings.random_seed,
        save_checkpoints_steps=settings.save_checkpoints_steps,
        keep_checkpoint_max=settings.keep_checkpoint_max or None,
        save_summary_steps=settings.log_every_n_steps,
        log_step_count_steps=None,  # ProgressHook logs instead
        # Given here, not by replace(): the constructor alone sets up the distribute coordinator.
        train_distribute=plan.strategy() if plan.sync_workers else None)
    model_fn = warm_starting.with_warm_start(checkpoint_fit.with_checkpoint_check(
        precision.with_policy(training.with_weight_averaging(
            model_fn_checks.checked(spec.model_fn, spec.name)), plan.precision), spec.name),
        warm_start)
    return tf.estimator.Estimator(model_fn, config=plan.run_config(config),
                                  params=data_schema.estimator_params(settings, spec))


class Experiment:
    """A model with its settings: the Estimator, and what the modes run, each built on first use."""

    def __init__(self, settings: Settings, spec, estimator: tf.estimator.Estimator,
                 plan: devices.Plan, warm_start: warm_starting.WarmStart = None):
        self.settings, self.spec, self.estimator, self.plan = settings, spec, estimator, plan
        self.warm_start = warm_start
        self.kind = input_kinds.for_model(spec)

    @property
    def is_chief(self) -> bool:
        # TF_CONFIG's answer: under multi_worker_mirrored, RunConfig calls every task the chief
        # until tf.estimator's distribute coordinator gives each its role.
        return tf_config.role().is_chief

    def train_input_fn(self) -> Callable:
        # A resumed run reshuffles differently instead of replaying the first epoch's order.
        seed = self.settings.random_seed + checkpoints.latest_saved_step(self.settings.model_dir)
        # --batch_size is the global batch: with N replicas each input_fn call makes 1/N of it.
        replica_batch = self.plan.per_replica_batch(self.settings.batch_size)
        return self.kind.train_input_fn(self.spec, self.settings.train_files, '--train_files',
                                        replica_batch, seed, self.settings.input_options)

    def eval_input_fn(self, file_pattern: Optional[str] = None,
                      flag_name: str = '--eval_files') -> Callable:
        return self.kind.eval_input_fn(self.spec, file_pattern or self.settings.eval_files,
                                       flag_name, self.settings.batch_size,
                                       self.settings.input_options)

    @functools.cached_property
    def early_stopping_hooks(self):
        s = self.settings
        if not s.early_stopping_eval_name:
            return []
        return [hooks.EarlyStoppingHook(ledger.Ledger(s.model_dir, s.early_stopping_eval_name),
                                        s.early_stopping_goal, s.early_stopping_patience,
                                        s.early_stopping_check_secs)]

    @functools.cached_property
    def train_spec(self) -> tf.estimator.TrainSpec:
        s = self.settings
        progress = hooks.ProgressHook(s.log_every_n_steps, s.batch_size, s.model_dir,
                                      total_steps=s.train_steps)
        tensorboard = vertex_env.tensorboard_hooks(s.log_every_n_steps,
                                                   self.is_chief)
        return tf.estimator.TrainSpec(self.train_input_fn(), max_steps=s.train_steps,
                                      hooks=[progress, hooks.StopOnSignalHook()]
                                      + self.hparams_hooks + self.early_stopping_hooks
                                      + tensorboard,
                                      saving_listeners=[hooks.NoEvaluationAfterSignal(s.model_dir)])

    @functools.cached_property
    def hparams_hooks(self):
        """The chief logs the run's settings to TensorBoard's HParams dashboard."""
        if not self.is_chief:
            return []
        return [hparams.HParamsHook(self.settings.model_dir, hparams.run_hparams(
            hparam_settings(self.settings), model_fn_params(self.settings, self.spec)))]

    @functools.cached_property
    def eval_spec(self) -> tf.estimator.EvalSpec:
        """train_and_evaluate's own evaluation, on one machine: into eval_NAME/ and its ledger."""
        return tf.estimator.EvalSpec(self.eval_input_fn(), steps=None, start_delay_secs=0,
                                     throttle_secs=self.settings.eval_throttle_secs,
                                     name=self.settings.eval_name,
                                     exporters=[ledger_reports.LedgerRecorder(self.eval_job)])

    def serving_receiver_fn(self) -> Callable:
        return self.kind.serving_receiver_fn(self.spec, self.settings.input_options)

    def export_checkpoint(self, checkpoint_path: str) -> str:
        """Exports a checkpoint to EXPORT_DIR/<its global step>/ for TF Serving, with the kind's
        signature names and warm-up requests, and the decision an eval job chose, if any."""
        s = self.settings
        decision = self.kind.serving_decision(s.model_dir, checkpoints.step_of(checkpoint_path),
                                              s.eval_name)
        estimator = self.estimator
        if decision:  # baked into the graph: the exported model is built with it
            estimator = build_estimator(dataclasses.replace(s, model_param_overrides={
                **s.model_param_overrides, **decision.model_param_overrides}), self.spec, self.plan)
        extras = export.ServingExtras(self.kind.signature_renames,
                                      self.kind.warmup_inputs(self.spec, s.input_options),
                                      decision and decision.record,
                                      self.kind.serving_reading(self.spec))
        return export.export_saved_model(estimator, self.serving_receiver_fn(), s.export_dir,
                                         checkpoint_path, extras)

    @functools.cached_property
    def eval_job(self) -> eval_job.EvalJob:
        s = self.settings
        exports = s.export_dir and LedgerExports(s.export_dir, s.export_policy, s.export_goal,
                                                 s.exports_to_keep, self.export_checkpoint,
                                                 self.spec.name)
        eval_fn = self.eval_input_fn()  # checks the eval files once, for both uses
        extra_metrics = self.kind.extra_metrics(self.estimator, eval_fn, s.eval_files,
                                                self.eval_input_fn, s.threshold_files)
        eval_ledger = ledger.Ledger(s.model_dir, s.eval_name)
        return eval_job.EvalJob(self.estimator, eval_fn, s.eval_files, eval_ledger,
                                exports or None, extra_metrics, self.tuner_report.report,
                                claims.Claims(eval_ledger, s.eval_files, s.lease_timeout_secs))

    @functools.cached_property
    def tuner_report(self) -> tuner_metrics.TunerReport:
        # --mode=evaluate's stdout is its JSON results: the Katib line goes to stderr there.
        stream = sys.stderr if self.settings.mode == 'evaluate' else sys.stdout
        return tuner_metrics.TunerReport(stream, self.settings.hypertune_metric)

    def data_error(self, error: tf.errors.OpError) -> Optional[UserError]:
        """An error raised while reading files, as one naming the file it came from, if found."""
        if not isinstance(error, (tf.errors.InvalidArgumentError, tf.errors.DataLossError)):
            return None
        s = self.settings
        for name in modes.MODES[s.mode].data_flags:
            flag_name = f'--{name}'
            found = self.kind.find_bad_file(self.spec, getattr(s, name))
            if found:
                path, problem = found
                return UserError(f'{path}: {problem} (a {flag_name} file, found while reading '
                                 'it); fix or remove that file, or prepare the shards again')
        return None

    def check_model(self) -> None:
        """Refuses a model_dir that holds another model (its flags.txt names it)."""
        run_files.check_model(self.settings.model_dir, self.spec.name, run_files.TRAIN_IT_ON)

    def check_single_process(self) -> None:
        """A model that trains in one process only (ModelSpec.single_process) refuses more."""
        if not self.spec.single_process:
            return
        name, distribution = self.spec.name, self.settings.distribution
        if distribution != 'none':
            raise UserError(f'--distribution={distribution}: {name} trains in one process; '
                            'use --distribution=none')
        spread = sorted(set(tf_config.cluster_jobs()) & {'worker', 'ps'})
        if spread:
            raise UserError(f'TF_CONFIG: a cluster with {" and ".join(spread)} tasks, but {name} '
                            'trains in one process; run a chief alone (./run.sh cluster '
                            '--workers=0 --ps=0, evaluators as you like)')

    def check_checkpoint_fits(self) -> None:
        """Builds the training graph once, aside, so that a latest checkpoint the model no longer
        fits (checkpoint_fit.with_checkpoint_check), or lacks a variable the training graph
        restores (checkpoint_fit.check_restorable), stops training before anything in model_dir
        changes, flags.txt included. A model built from its data's schema is built so
        even without a checkpoint: whether it fits the data (the label's task, the features its
        params name) shows only then; so is one warm-started, whose source must fit it."""
        latest = tf.train.latest_checkpoint(self.settings.model_dir)
        if not latest and self.spec.schema is None and not self.settings.warm_start_from:
            return
        with tf.Graph().as_default():
            features, labels = tf.nest.map_structure(
                lambda spec: (tf.compat.v1.sparse_placeholder  # a table's list of any length
                              if isinstance(spec, tf.SparseTensorSpec) else
                              tf.compat.v1.placeholder)(spec.dtype, spec.shape),
                self.train_spec.input_fn().element_spec)
            self.estimator.model_fn(features, labels, tf.estimator.ModeKeys.TRAIN,
                                    self.estimator.config)
            if latest:
                checkpoint_fit.check_restorable(latest, tf.compat.v1.global_variables())

    @contextlib.contextmanager
    def training(self, with_eval_spec: bool = False):
        """Around training: checks first, then the chief alone changes model_dir.

        The model and the input files are checked before anything in model_dir changes,
        so a bad command leaves it as it was. The chief then holds the model_dir's training
        lock (a second trainer stops, naming it), mends what a killed run left, records the
        flags and, once training ends, writes train_finished.json for eval jobs and
        parameter servers, then waits --wait_for_eval_secs for the eval job's verdict on the
        final checkpoint. SIGTERM or Ctrl-C while it trains stops it at the step it reached,
        saved (common.termination), without train_finished.json. Workers and parameter
        servers of its cluster take no lock.
        """
        s = self.settings
        self.check_single_process()
        is_chief = self.is_chief
        if is_chief:
            self.check_model()
        self.train_spec  # noqa: B018: builds the input_fn, which checks the files
        if with_eval_spec:
            self.eval_spec  # noqa: B018
        if not is_chief:
            with job_end.leaving_when_training_ends(self.estimator.config.task_type, s.model_dir,
                                                    s.train_steps):
                yield
            return
        self.check_checkpoint_fits()
        with train_lock.TrainLock(s.model_dir, s.lease_timeout_secs):
            checkpoints.prepare_to_resume(s.model_dir)
            if self.spec.schema is not None:  # before flags.txt, which eval jobs wait for
                run_files.record_schema(s.model_dir, self.spec.schema)
            run_files.record_flags(s.model_dir, self.spec.name, s.flagfile_text)
            if self.warm_start:  # a fresh model_dir's first run: what status says it started from
                run_files.record_warm_start(s.model_dir, dataclasses.asdict(self.warm_start))
            run_files.clear_train_finished(s.model_dir)
            with termination.finish_first('saving the checkpoint of the step reached'):
                yield
            # Tells eval jobs which checkpoint is final, and why training stopped.
            run_files.write_train_finished(
                s.model_dir, s.train_steps,
                next((hook.reason for hook in self.early_stopping_hooks), None))
        if s.wait_for_eval_secs:
            job_end.wait_for_eval(ledger.Ledger(s.model_dir, s.eval_name),
                                  run_files.train_finished(s.model_dir).step,
                                  s.wait_for_eval_secs)


def build(settings: Settings, spec) -> Experiment:
    spec = data_schema.with_schema(settings, spec)
    input_kinds.check_options(spec, settings.input_options)
    plan = devices.from_settings(settings)
    warm_start = warm_starting.plan(settings)
    estimator = build_estimator(settings, spec, plan, warm_start)
    return Experiment(settings, spec, estimator, plan, warm_start)
