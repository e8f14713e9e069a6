"""What every model that picks one of N classes shares: softmax loss (with the params' label
smoothing and class weights), metrics, evaluation pictures and the EstimatorSpec, with
serving_default and TF Serving's classify output."""
import tensorflow as tf

from models import class_weights, eval_pictures, precision, training


def classification_estimator_spec(logits, labels, mode, params, images=None,
                                  class_names=None, update_ops=(), regularization_losses=()):
    """logits [batch, N]; labels int [batch] in 0..N-1. images [batch, H, W, C], when given,
    adds the most confident mistakes to the evaluation pictures (beside the confusion matrix).
    class_names, when given: what the classify signature names each class (else '0'...'N-1'),
    the pictures' legend, each class's accuracy in evaluation, and a prediction's class_name
    and score. regularization_losses (a Keras model's `losses`) are added to training's loss."""
    num_classes = logits.shape[-1]
    logits = tf.identity(precision.float32(logits), name='logits')
    probabilities = tf.nn.softmax(logits, name='probabilities')
    classes = tf.argmax(logits, axis=1, name='classes')

    if mode == tf.estimator.ModeKeys.PREDICT:
        names = tf.constant(list(class_names or [str(i) for i in range(num_classes)]))
        predictions = {'classes': classes, 'probabilities': probabilities}
        if class_names:
            predictions.update(class_name=tf.gather(names, classes),
                               score=tf.reduce_max(probabilities, axis=1))
        # TF Serving's Classify API wants each class's name, as a string, beside its score.
        return tf.estimator.EstimatorSpec(mode, predictions=predictions, export_outputs={
            'serving_default': tf.estimator.export.PredictOutput(predictions),
            'classify': tf.estimator.export.ClassificationOutput(
                scores=probabilities,
                classes=tf.tile([names], [tf.shape(logits)[0], 1], name='class_names'))})

    losses = training.softmax_losses(labels, logits, training.label_smoothing(params, mode))
    weights = class_weights.example_weights(
        params, labels, class_names or [str(i) for i in range(num_classes)], mode)
    if weights is not None:
        losses = losses * weights
    loss = tf.identity(training.estimator_loss(losses, mode), name='cross_entropy')
    if mode == tf.estimator.ModeKeys.EVAL:
        metrics = {
            'accuracy': tf.compat.v1.metrics.accuracy(labels=labels, predictions=classes,
                                                      name='accuracy'),
            **eval_pictures.class_pictures(labels, classes, num_classes, class_names)}
        if images is not None:
            metrics['most_confident_mistakes'] = eval_pictures.most_confident_mistakes(
                images, labels, classes, probabilities, class_names=class_names)
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)

    return training.train_spec(loss, params, tf.equal(tf.cast(labels, tf.int64), classes),
                               update_ops, regularization_losses)
