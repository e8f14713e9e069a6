"""Gradient boosted trees over a table's schema: --model=boosted_trees_classifier and
boosted_trees_regressor (registered with the other canned models in models/canned.py).

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

A tree is a complete binary tree of max_depth in heap order (node i's children are 2i+1 and
2i+2); a node that did not split sends every row left, and its children carry its value.
"""
from typing import Dict, List

import tensorflow as tf
from absl import logging

from common.errors import UserError
from models import table_columns

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


class Ensemble:
    """The trees as variables, and the state of their growth."""

    def __init__(self, n_trees: int, depth: int, logits: int, features: int, buckets: int,
                 center_bias: bool):
        self.n_trees, self.depth, self.logits = n_trees, depth, logits
        self.features, self.buckets, self.center_bias = features, buckets, center_bias
        self.splits, self.nodes = 2 ** depth - 1, 2 ** (depth + 1) - 1
        self.total_phases = n_trees * depth + int(center_bias)

        def variable(name, value):
            return tf.compat.v1.get_variable(name, initializer=value, trainable=False,
                                             use_resource=True)

        with tf.compat.v1.variable_scope('boosted_trees'):
            # Unsplit: feature 0 at a threshold no bucket exceeds, so every row goes left.
            self.split_feature = variable('split_feature', tf.zeros([n_trees * self.splits],
                                                                    tf.int32))
            self.split_threshold = variable('split_threshold', tf.fill(
                [n_trees * self.splits], buckets))
            self.node_value = variable('node_value', tf.zeros([n_trees * self.nodes, logits]))
            self.phases_done = variable('phases_done', tf.constant(0, tf.int32))
            self.batches = variable('batches_in_phase', tf.constant(0, tf.int32))
            rows = 2 ** (depth - 1) * features * buckets
            self.stats = variable('stats', tf.zeros([rows, 2 * logits]))
            self.weight = variable('weight_in_phase', tf.constant(0.0))

    def tree_and_layer(self):
        """The tree growing and its layer (the bias phase: tree 0, layer 0)."""
        grown = tf.maximum(self.phases_done - int(self.center_bias), 0)
        return grown // self.depth, grown % self.depth

    def finished(self):
        return self.phases_done >= self.total_phases

    def walk(self, buckets, tree_ids, depths):
        """The node each row reaches in each of tree_ids after depths[i] levels: [batch, trees]."""
        node = tf.zeros([tf.shape(buckets)[0], tf.size(tree_ids)], tf.int32)
        for level in range(self.depth):
            at = tree_ids * self.splits + node
            feature = tf.gather(self.split_feature, at)
            threshold = tf.gather(self.split_threshold, at)
            right = tf.cast(tf.gather(buckets, feature, batch_dims=1) > threshold, tf.int32)
            node = tf.where(level < depths[None, :], 2 * node + 1 + right, node)
        return node

    def depths(self):
        """Levels each tree has grown: all before the one growing, its layers, none after."""
        tree, layer = self.tree_and_layer()
        trees = tf.range(self.n_trees)
        return tf.where(trees < tree, self.depth, tf.where(trees == tree, layer, 0))

    def logits_of(self, buckets):
        node = self.walk(buckets, tf.range(self.n_trees), self.depths())
        values = tf.gather(self.node_value, tf.range(self.n_trees) * self.nodes + node)
        return tf.reduce_sum(values, axis=1)  # [batch, logits]

    def accumulate(self, buckets, gradients, hessians, weights):
        """Adds the batch's gradients and hessians to its layer's (node, feature, bucket) rows."""
        tree, layer = self.tree_and_layer()
        node = self.walk(buckets, tree[None], layer[None])[:, 0] - (2 ** layer - 1)
        rows = ((node[:, None] * self.features + tf.range(self.features)[None, :])
                * self.buckets + buckets)
        stats = tf.concat([gradients, hessians], axis=1)
        values = tf.broadcast_to(stats[:, None, :], [tf.shape(stats)[0], self.features,
                                                     2 * self.logits])
        return tf.group(
            self.stats.scatter_add(tf.IndexedSlices(tf.reshape(values, [-1, 2 * self.logits]),
                                                    tf.reshape(rows, [-1]))),
            self.weight.assign_add(tf.reduce_sum(weights)))

    def end_phase(self, hparams):
        """Grows the layer (or sets the bias) from the phase's statistics, then starts the next
        phase."""
        tree, layer = self.tree_and_layer()
        stats = self.stats.read_value() / tf.maximum(self.weight.read_value(), 1e-12)
        if self.center_bias:
            update = tf.cond(tf.equal(self.phases_done, 0), lambda: self._set_bias(stats, hparams),
                             lambda: self._grow(stats, tree, layer, hparams))
        else:
            update = self._grow(stats, tree, layer, hparams)
        with tf.control_dependencies([update]):
            return tf.group(self.stats.assign(tf.zeros_like(self.stats)),
                            self.weight.assign(0.0), self.batches.assign(0),
                            self.phases_done.assign_add(1))

    def _set_bias(self, stats, hparams):
        node_total = tf.reduce_sum(stats[:self.buckets], axis=0)  # node 0, feature 0
        bias = newton_step(node_total[:self.logits], node_total[self.logits:], hparams)
        return self.node_value.scatter_update(tf.IndexedSlices(bias[None, :], [0])).op

    def _grow(self, stats, tree, layer, hparams):
        active = 2 ** layer
        k = self.logits
        per_bucket = tf.reshape(stats, [-1, self.features, self.buckets, 2 * k])[:active]
        left = tf.cumsum(per_bucket, axis=2)  # rows with bucket <= threshold
        total = left[:, :1, -1:, :]  # every row lands in one bucket of feature 0
        right = total - left
        gain = (score(left, hparams) + score(right, hparams) - score(total, hparams))
        weight_left = tf.reduce_sum(left[..., k:], axis=-1)
        weight_right = tf.reduce_sum(right[..., k:], axis=-1)
        least = tf.maximum(hparams['min_node_weight'], 1e-12)
        valid = (weight_left >= least) & (weight_right >= least)
        gain = tf.reshape(tf.where(valid, gain, -float('inf')), [active, -1])
        best = tf.argmax(gain, axis=1, output_type=tf.int32)
        splits = tf.gather(gain, best, batch_dims=1) > hparams['tree_complexity']
        feature, threshold = best // self.buckets, best % self.buckets

        def chosen(side):
            flat = tf.reshape(side, [active, -1, 2 * k])
            return tf.gather(flat, best, batch_dims=1)

        nodes = 2 ** layer - 1 + tf.range(active)
        parent = tf.gather(self.node_value, tree * self.nodes + nodes)
        lr = hparams['learning_rate']
        step_left = newton_step(chosen(left)[:, :k], chosen(left)[:, k:], hparams)
        step_right = newton_step(chosen(right)[:, :k], chosen(right)[:, k:], hparams)
        split_rows = splits[:, None]
        children = tf.concat([
            tf.where(split_rows, parent + lr * step_left, parent),
            tf.where(split_rows, parent + lr * step_right, parent)], axis=0)
        at = tree * self.splits + nodes
        return tf.group(
            self.split_feature.scatter_update(tf.IndexedSlices(tf.where(splits, feature, 0), at)),
            self.split_threshold.scatter_update(tf.IndexedSlices(
                tf.where(splits, threshold, self.buckets), at)),
            self.node_value.scatter_update(tf.IndexedSlices(
                children, tree * self.nodes + tf.concat([2 * nodes + 1, 2 * nodes + 2], 0))))


