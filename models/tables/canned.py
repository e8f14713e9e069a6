"""tf.estimator's canned models over a table's schema: --model=dnn_classifier, linear_classifier,
wide_deep_classifier and their _regressor forms; boosted_trees_classifier and _regressor are the
service's own (models/tables/boosted_trees.py), with the same heads.

Each is the canned Estimator's own model_fn (DNNClassifier's, LinearClassifier's,
DNNLinearCombinedClassifier's, in their TF2 form), called with feature columns and a head made
from the schema (models/tables/table_columns.py), inside the service's Estimator: its RunConfig,
hooks, eval job, exports and serving are the same as every model's. Classifiers or regressors
follow the schema's label task; the _classifier/_regressor name must match it.
"""
import tensorflow as tf
from tensorflow_estimator.python.estimator.canned import dnn, dnn_linear_combined, linear

from common.errors import UserError
from models import class_weights, registry
from models.tables import boosted_trees, canned_head, table_columns

# The canned models' optimizers (tf.keras legacy optimizers, as the canned models make them).
OPTIMIZERS = {'adagrad': 'Adagrad', 'adam': 'Adam', 'ftrl': 'Ftrl', 'rmsprop': 'RMSprop',
              'sgd': 'SGD'}
DEEP_PARAMS = {'hidden_units': (128, 64), 'dropout_rate': 0.0, 'embedding_dimension': 8,
               'batch_norm': False, 'optimizer': 'adagrad', 'learning_rate': 0.05}
LINEAR_PARAMS = {'l1_regularization': 0.0, 'l2_regularization': 0.0, 'crosses': '',
                 'cross_hash_buckets': 1000}


def optimizer(name: str, rate: float, l1: float = 0.0, l2: float = 0.0):
    if name not in OPTIMIZERS:
        raise UserError(f'--optimizer={name}: the canned models take '
                        f'{", ".join(OPTIMIZERS)}')
    make = getattr(tf.keras.optimizers.legacy, OPTIMIZERS[name])
    if name == 'ftrl':
        return make(learning_rate=rate, l1_regularization_strength=l1,
                    l2_regularization_strength=l2)
    if l1 or l2:
        raise UserError(f'--l1_regularization, --l2_regularization: the Ftrl optimizer applies '
                        f'them, not {name}; pass --optimizer=ftrl or leave them 0')
    return make(learning_rate=rate)


def _dropout(params):
    return params['dropout_rate'] or None


def dnn_fn(features, labels, mode, head, schema, params):
    return dnn.dnn_model_fn_v2(
        features, labels, mode, head, hidden_units=list(params['hidden_units']),
        feature_columns=table_columns.deep_columns(schema, params['embedding_dimension']),
        optimizer=optimizer(params['optimizer'], params['learning_rate']),
        dropout=_dropout(params), batch_norm=params['batch_norm'])


def linear_fn(features, labels, mode, head, schema, params):
    return linear._linear_model_fn_v2(  # LinearClassifier's own model_fn (TF2)
        features, labels, mode, head, table_columns.linear_columns(schema, params),
        optimizer(params['optimizer'], params['learning_rate'], params['l1_regularization'],
                  params['l2_regularization']), config=None)


def wide_deep_fn(features, labels, mode, head, schema, params):
    return dnn_linear_combined._dnn_linear_combined_model_fn_v2(  # DNNLinearCombined's own
        features, labels, mode, head,
        linear_feature_columns=table_columns.linear_columns(schema, params),
        linear_optimizer=optimizer('ftrl', params['linear_learning_rate'],
                                   params['l1_regularization'], params['l2_regularization']),
        dnn_feature_columns=table_columns.deep_columns(schema, params['embedding_dimension']),
        dnn_optimizer=optimizer(params['optimizer'], params['learning_rate']),
        dnn_hidden_units=list(params['hidden_units']), dnn_dropout=_dropout(params),
        batch_norm=params['batch_norm'])


def _model_fn(build, task: str, name: str):
    def model_fn(features, labels, mode, params):
        schema = params['schema']
        if schema['label']['task'] != task:
            other = name.replace('_classifier' if task == 'classification' else '_regressor',
                                 '_regressor' if task == 'classification' else '_classifier')
            raise UserError(f'--model={name}: the label {schema["label"]["name"]!r} is a '
                            f'{schema["label"]["task"]} label; pass --model={other} (or prepare '
                            f'the data with --task={task})')
        policy = tf.keras.mixed_precision.global_policy().name
        if policy != 'float32':  # their feature layers concatenate float32 columns with it
            raise UserError(f'--precision={policy}: the canned models compute in float32 only; '
                            'leave --precision at float32')
        features, weighed = canned_head.with_class_weights(features, labels, mode, params, schema)
        spec = build(features, labels, mode, table_columns.head(weighed), weighed, params)
        return canned_head.with_pictures(spec, labels, schema)

    return model_fn


# family: (build, default params, whether it trains in one process only)
FAMILIES = {
    'dnn': (dnn_fn, {**DEEP_PARAMS}, False),
    'linear': (linear_fn, {'optimizer': 'ftrl', 'learning_rate': 0.1, **LINEAR_PARAMS}, False),
    'wide_deep': (wide_deep_fn, {**DEEP_PARAMS, 'linear_learning_rate': 0.1, **LINEAR_PARAMS},
                  False),
    'boosted_trees': (boosted_trees.boosted_trees_fn, {**boosted_trees.PARAMS}, True),
}
for _family, (_build, _params, _single_process) in FAMILIES.items():
    for _task, _suffix in (('classification', 'classifier'), ('regression', 'regressor')):
        registry.register(registry.ModelSpec(
            name=f'{_family}_{_suffix}', model_fn=_model_fn(_build, _task, f'{_family}_{_suffix}'),
            default_params=({**_params, **class_weights.PARAMS} if _task == 'classification'
                            else _params), input_kind='table', schema_kind='table',
            single_process=_single_process))
