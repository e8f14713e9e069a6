"""--class_weights: training's loss weighs each example by its class, for data where one class is
rare (defects, fraud, churn): 'balanced' (scikit-learn's N / (K * n_c), from the training
split's class counts in the data schema) or NAME=WEIGHT,... (a class not named weighs 1), as
Keras' class_weight. Evaluation and its metrics stay unweighted: `accuracy_of_class/NAME`
shows what the weights bought.

The heads that take it (models/heads: classification and table, the canned models) mark the graph;
trainer/run/model_fn_checks refuses the flag for a model_fn whose loss ignored it.
"""
import math
from typing import Dict, List, Optional, Sequence

import tensorflow as tf

from common.errors import UserError

PARAMS = {'class_weights': ''}  # '' (none), 'balanced' or 'NAME=WEIGHT,...'
BALANCED = 'balanced'
APPLIED = 'class_weights_applied'  # the graph collection a head marks


def values(text: str, class_names: Sequence[str], counts: Optional[Sequence[int]]) -> List[float]:
    """The weight of each class, in class order."""
    if text.strip() == BALANCED:
        if not counts:
            raise UserError(f'--class_weights={BALANCED}: the data schema has no count of each '
                            'class in the training split; give the weights: '
                            f'--class_weights={class_names[-1]}=WEIGHT,...')
        total = sum(counts)
        return [total / (len(counts) * max(count, 1)) for count in counts]
    weights = {name: 1.0 for name in class_names}
    for item in text.split(','):
        name, equals, number = item.rpartition('=')
        try:
            weight = float(number)
        except ValueError:
            weight = -1.0
        if not equals or name.strip() not in weights or not (0 <= weight < math.inf):
            raise UserError(f'--class_weights={text}: {item.strip()!r}: give {BALANCED} or '
                            f'NAME=WEIGHT (a number >= 0) for classes among: '
                            f'{", ".join(class_names)}')
        weights[name.strip()] = weight
    return [weights[name] for name in class_names]


def train_counts(schema: Optional[Dict], class_names: Sequence[str]) -> Optional[List[int]]:
    """The training split's count of each class, from an images or a table schema; else None."""
    schema = schema or {}
    by_name = (schema.get('class_counts') or {}).get('train')  # images: {split: {name: n}}
    if by_name:
        return [by_name.get(name, 0) for name in class_names]
    label = schema.get('label') or {}  # tables: the training split's, in class order
    if label.get('class_counts') and len(label['class_counts']) == len(class_names):
        return list(label['class_counts'])
    return None


def example_weights(params: Dict, class_ids, class_names: Sequence[str], mode):
    """[batch] float32 training weights of examples by their class id (int), and the graph marked
    as weighing them; None without --class_weights, or outside training (checked all the same)."""
    text = params.get('class_weights') or ''
    if not text:
        return None
    weights = values(text, class_names, train_counts(params.get('schema'), class_names))
    tf.compat.v1.add_to_collection(APPLIED, tf.constant(True))
    if mode != tf.estimator.ModeKeys.TRAIN:
        return None
    return tf.gather(tf.constant(weights, tf.float32), tf.reshape(class_ids, [-1]))
