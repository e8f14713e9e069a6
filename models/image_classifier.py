"""An image classifier for any folder of labelled photos: a small residual network with batch norm.

Built from its data's schema (`prepare images`: image_shape, the class names), so one model
serves any image size and number of classes. A 3x3 conv stem, then `residual_stages` stages of
`blocks_per_stage` residual blocks (two 3x3 conv-BN, the input added back), each stage after the
first halving the resolution and doubling the filters from `base_filters`; global average
pooling, dropout, the logits. Width and depth are params, so --model_params and the tuners
reach them. Its exports answer with the class names (classify, and serving_default's
class_name and score). With backbone=mobilenet_v2, efficientnet_b0 or resnet50 the residual
network gives way to that pretrained backbone and a new head (models/backbones.py).
"""
import tensorflow as tf

from common.errors import UserError
from models import backbone_weights, backbones, class_weights, heads, registry, training

# Keras' 0.99 keeps 5% of the initial moving variance (1) after 300 steps, far above a small
# net's activation variances (0.004 at the stem on the digits): 15% held-out accuracy there,
# 98.7% at 0.9 (docs/your-data.md). Short runs on small folders are what this model is for
# (a backbone trained from random initialisation too).
BATCH_NORM_MOMENTUM = 0.9
DEFAULT_PARAMS = {
    **training.TRAINING_PARAMS,
    **class_weights.PARAMS,  # its head weighs the loss by class under --class_weights
    'dropout_rate': 0.2,
    'base_filters': 32,  # the first stage's; each later stage doubles them
    'residual_stages': 3,
    'blocks_per_stage': 1,
    **backbones.PARAMS,
}


class ResidualBlock(tf.keras.layers.Layer):
    """conv-BN-ReLU-conv-BN plus the input (projected by a 1x1 conv-BN where the shape changes), ReLU."""

    def __init__(self, filters: int, stride: int, project: bool, **kwargs):
        super().__init__(**kwargs)
        layers = tf.keras.layers
        self.body = [layers.Conv2D(filters, 3, stride, padding='same', use_bias=False),
                     layers.BatchNormalization(momentum=BATCH_NORM_MOMENTUM), layers.ReLU(),
                     layers.Conv2D(filters, 3, padding='same', use_bias=False),
                     layers.BatchNormalization(momentum=BATCH_NORM_MOMENTUM)]
        self.shortcut = [layers.Conv2D(filters, 1, stride, use_bias=False),
                         layers.BatchNormalization(momentum=BATCH_NORM_MOMENTUM)] if project else []

    def call(self, inputs, training=None):
        body, shortcut = inputs, inputs
        for layer in self.body:
            body = layer(body, training=training)
        for layer in self.shortcut:
            shortcut = layer(shortcut, training=training)
        return tf.nn.relu(body + shortcut)


def build_network(num_classes: int, params) -> tf.keras.Sequential:
    """No InputLayer: built on the real inputs, its batch-norm updates are all for them."""
    layers = tf.keras.layers
    stack = [layers.Conv2D(params['base_filters'], 3, padding='same', use_bias=False),
             layers.BatchNormalization(momentum=BATCH_NORM_MOMENTUM), layers.ReLU()]
    filters = params['base_filters']
    for stage in range(params['residual_stages']):
        for block in range(params['blocks_per_stage']):
            downsample = stage > 0 and block == 0
            stack.append(ResidualBlock(filters * 2 ** stage, 2 if downsample else 1, downsample))
    stack += [layers.GlobalAveragePooling2D(), layers.Dropout(params['dropout_rate']),
              layers.Dense(num_classes)]
    return tf.keras.Sequential(stack, name='image_classifier')


def model_fn(features, labels, mode, params):
    """Estimator model_fn; params['schema'] is `prepare images`' (the trainer passes it)."""
    class_names = params['schema']['classes']
    images = features['image'] if isinstance(features, dict) else features
    is_training = mode == tf.estimator.ModeKeys.TRAIN
    backbone = None
    if params['backbone']:
        backbone = backbones.build(params, BATCH_NORM_MOMENTUM)
        head = tf.keras.Sequential([tf.keras.layers.Dropout(params['dropout_rate']),
                                    tf.keras.layers.Dense(len(class_names))], name='head')
        pooled, updates = backbones.features(images, params, backbone, is_training)
        logits = head(pooled, training=is_training)
    else:
        if params['freeze_backbone_steps'] or params['backbone_weights']:
            raise UserError('--freeze_backbone_steps and --backbone_weights are for a '
                            'backbone: give --model_params=backbone=NAME too')
        network = build_network(len(class_names), params)
        logits = network(images, training=is_training)
        updates = network.updates
    spec = heads.classification_estimator_spec(
        logits, labels, mode, params, images=images, class_names=class_names,
        update_ops=updates)
    if is_training and params['backbone_weights']:
        return spec._replace(scaffold=backbone_weights.scaffold(backbone, params))
    return spec


SPEC = registry.register(registry.ModelSpec(
    name='image_classifier', model_fn=model_fn, default_params=DEFAULT_PARAMS,
    input_kind='image_classification', schema_kind='images'))
