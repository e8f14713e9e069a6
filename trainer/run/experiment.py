"""Everything a run is built from: the settings (made from the flags once) and what they build.

`Settings.from_flags` is the one place that reads the flag values; `build(settings, spec)`
makes the Estimator and, when a mode asks for them, its train and eval specs, serving
receiver, exports and eval job (as tensor2tensor's create_experiment or TFX's trainer_fn).
Parts are built on first use, so a mode never checks files it does not read.
"""
import contextlib
import dataclasses
import functools
from typing import Callable, Dict, Optional

import tensorflow as tf
from absl import logging

from common import files
from common.errors import UserError
from input_fns import pipeline
from models import precision, registry
from trainer.cluster import devices, vertex_env
from trainer.config import params_flag
from trainer.evaluation import eval_job, ledger
from trainer.evaluation.export_policy import LedgerExports
from trainer.evaluation.metric_goal import MetricGoal
from trainer.input_kinds import registry as input_kinds
from trainer.input_kinds.base import InputOptions
from trainer.observe import hparams
from trainer.run import checkpoints, hooks, run_files, train_lock
from trainer.serving import export

MODEL_PARAM_FLAGS = ('learning_rate', 'learning_rate_decay_steps', 'optimizer')
# Input options that shape what the model sees at evaluation and in serving, not only in
# training: modes that read a trained model_dir take them from its flags.txt unless given.
MODEL_VIEW_OPTIONS = ('face_crop_fraction',)
MODEL_DIR_READING_MODES = ('evaluate', 'continuous_eval', 'export')
# What the HParams dashboard shows of a training run (with the input options and model params).
TRAINING_SETTINGS = ('model', 'mode', 'train_files', 'batch_size', 'train_steps',
                     'save_checkpoints_steps', 'random_seed', 'early_stopping_eval_name')


@dataclasses.dataclass(frozen=True)
class Settings:
    model: str = 'mnist_cnn'
    mode: str = 'train'
    model_dir: Optional[str] = None
    train_files: Optional[str] = None
    eval_files: Optional[str] = None
    batch_size: int = 100
    train_steps: int = 1000
    # The trainer's --train_steps when it was given: an eval job stops at its final checkpoint.
    final_train_steps: Optional[int] = None
    model_params: Dict = dataclasses.field(default_factory=dict)  # overrides of the model's own
    save_checkpoints_steps: int = 500
    keep_checkpoint_max: int = 5
    log_every_n_steps: int = 100
    random_seed: int = 0
    input_options: InputOptions = InputOptions()
    eval_throttle_secs: int = 60
    threshold_files: Optional[str] = None
    checkpoint: str = 'latest'
    eval_name: str = 'default'
    eval_timeout_secs: int = 3600
    export_dir: Optional[str] = None
    export_policy: str = 'best'
    export_goal: MetricGoal = MetricGoal('loss', 'min', '--export_metric')
    exports_to_keep: int = 5
    early_stopping_eval_name: Optional[str] = None
    early_stopping_goal: MetricGoal = MetricGoal('loss', 'min', '--early_stopping_metric')
    early_stopping_patience: int = 5
    early_stopping_check_secs: float = 10
    saved_model: Optional[str] = None
    signature: str = 'serving_default'
    benchmark_batches: int = 300
    benchmark_train_steps: int = 30
    distribution: str = 'none'
    num_gpus: Optional[int] = None
    cpu_replicas: int = 1
    precision: str = 'float32'
    xla: bool = False
    flagfile_text: str = ''  # what MODEL_DIR/flags.txt records

    @classmethod
    def from_flags(cls, flag_values, flagfile_text: str = '') -> 'Settings':
        """The settings the trainer's flags give (flag_values: absl's FLAGS)."""
        plain = {field.name for field in dataclasses.fields(cls)} - {
            'final_train_steps', 'model_params', 'input_options', 'export_goal',
            'early_stopping_goal', 'checkpoint', 'flagfile_text'}
        trained = _trained_flags(flag_values)
        return cls(
            **{name: getattr(flag_values, name) for name in plain},
            final_train_steps=(flag_values.train_steps if flag_values['train_steps'].present
                               else None),
            model_params=given_model_params(flag_values, *trained),
            input_options=trained_input_options(flag_values, *trained),
            checkpoint=flag_values.checkpoint or 'latest',
            export_goal=MetricGoal.of(flag_values.export_metric, flag_values.export_mode,
                                      '--export_metric'),
            early_stopping_goal=MetricGoal.of(flag_values.early_stopping_metric,
                                              flag_values.early_stopping_mode,
                                              '--early_stopping_metric'),
            flagfile_text=flagfile_text)


