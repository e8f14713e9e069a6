"""What a run is asked to do: Settings, made from the trainer's flags once.

`Settings.from_flags` is the one place that reads the flag values; the fields' defaults are
the flags' own (trainer.config.flags.defaults()), so tests and the bench can build Settings
directly. "Model params" name three things, kept apart here: the --model_params flag (text),
Settings.model_param_overrides (that text parsed, with the model-param flags), and
model_fn_params() (the model's defaults overridden by them: what its model_fn receives).
"""
import dataclasses
from typing import Dict, Optional

from absl import logging

from common import paths
from common.errors import UserError
from models import registry
from trainer.config import modes, params_flag
from trainer.config.flags import defaults as flag_defaults
from trainer.input_kinds.base import InputOptions
from trainer.model_dir import run_files
from trainer.model_dir.metric_goal import MetricGoal

FLAG_DEFAULTS = flag_defaults()
# Input options that shape what the model sees at evaluation and in serving, not only in
# training: modes that read a trained model_dir take them from its flags.txt unless given.
MODEL_VIEW_OPTIONS = ('face_crop_fraction', 'face_image_size')
# What the HParams dashboard shows of a training run (with the input options and model params).
TRAINING_SETTINGS = ('model', 'mode', 'train_files', 'batch_size', 'train_steps',
                     'save_checkpoints_steps', 'random_seed', 'early_stopping_eval_name')


