"""What a hyperparameter search is asked for: --param, --objective and the trial counts.

Shared by `deploy katib`, `deploy vertex --hptune` and `./run.sh sweep`, so the three read
the same text the same way and refuse the same mistakes, each in one line naming the flag:

  --param=NAME:double:MIN:MAX[:log]   a float param of the model (log: sampled on a log scale),
                                      or an input flag of its kind (tunable_defaults)
  --param=NAME:int:MIN:MAX[:log]      an integer param
  --param=NAME:categorical:A,B,C      any param; values as --NAME takes them ([32,64] for lists)
  --objective=METRIC:maximize|minimize   a metric the model's evaluation reports
"""
import dataclasses
import re
from typing import Dict, List, Optional, Sequence, Tuple

from common.errors import UserError
from models import registry
from trainer.config import params_flag

KINDS = ('double', 'int', 'categorical')
GOALS = ('maximize', 'minimize')
PARAM_FORMS = ('NAME:double:MIN:MAX[:log], NAME:int:MIN:MAX[:log] or '
               'NAME:categorical:A,B,C')
_CATEGORY = re.compile(r'\[[^\]]*\]|[^,]+')  # a list value keeps its commas: [32,64],[32]


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    kind: str  # double, int or categorical
    low: Optional[float] = None  # double and int: the range, both ends in it
    high: Optional[float] = None
    log: bool = False
    choices: Tuple[str, ...] = ()  # categorical: each as the param's flag takes it

    def flag_value(self, value) -> str:
        """A sampled value as the trainer's --NAME flag takes it."""
        if self.kind == 'double':
            return repr(float(value))
        return str(int(value)) if self.kind == 'int' else str(value)


@dataclasses.dataclass(frozen=True)
class Objective:
    metric: str
    goal: str  # maximize or minimize

    @property
    def maximize(self) -> bool:
        return self.goal == 'maximize'


def parse_param(text: str, model: str, flag: str = '--param') -> Param:
    where = f'{flag}={text}'
    name, _, rest = text.partition(':')
    kind, _, bounds = rest.partition(':')
    params, input_flags = tunable_defaults(model)
    defaults = {**input_flags, **params}
    if kind not in KINDS:
        raise UserError(f'{where}: write {PARAM_FORMS}')
    if name not in defaults:
        also = f'; its input flags: {", ".join(input_flags)}' if input_flags else ''
        raise UserError(f'{where}: {model} has no param {name!r}; its params: '
                        f'{", ".join(sorted(params))}{also}')
    default = defaults[name]
    if kind == 'categorical':
        choices = tuple(_CATEGORY.findall(bounds))
        if not choices:
            raise UserError(f'{where}: give the values after categorical:, e.g. A,B,C')
        for choice in choices:  # each must be a value the param's flag takes
            params_flag.typed(choice, default, f'{where}: {choice}')
        return Param(name, kind, choices=choices)
    wanted = float if kind == 'double' else int
    if isinstance(default, bool) or type(default) is not wanted:
        raise UserError(f'{where}: {name} is not {"a float" if kind == "double" else "an integer"} '
                        f'param (its default is {default!r}); use categorical:A,B,C')
    parts = bounds.split(':')
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != 'log'):
        raise UserError(f'{where}: write {name}:{kind}:MIN:MAX or {name}:{kind}:MIN:MAX:log')
    low, high = (params_flag.typed(part, wanted(0), f'{where}: {part}') for part in parts[:2])
    if low >= high:
        raise UserError(f'{where}: the min {low} is not below the max {high}')
    log = len(parts) == 3
    if log and low <= 0:
        raise UserError(f'{where}: a log scale needs a min above 0')
    return Param(name, kind, low, high, log)


def tunable_defaults(model: str) -> Tuple[Dict, Dict]:
    """What a search may tune for model, each {name: default}: its params, and the input flags of
    its kind (a trial passes --NAME=VALUE for either alike)."""
    from trainer.input_kinds.base import AUGMENT_TUNING, InputOptions  # TensorFlow: only now
    input_flags = {'image_classification': AUGMENT_TUNING,
                   'face_pairs': ('same_fraction', 'self_pair_fraction', 'face_crop_fraction',
                                  'face_image_size')}
    spec = registry.get(model)
    return spec.default_params, {name: getattr(InputOptions, name)
                                 for name in input_flags.get(spec.input_kind, ())}


def parse_params(texts: Sequence[str], model: str, flag: str = '--param') -> List[Param]:
    if not texts:
        raise UserError(f'{flag} is required: give at least one, e.g. {flag}=dropout_rate:double:0.1:0.5')
    params = [parse_param(text, model, flag) for text in texts]
    names = [param.name for param in params]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UserError(f'{flag}: {", ".join(twice)} is given twice; give each param once')
    return params


def parse_objective(text: Optional[str], model: str, flag: str = '--objective') -> Objective:
    metric, _, goal = (text or '').partition(':')
    if not metric or goal not in GOALS:
        raise UserError(f'{flag}={text or ""}: write METRIC:maximize or METRIC:minimize, e.g. '
                        f'{flag}=accuracy:maximize')
    from trainer.config import reported_metrics  # TensorFlow: only once it is needed
    reported = reported_metrics.objective_metrics(model)
    if metric not in reported:
        raise UserError(f'{flag}={text}: {model}\'s evaluation does not report {metric}; it '
                        f'reports {", ".join(reported)}')
    return Objective(metric, goal)

