"""The difference net: |image_a - image_b| through a conv/ReLU/max-pool stack to one logit.

The source documents' face-pair model: it sees only where two photos differ,
pixel by pixel. Simple and fast; the siamese net (face_siamese) does better.
"""
import tensorflow as tf

from models import eval_pictures, face_siamese, heads, registry
from models.training import TRAINING_PARAMS

IMAGE_SHAPE = (64, 64, 1)  # --face_image_size resizes to another
BLOCK_FILTERS = (32, 64, 128, 128)  # a 3x3 conv-ReLU-2x2 pool block each
DEFAULT_PARAMS = {
    **TRAINING_PARAMS,
    'dropout_rate': 0.3,
}


def build_network(dropout_rate: float) -> tf.keras.Sequential:
    layers = tf.keras.layers
    stack = []  # built on the real inputs: any --face_image_size
    for filters in BLOCK_FILTERS:
        stack += [layers.Conv2D(filters, 3, padding='same', activation='relu'),
                  layers.MaxPooling2D(2)]
    stack += [layers.Flatten(), layers.Dense(256, activation='relu'),
              layers.Dropout(dropout_rate), layers.Dense(1)]
    return tf.keras.Sequential(stack, name='face_diff')


def model_fn(features, labels, mode, params):
    face_siamese.check_image_side(features['image_a'], len(BLOCK_FILTERS))
    difference = tf.abs(features['image_a'] - features['image_b'])  # symmetric in a and b
    logits = build_network(params['dropout_rate'])(
        difference, training=mode == tf.estimator.ModeKeys.TRAIN)
    return heads.binary_estimator_spec(logits, labels, mode, params,
                                             eval_pictures_fn=eval_pictures.face_pairs_fn(features))


SPEC = registry.register(registry.ModelSpec(
    name='face_diff', model_fn=model_fn, default_params=DEFAULT_PARAMS, input_kind='face_pairs',
    image_shape=IMAGE_SHAPE))
