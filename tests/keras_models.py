"""Keras models the tests register through trainer/api.py (ModelSpec keras_model=...), once a
process: a digits CNN (a functional model on tf.keras.Input, with batch norm, an L2 penalty
and a head layer named logits), a one-unit linear model whose losses are known exactly, and a
network over a table's schema (the canned head's)."""
import contextlib

import tensorflow as tf

from models import registry
from trainer import api

CNN = 'keras_test_cnn'
LINEAR = 'keras_test_linear'
LINEAR_FEATURES = 4
LINEAR_PENALTY = 0.5  # l2 on a kernel of ones: the regularization loss is this times 4


def build_cnn(params, inputs):
    layers = tf.keras.layers
    image = tf.keras.Input(shape=inputs['image'].shape, name='image')
    hidden = layers.Conv2D(8, 3, strides=2, use_bias=False,
                           kernel_regularizer=tf.keras.regularizers.l2(1e-4))(image)
    hidden = layers.ReLU()(layers.BatchNormalization(momentum=0.5)(hidden))
    hidden = layers.GlobalAveragePooling2D()(hidden)
    return tf.keras.Model(image, layers.Dense(params['keras_test_classes'], name='logits')(hidden))


def build_linear(params, inputs):
    return tf.keras.Sequential([tf.keras.layers.Dense(
        1, kernel_initializer='ones', input_shape=inputs['inputs'].shape,
        kernel_regularizer=tf.keras.regularizers.l2(LINEAR_PENALTY))])


CNN_SPEC = api.register_model(api.ModelSpec(
    CNN, None, {**api.TRAINING_PARAMS, 'learning_rate': 0.01, 'keras_test_classes': 10},
    'image_classification', image_shape=(28, 28, 1), keras_model=build_cnn))
LINEAR_SPEC = api.register_model(api.ModelSpec(
    LINEAR, None, dict(api.TRAINING_PARAMS), 'csv_features', num_features=LINEAR_FEATURES,
    keras_model=build_linear))


def build_table(params, inputs):
    schema = params['schema']
    return tf.keras.Sequential([
        tf.keras.layers.DenseFeatures(api.table_feature_columns(schema)),
        tf.keras.layers.Dense(api.table_logits_dimension(schema), name='logits',
                              kernel_regularizer=tf.keras.regularizers.l2(LINEAR_PENALTY))])


TABLE_SPEC = api.register_model(api.ModelSpec(
    'keras_test_table', None, dict(api.TRAINING_PARAMS), 'table', schema_kind='table',
    keras_model=build_table))


SPECS = (CNN_SPEC, LINEAR_SPEC, TABLE_SPEC)


def _set_registered(present: bool) -> None:
    models = registry._MODELS  # the registry as the service reads it
    for spec in SPECS:
        if present:
            models._items[spec.name], models._owners[spec.name] = spec, __name__
        else:
            models._items.pop(spec.name, None)
            models._owners.pop(spec.name, None)


@contextlib.contextmanager
def registered():
    """The test models in the registry for one test file's tests only: pytest imports every test
    file of a worker first, and other files' messages list the registered models as shipped."""
    _set_registered(True)
    try:
        yield
    finally:
        _set_registered(False)


_set_registered(False)  # registered through api.register_model above, then kept out until asked
