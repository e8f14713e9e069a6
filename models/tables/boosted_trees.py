"""Gradient boosted trees over a table's schema: --model=boosted_trees_classifier and
boosted_trees_regressor (registered with the other canned models in models/tables/canned.py).

tensorflow-estimator 2.15 ships no BoostedTrees estimator, and TensorFlow 2.15.1's wheel
registers the BoostedTrees ops without their kernels (running one fails with "no registered
kernels"), so the trees here are built from ordinary ops and variables: checkpoints, exports
and TF Serving take them as they take any model.

Each feature is a bucket id: a number by the schema's quantiles (tf.raw_ops.Bucketize), text by
its place in the schema's vocabulary (one more bucket for any other value; a missing value is
read as the training mean or as '', as for every table model). Trees grow layer by layer:
for --n_batches_per_layer batches the gradient and hessian of the loss at the current
prediction are summed per (node, feature, bucket), then every node of the layer takes the
split of highest gain (XGBoost's second-order gain with --l1_regularization and
--l2_regularization; a split must gain more than --tree_complexity, the pre-pruning, and leave
each side a hessian of at least --min_node_weight, both per example) and its children the
Newton step from it, times --learning_rate. With --center_bias the first n_batches_per_layer
batches set the first tree's root to one Newton step from 0 (the label prior, for squared
error the mean). Training stops once --n_trees trees of --max_depth are grown; a later step is a
no-op that neither changes the trees nor the global step.

The trees and their growth are models/tables/tree_ensemble.py's.
"""
from typing import Dict, List

import tensorflow as tf
from absl import logging

from common.errors import UserError
from features import value_lists
from models.tables import table_columns, tree_ensemble

PARAMS = {'n_trees': 100, 'max_depth': 6, 'n_batches_per_layer': 1, 'learning_rate': 0.1,
          'l1_regularization': 0.0, 'l2_regularization': 0.01, 'tree_complexity': 0.0,
          'min_node_weight': 0.0, 'center_bias': True}
MAX_DEPTH = 12  # 4,095 splits a tree
MAX_STATISTICS_BYTES = 1 << 30  # a layer's sums: 2^(depth-1) nodes x features x buckets x logits


def check_params(params: Dict) -> None:
    for name in ('n_trees', 'max_depth', 'n_batches_per_layer'):
        if params[name] < 1:
            raise UserError(f'--{name}={params[name]}: give 1 or more')
    if params['max_depth'] > MAX_DEPTH:
        raise UserError(f'--max_depth={params["max_depth"]}: at most {MAX_DEPTH} (a layer\'s '
                        'statistics grow as 2^depth); grow more trees instead')
    for name in ('l1_regularization', 'l2_regularization', 'tree_complexity', 'min_node_weight'):
        if params[name] < 0:
            raise UserError(f'--{name}={params[name]}: give 0 or more')
    if params['learning_rate'] <= 0:
        raise UserError(f'--learning_rate={params["learning_rate"]}: give a positive shrinkage')


def bucketized(features: Dict, entries: List[Dict]) -> tf.Tensor:
    """[batch, num features] int32 bucket ids."""
    columns = []
    for entry in entries:
        values = tf.reshape(features[entry['name']], [-1])
        if entry['dtype'] == 'string':
            ids = table_columns.position_in(values, entry['vocabulary'])
        else:
            ids = tf.raw_ops.Bucketize(input=tf.cast(values, tf.float32),
                                       boundaries=table_columns.boundaries(entry))
        columns.append(ids)
    return tf.stack(columns, axis=1)


def num_buckets(entry: Dict) -> int:
    if entry['dtype'] == 'string':
        return len(entry['vocabulary']) + 1
    return len(table_columns.boundaries(entry)) + 1


def gradients_and_hessians(logits, labels, schema):
    """Of the canned head's loss per row: logistic, softmax (the hessian's diagonal) or squared
    error (of the label in units of its std, as the head's logits are: table_columns.head)."""
    if schema['label']['task'] == 'regression':
        mean, std = table_columns.label_scale(schema)
        return logits - (tf.reshape(labels, [-1, 1]) - mean) / std, tf.ones_like(logits)
    label_ids = table_columns.label_ids(labels, schema)
    if logits.shape[-1] == 1:
        probability = tf.sigmoid(logits)
        target = tf.cast(label_ids, tf.float32)[:, None]
    else:
        probability = tf.nn.softmax(logits)
        target = tf.one_hot(label_ids, logits.shape[-1])
    return probability - target, probability * (1.0 - probability)


