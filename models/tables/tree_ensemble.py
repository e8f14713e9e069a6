"""Gradient boosted trees as variables: their predictions, and their growth a layer at a time
from the gradients and hessians summed over the batches of a phase (models/tables/boosted_trees.py).

A tree is a complete binary tree of max_depth in heap order (node i's children are 2i+1 and
2i+2): each split node holds a feature and a bucket threshold (a row goes right when its bucket
is above it), every node a value, one per logit. A node that did not split sends every row left,
and its children carry its value. The statistics are means per row over the phase, so the
regularization params mean the same whatever the batch size and number of batches.
"""
import tensorflow as tf


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
