"""A network of your own over a table that `prepare csv` or `prepare examples` prepared: two
ReLU layers, each with batch norm and dropout, over the schema's features (numbers
normalized by the training split's statistics, text embedded), then the canned models' head.
The head follows the schema's label (binary, several classes, or a number), so the metrics,
the TensorBoard pictures and the TF Serving signatures are those of `dnn_classifier` or
`dnn_regressor`: only the network is yours.

Trained with --usr_dir=docs/your-model/table_net --model=table_net; its params are flags
(--table_net_units=128) and --model_params entries.
"""
import tensorflow as tf

from trainer import api

DEFAULT_PARAMS = {**api.TRAINING_PARAMS, **api.CLASS_WEIGHT_PARAMS, 'table_net_units': 64,
                  'table_net_dropout': 0.1, 'table_net_embedding': 8}


def model_fn(features, labels, mode, params):
    schema = params['schema']  # the manifest's: its features, their statistics, the label
    layers = tf.keras.layers
    columns = api.table_feature_columns(schema, params['table_net_embedding'])
    hidden = []
    for _ in range(2):
        hidden += [layers.Dense(params['table_net_units'], use_bias=False),
                   layers.BatchNormalization(momentum=0.9), layers.ReLU(),
                   layers.Dropout(params['table_net_dropout'])]
    network = tf.keras.Sequential(
        [layers.DenseFeatures(columns), *hidden, layers.Dense(api.table_logits_dimension(schema))],
        name='table_net')
    logits = network(features, training=mode == tf.estimator.ModeKeys.TRAIN)
    # update_ops: the batch-norm moving averages, updated with each training step.
    return api.table_estimator_spec(features, labels, mode, logits, params,
                                    update_ops=network.updates)


api.register_model(api.ModelSpec(
    name='table_net', model_fn=model_fn, default_params=DEFAULT_PARAMS, input_kind='table',
    schema_kind='table'))
