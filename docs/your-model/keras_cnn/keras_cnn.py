"""small_cnn's network as a Keras model: the service makes the model_fn (docs/your-model.md).

keras_cnn(params, inputs) returns an uncompiled tf.keras.Model over the input kind's features
(inputs['image']: one digit's tf.TensorSpec, [28, 28, 1]) whose output is the logits (10, or
--keras_cnn_classes for photos of other classes at that size); the service trains it with the
N-class head and its flags (--optimizer, --learning_rate, --precision, --class_weights...),
runs its batch-norm updates, adds its L2 penalty to the training loss, and exports the head's
signatures. The last layer is named `logits`: a warm start onto another number of classes
starts it afresh (its shape differs), or --warm_start_vars='^(?!logits/)' leaves it out.

Trained with --usr_dir=docs/your-model/keras_cnn --model=keras_cnn; its params are flags
(--keras_cnn_filters=32) and --model_params entries.
"""
import tensorflow as tf

from trainer import api

DEFAULT_PARAMS = {**api.TRAINING_PARAMS, **api.CLASS_WEIGHT_PARAMS, 'learning_rate': 3e-3,
                  'keras_cnn_filters': 16, 'keras_cnn_l2': 1e-4, 'keras_cnn_classes': 10}


def keras_cnn(params, inputs):
    layers = tf.keras.layers
    width, penalty = params['keras_cnn_filters'], tf.keras.regularizers.l2(params['keras_cnn_l2'])
    image = tf.keras.Input(shape=inputs['image'].shape, name='image')
    hidden = image
    for filters in (width, 2 * width):
        hidden = layers.Conv2D(filters, 3, padding='same', use_bias=False,
                               kernel_regularizer=penalty)(hidden)
        hidden = layers.BatchNormalization(momentum=0.9)(hidden)
        hidden = layers.MaxPooling2D(2)(layers.ReLU()(hidden))
    logits = layers.Dense(params['keras_cnn_classes'], name='logits')(layers.Flatten()(hidden))
    return tf.keras.Model(image, logits, name='keras_cnn')


api.register_model(api.ModelSpec(
    name='keras_cnn', model_fn=None, keras_model=keras_cnn, default_params=DEFAULT_PARAMS,
    input_kind='image_classification', image_shape=(28, 28, 1)))
