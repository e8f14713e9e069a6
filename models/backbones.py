"""Pretrained backbones for image_classifier: tf.keras.applications' MobileNetV2, EfficientNetB0
and ResNet50 without their tops, fed as each expects, frozen then fine-tuned.

The Keras transfer-learning guide's recipe: the backbone frozen for freeze_backbone_steps (only
the new head learns, at learning_rate), then everything fine-tuned at fine_tune_learning_rate
(models/training.py switches the rate). A pretrained backbone's batch norm stays in inference
mode throughout, as the guide keeps it: its moving statistics are the file's, and a small set's
batches would overwrite them.
"""
import dataclasses
from typing import Callable, Dict

import tensorflow as tf

from common.errors import UserError

PARAMS = {
    'backbone': '',  # '' the residual network; else a name in BACKBONES
    'backbone_weights': '',  # '' random initialisation; a Keras .h5 weights file; 'imagenet'
    'backbone_image_size': 224,  # the side images are resized to for the backbone
    'backbone_alpha': 1.0,  # mobilenet_v2's width multiplier
    'freeze_backbone_steps': 0,  # the steps only the head trains; 0: all train from the start
    'fine_tune_learning_rate': 1e-5,  # the rate after freeze_backbone_steps
}


@dataclasses.dataclass(frozen=True)
class Backbone:
    build: Callable  # tf.keras.applications' constructor
    preprocess: Callable  # its preprocess_input: pixels in [0, 255] to what it was trained on
    imagenet_url: Callable  # (image_size, alpha) -> Keras' URL of its ImageNet no-top weights
    has_alpha: bool = False


def _mobilenet_v2_url(size: int, alpha: float) -> str:
    return ('https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v2/'
            f'mobilenet_v2_weights_tf_dim_ordering_tf_kernels_{float(alpha)}_{size}_no_top.h5')


applications = tf.keras.applications
BACKBONES = {
    'mobilenet_v2': Backbone(applications.MobileNetV2, applications.mobilenet_v2.preprocess_input,
                             _mobilenet_v2_url, has_alpha=True),
    # EfficientNet rescales and normalises inside the model: its preprocess_input passes through.
    'efficientnet_b0': Backbone(
        applications.EfficientNetB0, applications.efficientnet.preprocess_input,
        lambda size, alpha: 'https://storage.googleapis.com/keras-applications/'
                            'efficientnetb0_notop.h5'),
    'resnet50': Backbone(
        applications.ResNet50, applications.resnet50.preprocess_input,
        lambda size, alpha: 'https://storage.googleapis.com/tensorflow/keras-applications/'
                            'resnet/resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5'),
}


def described(params: Dict) -> str:
    """'mobilenet_v2 (alpha 0.35, 32x32)': the backbone as the messages name it."""
    alpha = f'alpha {params["backbone_alpha"]}, ' if BACKBONES[params['backbone']].has_alpha else ''
    size = params['backbone_image_size']
    return f'{params["backbone"]} ({alpha}{size}x{size})'


def checked(params: Dict) -> Backbone:
    """The backbone params name, once they are checked."""
    name = params['backbone']
    if name not in BACKBONES:
        raise UserError(f'--model_params=backbone={name}: use one of {", ".join(BACKBONES)} '
                        f'(or leave it out: the residual network)')
    if params['backbone_alpha'] != 1.0 and not BACKBONES[name].has_alpha:
        raise UserError(f'--backbone_alpha={params["backbone_alpha"]}: only mobilenet_v2 has '
                        f'a width multiplier; leave it out for {name}')
    if params['backbone_image_size'] < 32:
        raise UserError(f'--backbone_image_size={params["backbone_image_size"]}: '
                        f'{name} takes images of 32x32 or more')
    return BACKBONES[name]


def build(params: Dict, batch_norm_momentum: float = 0.99) -> tf.keras.Model:
    """The backbone without its top, average-pooled, at random initialisation (the weights
    file, when given, is loaded at the first step: models/backbone_weights.py). Without one its
    batch norm trains, at batch_norm_momentum: Keras' 0.999 (these applications') would leave
    the moving statistics near their start after a short run."""
    backbone, size = checked(params), params['backbone_image_size']
    extra = {'alpha': params['backbone_alpha']} if backbone.has_alpha else {}
    network = backbone.build(input_shape=(size, size, 3), include_top=False, weights=None,
                             pooling='avg', **extra)
    if not params['backbone_weights']:
        for layer in network.layers:
            if isinstance(layer, tf.keras.layers.BatchNormalization):
                layer.momentum = batch_norm_momentum
    return network


def backbone_input(images, params: Dict):
    """images [B, H, W, C] in [0, 1] (any channels) as the backbone expects them: resized to
    its size, three channels, scaled by its own preprocess_input."""
    size = params['backbone_image_size']
    images = tf.image.resize(images, (size, size))
    if images.shape[-1] == 1:
        images = tf.image.grayscale_to_rgb(images)
    return checked(params).preprocess(images * 255.0)


def features(images, params: Dict, network: tf.keras.Model, training: bool):
    """(the backbone's pooled features of images, its batch-norm updates for them); while the
    global step is under freeze_backbone_steps no gradient reaches the backbone (the optimizer's
    step is 0 there)."""
    inputs = backbone_input(images, params)
    pooled = network(inputs, training=training and not params['backbone_weights'])
    # Only this call's: the updates of the application's own Input would want it fed.
    updates = network.get_updates_for(inputs)
    steps = params['freeze_backbone_steps']
    if not training or not steps:
        return pooled, updates
    frozen = tf.compat.v1.train.get_or_create_global_step() < steps
    return tf.where(frozen, tf.stop_gradient(pooled), pooled), updates
