"""Maps a model's `input_kind` name to the object that feeds it.

Adding a kind of input means adding one module that calls `register(SomeKind())`
and listing it in KIND_MODULES.
"""
from common.registry import Registry
from trainer.input_kinds.base import InputKind

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
