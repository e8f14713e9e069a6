"""Maps --model names to a model_fn and the input it expects.

Adding a model means adding one module that calls `register(ModelSpec(...))`
and listing it in MODEL_MODULES.
"""
import dataclasses
import importlib
from typing import Callable, Dict, Optional, Tuple

MODEL_MODULES = ('models.mnist_cnn', 'models.face_diff', 'models.face_siamese', 'models.csv_mlp')


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    model_fn: Callable  # model_fn(features, labels, mode, params) -> tf.estimator.EstimatorSpec
    default_params: Dict
    # which family of input_fns feeds it: 'image_classification', 'face_pairs', 'csv_features'
    input_kind: str
    image_shape: Tuple[int, ...] = ()  # images: [height, width, channels] the model takes
    num_features: int = 0  # csv_features: floats per example
    # Export: signatures Estimator made to rename ({old: new}) or drop ({old: None}).
    signature_renames: Dict[str, Optional[str]] = dataclasses.field(default_factory=dict)


_REGISTRY: Dict[str, ModelSpec] = {}


def register(spec: ModelSpec) -> ModelSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f'model {spec.name!r} is registered twice')
    _REGISTRY[spec.name] = spec
    return spec


def _load_all():
    for module in MODEL_MODULES:
        importlib.import_module(module)


def names():
    _load_all()
    return sorted(_REGISTRY)


def get(name: str) -> ModelSpec:
    _load_all()
    if name not in _REGISTRY:
        raise KeyError(f'unknown model {name!r}; registered: {", ".join(sorted(_REGISTRY))}')
    return _REGISTRY[name]