@dataclasses.dataclass(frozen=True)
class Settings:
    model: str = FLAG_DEFAULTS['model']
    mode: str = FLAG_DEFAULTS['mode']
    model_dir: Optional[str] = FLAG_DEFAULTS['model_dir']
    train_files: Optional[str] = FLAG_DEFAULTS['train_files']
    eval_files: Optional[str] = FLAG_DEFAULTS['eval_files']
    batch_size: int = FLAG_DEFAULTS['batch_size']
    train_steps: int = FLAG_DEFAULTS['train_steps']
    # The trainer's --train_steps when it was given: an eval job stops at its final checkpoint.
    final_train_steps: Optional[int] = None
    # Parsed from --model_params and the model-param flags: what overrides the model's defaults.
    model_param_overrides: Dict = dataclasses.field(default_factory=dict)
    warm_start_from: Optional[str] = FLAG_DEFAULTS['warm_start_from']
    warm_start_vars: str = FLAG_DEFAULTS['warm_start_vars']
    save_checkpoints_steps: int = FLAG_DEFAULTS['save_checkpoints_steps']
    keep_checkpoint_max: int = FLAG_DEFAULTS['keep_checkpoint_max']
    log_every_n_steps: int = FLAG_DEFAULTS['log_every_n_steps']
    lease_timeout_secs: int = FLAG_DEFAULTS['lease_timeout_secs']
    random_seed: int = FLAG_DEFAULTS['random_seed']
    input_options: InputOptions = InputOptions()
    eval_throttle_secs: int = FLAG_DEFAULTS['eval_throttle_secs']
    threshold_files: Optional[str] = FLAG_DEFAULTS['threshold_files']
    checkpoint: str = 'latest'
    eval_name: str = FLAG_DEFAULTS['eval_name']
    eval_timeout_secs: int = FLAG_DEFAULTS['eval_timeout_secs']
    wait_for_eval_secs: int = FLAG_DEFAULTS['wait_for_eval_secs']
    hypertune_metric: Optional[str] = FLAG_DEFAULTS['hypertune_metric']
    export_dir: Optional[str] = FLAG_DEFAULTS['export_dir']
    export_policy: str = FLAG_DEFAULTS['export_policy']
    export_goal: MetricGoal = MetricGoal.of(FLAG_DEFAULTS['export_metric'],
                                            FLAG_DEFAULTS['export_mode'], '--export_metric')
    exports_to_keep: int = FLAG_DEFAULTS['exports_to_keep']
    early_stopping_eval_name: Optional[str] = FLAG_DEFAULTS['early_stopping_eval_name']
    early_stopping_goal: MetricGoal = MetricGoal.of(FLAG_DEFAULTS['early_stopping_metric'],
                                                    FLAG_DEFAULTS['early_stopping_mode'],
                                                    '--early_stopping_metric')
    early_stopping_patience: int = FLAG_DEFAULTS['early_stopping_patience']
    early_stopping_check_secs: float = FLAG_DEFAULTS['early_stopping_check_secs']
    saved_model: Optional[str] = FLAG_DEFAULTS['saved_model']
    signature: str = FLAG_DEFAULTS['signature']
    decimal: Optional[str] = FLAG_DEFAULTS['decimal']
    thousands: Optional[str] = FLAG_DEFAULTS['thousands']
    encoding: Optional[str] = FLAG_DEFAULTS['encoding']
    sheet: Optional[str] = FLAG_DEFAULTS['sheet']
    benchmark_batches: int = FLAG_DEFAULTS['benchmark_batches']
    benchmark_train_steps: int = FLAG_DEFAULTS['benchmark_train_steps']
    distribution: str = FLAG_DEFAULTS['distribution']
    num_gpus: Optional[int] = FLAG_DEFAULTS['num_gpus']
    cpu_replicas: int = FLAG_DEFAULTS['cpu_replicas']
    precision: str = FLAG_DEFAULTS['precision']
    xla: bool = FLAG_DEFAULTS['xla']
    intra_op_threads: int = FLAG_DEFAULTS['intra_op_threads']
    inter_op_threads: int = FLAG_DEFAULTS['inter_op_threads']
    flagfile_text: str = ''  # what MODEL_DIR/flags.txt records

    @classmethod
    def from_flags(cls, flag_values, flagfile_text: str = '') -> 'Settings':
        """The settings the trainer's flags give (flag_values: absl's FLAGS)."""
        plain = {field.name for field in dataclasses.fields(cls)} - {
            'final_train_steps', 'model_param_overrides', 'input_options', 'export_goal',
            'early_stopping_goal', 'checkpoint', 'flagfile_text', 'model'}
        trained = _trained_flags(flag_values)
        model = trained_model(flag_values, trained[0])
        return cls(
            **{name: getattr(flag_values, name) for name in plain},
            model=model,
            final_train_steps=(flag_values.train_steps if flag_values['train_steps'].present
                               else None),
            model_param_overrides=model_param_overrides(flag_values, model, *trained),
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
    trained model_dir, read once for model_param_overrides and trained_input_options; ({}, None)
    in the other modes."""
    if not modes.MODES[flag_values.mode].reads_trained_model or not flag_values.model_dir:
        return {}, None
    path = paths.join(flag_values.model_dir, run_files.FLAGS_FILE)
    return run_files.read_flagfile(run_files.recorded_flags(flag_values.model_dir) or ''), path


def trained_model(flag_values, recorded: Dict) -> str:
    """--model; in evaluate, continuous_eval and export, the model MODEL_DIR/flags.txt names
    when --model is not given, and a different one given is refused before its params are read."""
    recorded_model = recorded.get('model')
    if not recorded_model:
        return flag_values.model
    if flag_values['model'].present:
        run_files.check_recorded_model(flag_values.model_dir, recorded_model, flag_values.model,
                                       'leave --model out, or use another --model_dir')
        return flag_values.model
    return recorded_model


def model_param_overrides(flag_values, model: str, recorded: Dict, path: Optional[str]) -> Dict:
    """What overrides the model's DEFAULT_PARAMS: --model_params and the model-param flags
    (--dropout_rate...). In evaluate, continuous_eval and export the model is built as it was
    trained: the params in MODEL_DIR/flags.txt, overridden name by name by those given."""
    trained = _params_given(recorded.get('model_params'), recorded, model, f'{path}: ')
    given = _params_given(flag_values.model_params, {
        name: flag_values[name].value for name in registry.param_owners()
        if flag_values[name].value is not None}, model)
    return {**trained, **given}


def _params_given(model_params: Optional[str], flag_params: Dict, model: str,
                  where: str = '') -> Dict:
    """The params that --model_params and the model-param flags (flag_params, {name: value},
    other flags ignored) set; where: the file they were read from, for messages."""
    defaults, owners = registry.get(model).default_params, registry.param_owners()
    params = params_flag.parse(model_params, defaults, model, f'{where}--model_params')
    for name, value in flag_params.items():
        if name not in owners:
            continue
        if name not in defaults:
            raise UserError(f'{where}--{name}: a param of {" and ".join(owners[name])}, not of '
                            f'{model}; drop it, or pass --model={owners[name][0]}')
        text = str(value)
        if isinstance(defaults[name], (tuple, list)) and not text.startswith('['):
            text = f'[{text}]'  # --tower_filters=32,64 as well as [32,64]
        value = params_flag.typed(text, defaults[name], f'{where}--{name}={value}')
        if name in params and params[name] != value:
            raise UserError(f'{where}--{name}={text} and --model_params {name}='
                            f'{params[name]} differ; give {name} once')
        params[name] = value
    return params


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


def model_fn_params(settings: Settings, spec) -> Dict:
    """The params handed to the model_fn: the model's defaults, overridden by the settings."""
    return {**spec.default_params, **settings.model_param_overrides}

