"""The source documents' CSV model: 1,024 floats -> dense 1,024 ReLU -> 1 logit ("sum > 0")."""
import tensorflow as tf

from models import heads, registry, training

NUM_FEATURES = 1024
DEFAULT_PARAMS = dict(training.TRAINING_PARAMS)


def build_network() -> tf.keras.Sequential:
    layers = tf.keras.layers
    return tf.keras.Sequential([
        layers.Dense(1024, activation='relu', input_shape=(NUM_FEATURES,)),
        layers.Dense(1),
    ], name='csv_mlp')


def model_fn(features, labels, mode, params):
    logits = build_network()(features['inputs'])
    return heads.binary_estimator_spec(logits, labels, mode, params)


SPEC = registry.register(registry.ModelSpec(
    name='csv_mlp', model_fn=model_fn, default_params=DEFAULT_PARAMS, input_kind='csv_features',
    num_features=NUM_FEATURES))
