"""The MNIST CNN: conv 5x5x32, max-pool, conv 5x5x64, max-pool, dense 1024, dropout 0.4, 10 logits.

Its widths, kernel sizes and convolutions per block are params, and batch_norm puts batch
normalization after each convolution and the dense layer (before the ReLU): the defaults are the
classic network.
"""
import tensorflow as tf

from models import blocks, class_weights, heads, registry, training

NUM_CLASSES = 10
IMAGE_SHAPE = (28, 28, 1)
DEFAULT_PARAMS = {
    **training.TRAINING_PARAMS,
    **class_weights.PARAMS,  # its head weighs the loss by class under --class_weights
    'dropout_rate': 0.4,
    'conv_filters': (32, 64),  # its convolutions and a 2x2 max-pool each
    # Each block's kernel size; empty: 5x5 for every block. A third block reads a 7x7 map, where
    # 3x3 costs a third of 5x5 (docs/recipes.md, MNIST levers).
    'conv_kernel_sizes': (),
    # Each block's number of convolutions before its pool; empty: one each. Two 3x3 see what one
    # 5x5 sees, through two ReLUs.
    'convs_per_block': (),
    'dense_units': 1024,
    'batch_norm': False,
}


def build_network(params) -> tf.keras.Sequential:
    layers = tf.keras.layers
    norm = params['batch_norm']

    # With batch norm the layer's bias is the norm's offset. Its statistics move at 0.9 rather than
    # Keras' 0.99: at 0.99 they still carry their start (variance 1) after a few hundred steps,
    # far from these small activations, and a short run evaluates near chance.
    def activated(layer):
        return [layer, layers.BatchNormalization(momentum=0.9), layers.ReLU()] if norm else [layer]

    # Without batch norm the first layer takes the input shape, so the weights keep the names that
    # checkpoints of the classic network have; with it, the network is built on the real images
    # alone, so that all its batch-norm updates are for them.
    shape = {} if norm else {'input_shape': IMAGE_SHAPE}
    stack = []
    for filters, kernel_size, convs in zip(params['conv_filters'],
                                           blocks.per_block(params, 'conv_kernel_sizes', 5),
                                           blocks.per_block(params, 'convs_per_block', 1)):
        for _ in range(convs):
            stack += activated(layers.Conv2D(filters, kernel_size, padding='same',
                                             use_bias=not norm,
                                             activation=None if norm else 'relu', **shape))
            shape = {}
        stack.append(layers.MaxPooling2D(2, 2, padding='same'))
    stack += [layers.Flatten()]
    stack += activated(layers.Dense(params['dense_units'], use_bias=not norm,
                                    activation=None if norm else 'relu'))
    stack += [layers.Dropout(params['dropout_rate']), layers.Dense(NUM_CLASSES)]
    return tf.keras.Sequential(stack, name='mnist_cnn')


def model_fn(features, labels, mode, params):
    """Estimator model_fn; depends only on features, labels, mode and params."""
    images = features['image'] if isinstance(features, dict) else features
    images = tf.ensure_shape(images, [None, *IMAGE_SHAPE])  # augmented input has lost it
    network = build_network(params)
    logits = network(images, training=mode == tf.estimator.ModeKeys.TRAIN)
    return heads.classification_estimator_spec(
        logits, labels, mode, params, images=images, update_ops=network.updates)


SPEC = registry.register(registry.ModelSpec(
    name='mnist_cnn', model_fn=model_fn, default_params=DEFAULT_PARAMS,
    input_kind='image_classification', image_shape=IMAGE_SHAPE))
