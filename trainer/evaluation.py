"""LFW's protocol for face pairs, on a checkpoint's scores."""
import numpy as np

from input_fns import face_records
from trainer import pair_protocol


def pair_scores(estimator, checkpoint, input_fn) -> np.ndarray:
    """Same-person probabilities, in the (deterministic) order of the pair shards."""
    return np.concatenate([batch['probability'] for batch in estimator.predict(
        input_fn, predict_keys=['probability'], checkpoint_path=checkpoint,
        yield_single_examples=False)])


def pair_protocol_report(estimator, checkpoint, eval_input_fn, eval_pattern,
                         threshold_input_fn=None, threshold_pattern=None) -> dict:
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
                'auc': pair_protocol.roc_auc(scores, truth['label'])}
    return pair_protocol.evaluate(scores, truth['label'], truth['fold'], threshold_scores,
                                  threshold_labels)
