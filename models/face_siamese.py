"""The siamese face-pair net: one shared conv tower embeds each photo; a head
classifies the pair from |e1 - e2| and e1 * e2.

Exported with an extra `embed` signature (one photo -> its embedding), so the
tower can index faces once and compare them later.
"""
import tensorflow as tf

from common.errors import UserError
from models import blocks, heads, precision, registry
from models.training import TRAINING_PARAMS

IMAGE_SHAPE = (64, 64, 1)
DEFAULT_PARAMS = {
    **TRAINING_PARAMS,
    'dropout_rate': 0.3,
    'embedding_size': 128,
    'tower_filters': (32, 64, 128, 128),  # a 3x3 conv-BN-ReLU-2x2 pool block each
    # Each block's number of 3x3 conv-BN-ReLUs before its pool; empty: one each.
    'tower_convs_per_block': (),
}


def check_image_side(images, pooling_blocks: int) -> None:
    """Each block halves the photo: one smaller than 2**blocks pixels would pool to nothing."""
    side, least = images.shape[1], 2 ** pooling_blocks
    if side is not None and side < least:
        raise UserError(f'--face_image_size={side}: {pooling_blocks} pooling blocks need photos '
                        f'of at least {least} pixels; give --face_image_size={least} or more')


def build_tower(params) -> tf.keras.Sequential:
    """Per-photo standardization (lighting varies a lot), then conv-BN-ReLU-pool blocks."""
    layers = tf.keras.layers
    # No InputLayer: built on the real inputs, its batch-norm updates are all for them.
    stack = [layers.Lambda(tf.image.per_image_standardization)]
    convs_per_block = blocks.per_block(params, 'tower_convs_per_block', 1, 'tower_filters')
    for filters, convs in zip(params['tower_filters'], convs_per_block):
        for _ in range(convs):
            stack += [layers.Conv2D(filters, 3, padding='same', use_bias=False),
                      layers.BatchNormalization(), layers.ReLU()]
        stack.append(layers.MaxPooling2D(2))
    stack += [layers.Flatten(), layers.Dropout(params['dropout_rate']),
              layers.Dense(256, use_bias=False), layers.BatchNormalization(), layers.ReLU(),
              layers.Dense(params['embedding_size'])]
    return tf.keras.Sequential(stack, name='tower')


def build_head() -> tf.keras.Sequential:
    layers = tf.keras.layers
    return tf.keras.Sequential([layers.Dense(64, activation='relu'), layers.Dense(1)], name='head')


def model_fn(features, labels, mode, params):
    training = mode == tf.estimator.ModeKeys.TRAIN
    check_image_side(features['image_a'], len(params['tower_filters']))
    tower = build_tower(params)
    embedding_a = tf.identity(precision.float32(tower(features['image_a'], training=training)),
                              name='embedding_a')
    embedding_b = tf.identity(precision.float32(tower(features['image_b'], training=training)),
                              name='embedding_b')
    pair = tf.concat([tf.abs(embedding_a - embedding_b), embedding_a * embedding_b], axis=1)
    head = build_head()
    logits = head(pair, training=training)
    return heads.embedding_pair_spec(logits, labels, mode, params, features, embedding_a,
                                           embedding_b, update_ops=tower.updates + head.updates)


SPEC = registry.register(registry.ModelSpec(
    name='face_siamese', model_fn=model_fn, default_params=DEFAULT_PARAMS,
    input_kind='face_pairs', image_shape=IMAGE_SHAPE))
