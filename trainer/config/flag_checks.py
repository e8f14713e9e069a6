"""The checks absl runs on the trainer's flags as it parses them: each failure is one line that
names the flag and says what to give."""
import functools
import re

from absl import flags

from common import files, paths
from models import registry, training
from trainer.config import modes
from trainer.input_kinds.base import AUGMENT_TUNING, InputOptions

OPTIMIZER_NAMES = ', '.join(list(training.OPTIMIZERS)[:-1]) + ' or ' + list(training.OPTIMIZERS)[-1]
EVAL_NAME = re.compile(r'[A-Za-z0-9_.-]+')


def register_checks(flag_values):
    check = functools.partial(flags.register_validator, flag_values=flag_values)
    check_together = functools.partial(flags.register_multi_flags_validator,
                                       flag_values=flag_values)
    check('model', lambda name: name in registry.names(), message='--model must be one of: '
          + ', '.join(registry.names()) + '; yours: add --usr_dir=FOLDER (docs/your-model.md)')
    check('optimizer', lambda name: name is None or name in training.OPTIMIZERS,
          message=f'--optimizer must be {OPTIMIZER_NAMES}')
    check('learning_rate', lambda rate: rate is None or rate > 0,
          message='--learning_rate must be positive')
    check('checkpoint', _checkpoint_exists,
          message='--checkpoint: no such checkpoint (give latest, all, a step, '
          'or the path without .index, e.g. MODEL_DIR/model.ckpt-1000)')
    check_together(['mode', 'checkpoint'],
                   lambda v: v['checkpoint'] != 'all' or v['mode'] == 'evaluate',
                   message='--checkpoint=all is only for --mode=evaluate')
    for name in ('eval_name', 'early_stopping_eval_name'):
        check(name, lambda value: value is None or EVAL_NAME.fullmatch(value),
              message=f'--{name} may use only letters, digits, _, . and -')
    check_together(['augment', *AUGMENT_TUNING], lambda v: v['augment'] or all(
        v[name] == getattr(InputOptions, name) for name in AUGMENT_TUNING),
        message=', '.join(f'--{name}' for name in AUGMENT_TUNING) +
        ' tune --augment: give --augment too')
    check_together(['mode'] + sorted({f for mode in modes.MODES.values() for f in mode.needs}),
                   _required_for_mode, message='a flag this mode needs is missing')


def _checkpoint_exists(value):
    return (value in (None, 'latest', 'all') or value.isdigit()
            # a bucket is checked when used (checkpoints.resolve), with a message naming it
            or not paths.is_local(value) or files.exists(value + '.index'))


def _required_for_mode(values):
    missing = [name for name in modes.MODES[values['mode']].needs if not values[name]]
    if missing:
        raise flags.ValidationError(
            f'--mode={values["mode"]} needs ' + ', '.join(f'--{name}' for name in missing))
    return True
