"""Maps --model names to a model_fn and the input it expects.

Adding a model means adding one module that calls `register(ModelSpec(...))`
and listing it in MODEL_MODULES.
"""
import dataclasses
from typing import Callable, Dict, List, Optional, Tuple

from common.errors import UserError
from common.registry import Registry

MODEL_MODULES = ('models.mnist_cnn', 'models.face_diff', 'models.face_siamese',
                 'models.face_embedding', 'models.csv_mlp', 'models.image_classifier',
                 'models.tables.canned')  # canned registers boosted_trees' models too


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    # model_fn(features, labels, mode, params) -> tf.estimator.EstimatorSpec; or None with
    # keras_model, from which register() makes it (models/keras_model.py).
    model_fn: Optional[Callable]
    # Every param the model_fn reads: the trainer hands it these, overridden by the settings
    # (trainer.config.settings.model_fn_params, the one place they are merged).
    default_params: Dict
    # The kind of input that feeds it (trainer/input_kinds/): 'image_classification',
    # 'face_pairs' or 'csv_features'. The kind owns the input_fns, receivers and signature names.
    input_kind: str
    image_shape: Tuple[int, ...] = ()  # images: [height, width, channels] the model takes
    num_features: int = 0  # csv_features: floats per example
    # A model built from its data's schema (manifest.json's 'schema', input_fns/records/shards.py) names
    # the schema 'kind' it takes ('table', 'images'); the trainer then fills `schema` at run time
    # (trainer/run/data_schema.py) and hands it to the model_fn as params['schema'].
    schema_kind: Optional[str] = None
    schema: Optional[Dict] = None
    # Trains in one process only (boosted trees: a layer grows from one process's statistics):
    # training refuses a --distribution strategy and a TF_CONFIG cluster with workers or
    # parameter servers (trainer/run/experiment.py).
    single_process: bool = False
    # keras_model(params, inputs) -> an uncompiled tf.keras.Model whose output is the logits
    # of `head` ('classification', 'binary', 'table'; default: the input kind's), trained and
    # served by the service's heads (models/keras_model.py). Give model_fn=None with it.
    keras_model: Optional[Callable] = None
    head: Optional[str] = None


_MODELS: Registry[ModelSpec] = Registry('model', MODEL_MODULES)


def register(spec: ModelSpec) -> ModelSpec:
    if spec.keras_model is None:
        if spec.head is not None:  # a model_fn makes its own EstimatorSpec: it would be ignored
            raise UserError(f'{spec.model_fn.__module__} registers model {spec.name!r} with '
                            f'head={spec.head!r} and a model_fn; head= is for a keras_model')
        return _MODELS.register(spec.name, spec, spec.model_fn.__module__)
    from models import keras_model  # TensorFlow's import, for Keras models only
    module = spec.keras_model.__module__
    return _MODELS.register(spec.name, keras_model.completed(spec, module), module)


def module_of(name: str) -> str:
    """The module that registered the model."""
    return _MODELS.owner(name)


def names():
    return _MODELS.names()


def get(name: str) -> ModelSpec:
    return _MODELS.get(name)


def param_owners() -> Dict[str, List[str]]:
    """{param name: the models that have it}, over every registered model."""
    owners = {}
    for model in names():
        for name in get(model).default_params:
            owners.setdefault(name, []).append(model)
    return owners
