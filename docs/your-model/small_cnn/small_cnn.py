"""A smaller CNN for the digits: two 3x3 convolutions with batch norm, each max-pooled, then
one dense layer to the 10 logits (mnist_cnn has 5x5 convolutions and a 1,024-unit layer).

Trained with --usr_dir=docs/your-model/small_cnn --model=small_cnn; its params are flags
(--small_cnn_filters=32) and --model_params entries.
"""
import tensorflow as tf

from trainer import api

DEFAULT_PARAMS = {**api.TRAINING_PARAMS, **api.CLASS_WEIGHT_PARAMS, 'learning_rate': 3e-3,
                  'small_cnn_filters': 16}


def model_fn(features, labels, mode, params):
    layers = tf.keras.layers
    width = params['small_cnn_filters']
    network = tf.keras.Sequential([
        layers.Conv2D(width, 3, padding='same', use_bias=False),
        layers.BatchNormalization(momentum=0.9), layers.ReLU(), layers.MaxPooling2D(2),
        layers.Conv2D(2 * width, 3, padding='same', use_bias=False),
        layers.BatchNormalization(momentum=0.9), layers.ReLU(), layers.MaxPooling2D(2),
        layers.Flatten(), layers.Dense(10),
    ], name='small_cnn')
    images = features['image']
    logits = network(images, training=mode == tf.estimator.ModeKeys.TRAIN)
    # update_ops: the batch-norm moving averages, updated with each training step.
    return api.classification_estimator_spec(logits, labels, mode, params, images=images,
                                             update_ops=network.updates)


api.register_model(api.ModelSpec(
    name='small_cnn', model_fn=model_fn, default_params=DEFAULT_PARAMS,
    input_kind='image_classification', image_shape=(28, 28, 1)))