class StopWhenGrown(tf.estimator.SessionRunHook):
    """Ends training once every tree is grown. Whether they are is read alongside a step, so it
    may be seen one step late: that step is a no-op (train_op_fn's cond)."""

    def __init__(self, finished: tf.Tensor, n_trees: int):
        self._finished, self._n_trees = finished, n_trees

    def begin(self):
        self._global_step = tf.compat.v1.train.get_global_step()

    def before_run(self, run_context):
        return tf.estimator.SessionRunArgs([self._finished, self._global_step])

    def after_run(self, run_context, run_values):
        finished, step = run_values.results
        if finished:
            logging.info('all %d trees are grown (step %d); training ends', self._n_trees, step)
            run_context.request_stop()


def refuse_lists(entries: List[Dict]) -> None:
    for entry in entries:
        if value_lists.is_list(entry):
            raise UserError(f'feature {entry["name"]!r}: '
                            f'{value_lists.describe(value_lists.form(entry))}, where boosted '
                            'trees split on one value a feature; train dnn_ or linear_ models '
                            f'on it, or leave it out with prepare --ignore_columns={entry["name"]}')


def boosted_trees_fn(features, labels, mode, head, schema, params):
    check_params(params)
    entries = [entry for entry in table_columns.features(schema) if entry['dtype'] != 'words']
    texts = [entry['name'] for entry in table_columns.features(schema) if entry not in entries]
    if texts:
        logging.log_first_n(logging.WARNING, 'boosted trees split on one value a feature and '
                            'leave out %s (free text: the linear and dnn models read its words)',
                            1, ', '.join(texts))
    refuse_lists(entries)
    if not entries:
        raise UserError('the schema has no feature with a value in the training split; '
                        'boosted trees need at least one')
    buckets_per_feature = max(num_buckets(entry) for entry in entries)
    statistics_bytes = (2 ** (params['max_depth'] - 1) * len(entries) * buckets_per_feature
                        * 2 * head.logits_dimension * 4)
    if statistics_bytes > MAX_STATISTICS_BYTES:
        raise UserError(f'--max_depth={params["max_depth"]}: a layer\'s sums would take '
                        f'{statistics_bytes >> 20:,} MB ({len(entries)} features, up to '
                        f'{buckets_per_feature} buckets each); lower --max_depth, or prepare the '
                        'data with a smaller --max_vocabulary')
    ensemble = tree_ensemble.Ensemble(params['n_trees'], params['max_depth'], head.logits_dimension,
                        len(entries), buckets_per_feature, params['center_bias'])
    buckets = bucketized(features, entries)
    logits = ensemble.logits_of(buckets)
    if mode != tf.estimator.ModeKeys.TRAIN:
        return head.create_estimator_spec(features=features, mode=mode, logits=logits,
                                          labels=labels)

    def train_op_fn(unused_loss):
        weights = tf.ones_like(logits[:, :1])
        weight_name = schema.get('weight', {}).get('name')
        if weight_name:
            weights = tf.reshape(tf.cast(features[weight_name], tf.float32), [-1, 1])
        gradients, hessians = gradients_and_hessians(logits, labels, schema)
        global_step = tf.compat.v1.train.get_or_create_global_step()  # not in the cond's graph

        def train_step():
            accumulated = ensemble.accumulate(buckets, gradients * weights, hessians * weights,
                                              weights)
            with tf.control_dependencies([accumulated]):
                batches = ensemble.batches.assign_add(1)
            grown = tf.cond(batches >= params['n_batches_per_layer'],
                            lambda: ensemble.end_phase(params), tf.no_op)
            with tf.control_dependencies([grown]):
                step = global_step.assign_add(1)
            return tf.group(step)

        return tf.cond(ensemble.finished(), tf.no_op, train_step)

    tree, layer = ensemble.tree_and_layer()
    tf.compat.v1.summary.scalar('boosted_trees/trees_grown', tf.minimum(tree, params['n_trees']))
    tf.compat.v1.summary.scalar('boosted_trees/layer', layer)
    spec = head.create_estimator_spec(features=features, mode=mode, logits=logits,
                                      labels=labels, train_op_fn=train_op_fn)
    return spec._replace(training_hooks=list(spec.training_hooks) + [
        StopWhenGrown(ensemble.finished(), params['n_trees'])])
