"""LFW's evaluation protocol for same/different pair scores.

Accuracy is measured at a threshold chosen on other pairs than those it is
measured on: on training pairs for a single pair set, and, for the 10-fold
pairs.txt, for each fold on the other nine (LFW's README, "test procedure").

ROC AUC and the best-accuracy threshold are written here (about 40 lines, checked against
brute force in tests/test_faces.py) rather than taken from scikit-learn's roc_auc_score and
roc_curve: scikit-learn and the SciPy it needs would add about 194 MB to the runtime image
for these two functions (BUILD.md, "Why no scikit-learn at run time").
"""
from typing import Dict, Optional

import numpy as np

from input_fns import face_records


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> float:
    """The threshold (score >= t means "same") with the highest accuracy on these pairs."""
    order = np.argsort(scores, kind='mergesort')
    sorted_scores, sorted_labels = scores[order], labels[order].astype(bool)
    # correct[i]: pairs classified right when those from sorted position i on are called "same".
    correct = (np.concatenate([[0], np.cumsum(~sorted_labels)])
               + np.concatenate([np.cumsum(sorted_labels[::-1])[::-1], [0]]))
    # Only cut between distinct scores.
    candidates = [0] + [i for i in range(1, len(scores)) if sorted_scores[i] != sorted_scores[i - 1]]
    candidates.append(len(scores))
    best = max(candidates, key=lambda i: correct[i])
    if best == 0:
        return float(sorted_scores[0])
    if best == len(scores):
        return float(np.nextafter(sorted_scores[-1], np.inf))
    return float((sorted_scores[best - 1] + sorted_scores[best]) / 2)


def accuracy_at(scores: np.ndarray, labels: np.ndarray, threshold: float) -> float:
    return float(np.mean((scores >= threshold) == labels.astype(bool)))


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve: P(score of a same pair > score of a different pair), ties half."""
    labels = labels.astype(bool)
    positives, negatives = labels.sum(), (~labels).sum()
    if not positives or not negatives:
        return float('nan')
    ranks = _average_ranks(scores)
    return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind='mergesort')
    ranks = np.empty(len(values))
    sorted_values = values[order]
    start = 0
    for end in range(1, len(values) + 1):
        if end == len(values) or sorted_values[end] != sorted_values[start]:
            ranks[order[start:end]] = (start + end + 1) / 2  # 1-based average rank of the tie
            start = end
    return ranks


def evaluate(scores: np.ndarray, labels: np.ndarray, folds: np.ndarray,
             threshold_scores: Optional[np.ndarray] = None,
             threshold_labels: Optional[np.ndarray] = None) -> Dict:
    """The protocol's report. Several folds: cross-validated; one: threshold from threshold_*."""
    fold_ids = np.unique(folds)
    if len(fold_ids) > 1:
        accuracies, thresholds, aucs = [], [], []
        for fold in fold_ids:
            held = folds == fold
            threshold = best_threshold(scores[~held], labels[~held])
            thresholds.append(threshold)
            accuracies.append(accuracy_at(scores[held], labels[held], threshold))
            aucs.append(roc_auc(scores[held], labels[held]))
        return {'protocol': f'{len(fold_ids)}-fold, threshold from the other folds',
                'accuracy_mean': float(np.mean(accuracies)),
                'accuracy_std': float(np.std(accuracies)),
                'auc_mean': float(np.mean(aucs)), 'fold_accuracies': accuracies,
                'fold_thresholds': thresholds, 'num_pairs': int(len(labels))}
    if threshold_scores is None:
        raise ValueError('a single pair set needs threshold pairs (--threshold_files)')
    threshold = best_threshold(threshold_scores, threshold_labels)
    return {'protocol': 'threshold chosen on the threshold pairs',
            'threshold': threshold,
            'threshold_pairs_accuracy': accuracy_at(threshold_scores, threshold_labels, threshold),
            'accuracy': accuracy_at(scores, labels, threshold),
            'auc': roc_auc(scores, labels), 'num_pairs': int(len(labels))}


def pair_scores(estimator, checkpoint, input_fn) -> np.ndarray:
    """Same-person probabilities, in the (deterministic) order of the pair shards."""
    return np.concatenate([batch['probability'] for batch in estimator.predict(
        input_fn, predict_keys=['probability'], checkpoint_path=checkpoint,
        yield_single_examples=False)])


def checkpoint_report(estimator, checkpoint, eval_input_fn, eval_pattern,
                      threshold_input_fn=None, threshold_pattern=None) -> dict:
    """LFW's protocol on a checkpoint's scores for the eval pairs (threshold from other pairs)."""
    truth = face_records.read_pair_labels(eval_pattern, '--eval_files')
    scores = pair_scores(estimator, checkpoint, eval_input_fn)
    threshold_scores = threshold_labels = None
    if threshold_input_fn:
        threshold_scores = pair_scores(estimator, checkpoint, threshold_input_fn)
        threshold_labels = face_records.read_pair_labels(threshold_pattern,
                                                         '--threshold_files')['label']
    elif len(np.unique(truth['fold'])) == 1:
        return {'note': 'pass --threshold_files (pairs of training people) to get accuracy at a '
                        'threshold chosen on them',
                'auc': roc_auc(scores, truth['label'])}
    return evaluate(scores, truth['label'], truth['fold'], threshold_scores, threshold_labels)
