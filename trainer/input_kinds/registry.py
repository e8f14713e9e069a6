"""Maps a model's `input_kind` name to the object that feeds it.

Adding a kind of input means adding one module that calls `register(SomeKind())`
and listing it in KIND_MODULES.
"""
from common.errors import UserError
from common.registry import Registry
from models import registry as model_registry
from trainer.input_kinds.base import InputKind, InputOptions

KIND_MODULES = ('trainer.input_kinds.image_classification', 'trainer.input_kinds.face_pairs',
                'trainer.input_kinds.csv_features', 'trainer.input_kinds.table')

_KINDS: Registry[InputKind] = Registry('input kind', KIND_MODULES)


def register(kind: InputKind) -> InputKind:
    return _KINDS.register(kind.name, kind, type(kind).__module__)


def names():
    return _KINDS.names()


def get(name: str) -> InputKind:
    return _KINDS.get(name)


def for_model(spec) -> InputKind:
    """The kind of input that feeds a registered model (its ModelSpec.input_kind)."""
    return get(spec.input_kind)


def check_options(spec, options: InputOptions) -> None:
    """An input option that only another kind reads, given to this model, is refused by name:
    ignoring it would train something other than what was asked for."""
    kind = for_model(spec)
    for other in (get(name) for name in names()):
        for option in other.own_options:  # in their order: the same flag named every run
            if (option not in kind.own_options
                    and getattr(options, option) != getattr(InputOptions, option)):
                readers = [name for name in model_registry.names()
                           if model_registry.get(name).input_kind == other.name]
                raise UserError(f'--{option} is for {other.records_are} '
                                f'({", ".join(readers)}); {spec.name} reads {kind.records_are}: '
                                f'leave --{option} off')
