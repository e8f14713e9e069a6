"""A small regression network: the four numbers -> 16 ReLU units -> the price."""
import tensorflow as tf

from trainer import api

from . import records

DEFAULT_PARAMS = {**api.TRAINING_PARAMS, 'learning_rate': 0.02, 'hidden_units': 16}


def model_fn(features, labels, mode, params):
    numbers = tf.stack([features[name] for name in records.FEATURES], axis=1)
    hidden = tf.keras.layers.Dense(params['hidden_units'], activation='relu')(numbers)
    price = tf.reshape(api.float32(tf.keras.layers.Dense(1)(hidden)), [-1], name='price')
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={'price': price}, export_outputs={
            'serving_default': tf.estimator.export.PredictOutput({'price': price}),
            'regress': tf.estimator.export.RegressionOutput(value=price)})
    loss = api.estimator_loss(tf.square(price - labels), mode)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            'root_mean_squared_error': tf.compat.v1.metrics.root_mean_squared_error(labels, price),
            'mean_absolute_error': tf.compat.v1.metrics.mean_absolute_error(labels, price)})
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=api.train_op(loss, params))


api.register_model(api.ModelSpec(name='house_prices', model_fn=model_fn,
                                 default_params=DEFAULT_PARAMS, input_kind='house_records'))