def _trained_flags(flag_values):
    """(the flags in MODEL_DIR/flags.txt as {name: text}, its path) in the modes that read a
    trained model_dir, read once for given_model_params and trained_input_options; ({}, None)
    in the other modes."""
    if flag_values.mode not in MODEL_DIR_READING_MODES or not flag_values.model_dir:
        return {}, None
    path = files.join(flag_values.model_dir, run_files.FLAGS_FILE)
    return run_files.read_flagfile(run_files.recorded_flags(flag_values.model_dir) or ''), path


def given_model_params(flag_values, recorded: Dict, path: Optional[str]) -> Dict:
    """What overrides the model's DEFAULT_PARAMS: --model_params and the flags of
    MODEL_PARAM_FLAGS. In evaluate, continuous_eval and export the model is built as it was
    trained: the --model_params in MODEL_DIR/flags.txt, overridden name by name by those given."""
    defaults = registry.get(flag_values.model).default_params
    params = params_flag.parse(recorded.get('model_params'), defaults, flag_values.model,
                               f'{path}: --model_params')
    given = params_flag.parse(flag_values.model_params, defaults, flag_values.model)
    for name in MODEL_PARAM_FLAGS:
        if getattr(flag_values, name) is None:
            continue
        if name in given:
            raise UserError(f'--{name} and --model_params both set {name}; give it once')
        given[name] = getattr(flag_values, name)
    return {**params, **given}


def trained_input_options(flag_values, recorded: Dict, path: Optional[str]) -> InputOptions:
    """The input flags; in evaluate, continuous_eval and export, the model's view of its input
    (MODEL_VIEW_OPTIONS) is the one it was trained with, read from MODEL_DIR/flags.txt,
    unless the flag is given (then a differing value is warned about)."""
    options = InputOptions(**{field.name: getattr(flag_values, field.name)
                              for field in dataclasses.fields(InputOptions)})
    for name in MODEL_VIEW_OPTIONS:
        if name not in recorded:
            continue
        try:
            trained = type(getattr(options, name))(recorded[name])
        except ValueError:
            raise UserError(f'{path}: --{name}={recorded[name]} is not a valid value; fix that '
                            f'line, or give --{name}') from None
        if not flag_values[name].present:
            options = dataclasses.replace(options, **{name: trained})
        elif getattr(options, name) != trained:
            logging.warning('--%s=%s differs from the %s the model was trained with (%s)',
                            name, getattr(options, name), trained, path)
    return options


def hparam_settings(settings: Settings) -> Dict:
    """The settings that shape a training run, flat, as the HParams dashboard compares them."""
    values = {field.name: getattr(settings, field.name) for field in dataclasses.fields(settings)
              if field.name in TRAINING_SETTINGS}
    values.update(dataclasses.asdict(settings.input_options))
    return values


def model_params(settings: Settings, spec) -> Dict:
    """The model's params: its defaults, overridden by the settings that were given."""
    return {**spec.default_params, **settings.model_params}


def build_estimator(settings: Settings, spec, plan: devices.Plan) -> tf.estimator.Estimator:
    pipeline.worker_share_from_tf_config()  # a bad TF_CONFIG: one line, not RunConfig's traceback
    devices.log_plan(plan)
    config = tf.estimator.RunConfig(
        model_dir=settings.model_dir, tf_random_seed=settings.random_seed,
        save_checkpoints_steps=settings.save_checkpoints_steps,
        keep_checkpoint_max=settings.keep_checkpoint_max or None,
        save_summary_steps=settings.log_every_n_steps,
        log_step_count_steps=None)  # ProgressHook logs instead
    model_fn = checkpoints.with_checkpoint_check(
        precision.with_policy(spec.model_fn, plan.precision), spec.name)
    return tf.estimator.Estimator(model_fn, config=plan.run_config(config),
                                  params=model_params(settings, spec))


