"""The MNIST CNN: conv 5x5x32, max-pool, conv 5x5x64, max-pool, dense 1024, dropout 0.4, 10 logits."""
import tensorflow as tf

from models import eval_pictures, precision, registry, training

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
    logits = tf.identity(precision.float32(logits), name='logits')
    probabilities = tf.nn.softmax(logits, name='probabilities')
    classes = tf.argmax(logits, axis=1, name='classes')
    predictions = {'classes': classes, 'probabilities': probabilities}

    if mode == tf.estimator.ModeKeys.PREDICT:
        # TF Serving's Classify API wants each class's name, as a string, beside its score.
        class_names = tf.tile([[str(digit) for digit in range(NUM_CLASSES)]],
                              [tf.shape(logits)[0], 1], name='class_names')
        return tf.estimator.EstimatorSpec(mode, predictions=predictions, export_outputs={
            'serving_default': tf.estimator.export.PredictOutput(predictions),
            'classify': tf.estimator.export.ClassificationOutput(scores=probabilities,
                                                                 classes=class_names)})

    loss = tf.identity(training.estimator_loss(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits), mode),
        name='cross_entropy')
    accuracy = tf.compat.v1.metrics.accuracy(labels=labels, predictions=classes, name='accuracy')

    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            'accuracy': accuracy,
            'most_confident_mistakes': eval_pictures.most_confident_mistakes(
                images, labels, classes, probabilities),
            'confusion_matrix': eval_pictures.confusion_matrix(labels, classes, NUM_CLASSES),
        })

    batch_accuracy = tf.reduce_mean(
        tf.cast(tf.equal(tf.cast(labels, tf.int64), classes), tf.float32), name='train_accuracy')
    return tf.estimator.EstimatorSpec(
        mode, loss=loss, train_op=training.train_op(loss, params, batch_accuracy))


SPEC = registry.register(registry.ModelSpec(
    name='mnist_cnn', model_fn=model_fn, default_params=DEFAULT_PARAMS,
    input_kind='image_classification', image_shape=IMAGE_SHAPE))