def _shrunk(gradients, l1):
    return tf.sign(gradients) * tf.maximum(tf.abs(gradients) - l1, 0.0)


def score(stats, hparams):
    """Sum over logits of shrunk(G)^2 / (H + l2): how much a node's Newton step lowers the loss."""
    k = stats.shape[-1] // 2
    denominator = stats[..., k:] + hparams['l2_regularization']
    shrunk = _shrunk(stats[..., :k], hparams['l1_regularization'])
    return tf.reduce_sum(tf.math.divide_no_nan(tf.square(shrunk), denominator), axis=-1)


def newton_step(gradients, hessians, hparams):
    return -tf.math.divide_no_nan(_shrunk(gradients, hparams['l1_regularization']),
                                  hessians + hparams['l2_regularization'])


def gradients_and_hessians(logits, labels, schema):
    """Of the canned head's loss per row: logistic, softmax (the hessian's diagonal) or squared
    error."""
    if schema['label']['task'] == 'regression':
        return logits - tf.reshape(labels, [-1, 1]), tf.ones_like(logits)
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


def boosted_trees_fn(features, labels, mode, head, schema, params):
    check_params(params)
    entries = table_columns.features(schema)
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
    ensemble = Ensemble(params['n_trees'], params['max_depth'], head.logits_dimension,
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