class Experiment:
    """A model with its settings: the Estimator, and what the modes run, each built on first use."""

    def __init__(self, settings: Settings, spec, estimator: tf.estimator.Estimator,
                 plan: devices.Plan):
        self.settings, self.spec, self.estimator, self.plan = settings, spec, estimator, plan
        self.kind = input_kinds.for_model(spec)

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
                                                   self.estimator.config.is_chief)
        return tf.estimator.TrainSpec(self.train_input_fn(), max_steps=s.train_steps,
                                      hooks=[progress] + self.hparams_hooks
                                      + self.early_stopping_hooks + tensorboard)

    @functools.cached_property
    def hparams_hooks(self):
        """The chief logs the run's settings to TensorBoard's HParams dashboard."""
        if not self.estimator.config.is_chief:
            return []
        return [hparams.HParamsHook(self.settings.model_dir, hparams.run_hparams(
            hparam_settings(self.settings), model_params(self.settings, self.spec)))]

    @functools.cached_property
    def eval_spec(self) -> tf.estimator.EvalSpec:
        """train_and_evaluate's own evaluation, on one machine."""
        return tf.estimator.EvalSpec(self.eval_input_fn(), steps=None, start_delay_secs=0,
                                     throttle_secs=self.settings.eval_throttle_secs)

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
            estimator = build_estimator(dataclasses.replace(
                s, model_params={**s.model_params, **decision.model_params}), self.spec, self.plan)
        extras = export.ServingExtras(self.kind.signature_renames,
                                      self.kind.warmup_inputs(self.spec, s.input_options),
                                      decision and decision.record)
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
        return eval_job.EvalJob(self.estimator, eval_fn, s.eval_files,
                                ledger.Ledger(s.model_dir, s.eval_name), exports or None,
                                extra_metrics)

    def data_error(self, error: tf.errors.OpError) -> Optional[UserError]:
        """An error raised while reading files, as one naming the file it came from, if found."""
        if not isinstance(error, (tf.errors.InvalidArgumentError, tf.errors.DataLossError)):
            return None
        s = self.settings
        reads = {'train': [('--train_files', s.train_files)],
                 'evaluate': [('--eval_files', s.eval_files)],
                 'continuous_eval': [('--eval_files', s.eval_files)],
                 'train_and_evaluate': [('--train_files', s.train_files),
                                        ('--eval_files', s.eval_files)]}.get(s.mode, [])
        for flag_name, pattern in reads:
            found = self.kind.find_bad_file(self.spec, pattern)
            if found:
                path, problem = found
                return UserError(f'{path}: {problem} (a {flag_name} file, found while reading '
                                 'it); fix or remove that file, or prepare the shards again')
        return None

    def check_model(self) -> None:
        """Refuses a model_dir that holds another model (its flags.txt names it)."""
        run_files.check_model(self.settings.model_dir, self.spec.name,
                              'pass --model={previous}, or use another --model_dir')

    def check_checkpoint_fits(self) -> None:
        """Builds the training graph once, aside, so that a latest checkpoint the model no longer
        fits stops training before anything in model_dir changes
        (checkpoints.with_checkpoint_check)."""
        if not tf.train.latest_checkpoint(self.settings.model_dir):
            return
        with tf.Graph().as_default():
            features, labels = tf.nest.map_structure(
                lambda spec: tf.compat.v1.placeholder(spec.dtype, spec.shape),
                self.train_spec.input_fn().element_spec)
            self.estimator.model_fn(features, labels, tf.estimator.ModeKeys.TRAIN,
                                    self.estimator.config)

    @contextlib.contextmanager
    def training(self, with_eval_spec: bool = False):
        """Around training: checks first, then the chief alone changes model_dir.

        The model and the input files are checked before anything in model_dir changes,
        so a bad command leaves it as it was. The chief then holds the model_dir's training
        lock (a second trainer stops, naming it), mends what a killed run left, records the
        flags and, once training ends, writes train_finished.json for eval jobs. Workers and
        parameter servers of its cluster take no lock.
        """
        s = self.settings
        is_chief = self.estimator.config.is_chief
        if is_chief:
            self.check_model()
        self.train_spec  # noqa: B018: builds the input_fn, which checks the files
        if with_eval_spec:
            self.eval_spec  # noqa: B018
        if not is_chief:
            yield
            return
        self.check_checkpoint_fits()
        with train_lock.TrainLock(s.model_dir):
            checkpoints.prepare_to_resume(s.model_dir)
            run_files.record_flags(s.model_dir, self.spec.name, s.flagfile_text)
            run_files.clear_train_finished(s.model_dir)
            yield
            # Tells eval jobs which checkpoint is final, and why training stopped.
            run_files.write_train_finished(
                s.model_dir, s.train_steps,
                next((hook.reason for hook in self.early_stopping_hooks), None))


def build(settings: Settings, spec) -> Experiment:
    plan = devices.from_settings(settings)
    return Experiment(settings, spec, build_estimator(settings, spec, plan), plan)
