"""The MNIST CNN: conv 5x5x32, max-pool, conv 5x5x64, max-pool, dense 1024, dropout 0.4, 10 logits."""
import tensorflow as tf

from models import classification_head, registry

NUM_CLASSES = 10
IMAGE_SHAPE = (28, 28, 1)
DEFAULT_PARAMS = {
    'learning_rate': 1e-3,
    'optimizer': 'adam',  # adam | sgd | momentum
    'dropout_rate': 0.4,
    'learning_rate_decay_steps': 0,  # 0: constant learning rate
    'learning_rate_decay_rate': 0.1,
}


def build_network(dropout_rate: float) -> tf.keras.Sequential:
    layers = tf.keras.layers
    return tf.keras.Sequential([
        layers.Conv2D(32, 5, padding='same', activation='relu', input_shape=IMAGE_SHAPE),
        layers.MaxPooling2D(2, 2, padding='same'),
        layers.Conv2D(64, 5, padding='same', activation='relu'),
        layers.MaxPooling2D(2, 2, padding='same'),
        layers.Flatten(),
        layers.Dense(1024, activation='relu'),
        layers.Dropout(dropout_rate),
        layers.Dense(NUM_CLASSES),
    ], name='mnist_cnn')


def model_fn(features, labels, mode, params):
    """Estimator model_fn; depends only on features, labels, mode and params."""
    params = {**DEFAULT_PARAMS, **(params or {})}
    images = features['image'] if isinstance(features, dict) else features
    logits = build_network(params['dropout_rate'])(
        images, training=mode == tf.estimator.ModeKeys.TRAIN)
    return classification_head.classification_estimator_spec(logits, labels, mode, params,
                                                             images=images)


SPEC = registry.register(registry.ModelSpec(
    name='mnist_cnn', model_fn=model_fn, default_params=DEFAULT_PARAMS,
    input_kind='image_classification', image_shape=IMAGE_SHAPE))
