"""LFW's evaluation protocol for same/different pair scores.

Accuracy is measured at a threshold chosen on other pairs than those it is
measured on: on training pairs for a single pair set, and, for the 10-fold
pairs.txt, for each fold on the other nine (LFW's README, "test procedure").

ROC AUC and the best-accuracy threshold are written here (about 40 lines, checked against
brute force in tests/test_face_pairs.py) rather than taken from scikit-learn's roc_auc_score and
roc_curve: scikit-learn and the SciPy it needs would add about 194 MB to the runtime image
for these two functions (BUILD.md, "Why no scikit-learn at run time").
"""
from typing import Dict, Optional, Tuple

import numpy as np

from common import paths
from input_fns.faces import face_records
from trainer.model_dir import ledger

REPORT_KEY = 'lfw_protocol'  # the ledger metric that holds the protocol's report


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
    report = evaluate(scores, truth['label'], truth['fold'], threshold_scores, threshold_labels)
    if 'threshold' in report:  # where it came from, for the export that bakes it in
        report.update(threshold_files=threshold_pattern, num_threshold_pairs=len(threshold_labels))
    return report


def chosen_threshold(model_dir: str, step: int, eval_name: str) -> Tuple[Optional[Dict], str]:
    """(the record of the threshold an eval job chose on threshold pairs for the checkpoint of
    `step`, as assets.extra/threshold.json holds it, ''), or (None, why there is none).

    Any eval job's ledger will do; where several chose one, the job named eval_name."""
    found = {}
    for name in ledger.eval_names(model_dir):
        entry = ledger.Ledger(model_dir, name).find(step)
        report = (entry.metrics or {}).get(REPORT_KEY, {}) if entry else {}
        if 'threshold' in report:
            found[name] = (entry, report)
    if not found:
        return None, (f'no eval job in {model_dir} chose a threshold for step {step}; evaluate '
                      'it with --threshold_files=PAIRS (of people kept out of training) first')
    if eval_name not in found and len(found) > 1:
        return None, (f'eval jobs {", ".join(sorted(found))} each chose a threshold for step '
                      f'{step}; pass --eval_name=NAME to pick one')
    name = eval_name if eval_name in found else next(iter(found))
    entry, report = found[name]
    return {
        'value': report['threshold'],
        'applies_to': 'probability',  # same_person = probability >= value
        'metric': 'accuracy',  # what the threshold maximizes on the calibration pairs
        'calibration_pairs': report.get('threshold_files'),
        'num_calibration_pairs': report.get('num_threshold_pairs'),
        'calibration_accuracy': report['threshold_pairs_accuracy'],
        'eval_name': name,
        'ledger_entry': paths.join(ledger.Ledger(model_dir, name).path, ledger.result_name(step)),
        'step': step,
        'eval_files': entry.eval_files,
        'eval_accuracy': report['accuracy'],  # LFW's protocol figure, at this threshold
        'eval_auc': report['auc'],
    }, ''
