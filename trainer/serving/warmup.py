"""TF Serving's warm-up records: VERSION/assets.extra/tf_serving_warmup_requests.

TF Serving replays these requests when it loads a version, before it answers clients, so
the first real request does not pay for graph initialisation. The file is a TFRecord of
PredictionLog protos (tensorflow-serving-api's); one request per signature, built from the
SavedModel's own signature_defs and the input kind's synthetic inputs of the right shape.
"""
import os
from typing import Dict, List

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import (classification_pb2, predict_pb2, prediction_log_pb2,
                                     regression_pb2)

from common import files
from common.errors import UserError

FILE_NAME = 'tf_serving_warmup_requests'
# Signatures whose requests carry serialized tf.Example protos (input 'inputs'):
# {method: (request, log, PredictionLog field)}.
EXAMPLE_REQUESTS = {
    tf.saved_model.CLASSIFY_METHOD_NAME: (classification_pb2.ClassificationRequest,
                                          prediction_log_pb2.ClassifyLog, 'classify_log'),
    tf.saved_model.REGRESS_METHOD_NAME: (regression_pb2.RegressionRequest,
                                         prediction_log_pb2.RegressLog, 'regress_log')}


def prediction_logs(signature_defs: Dict, inputs: Dict[str, np.ndarray]
                    ) -> List[prediction_log_pb2.PredictionLog]:
    """One request per signature, by name; inputs: a batch for each signature input name (the
    classify and regress signatures' 'inputs': serialized tf.Example protos)."""
    logs = []
    for name, signature in sorted(signature_defs.items()):
        missing = sorted(set(signature.inputs) - set(inputs))
        if missing:
            raise UserError(f'no warm-up input for {", ".join(missing)} of signature {name}: '
                            'the input kind\'s warmup_inputs() must give a batch for each '
                            'input of every signature')
        if signature.method_name in EXAMPLE_REQUESTS:  # classify, regress: tf.Example protos
            request_type, log_type, log_field = EXAMPLE_REQUESTS[signature.method_name]
            request = request_type()
            request.model_spec.signature_name = name
            for serialized in inputs[tf.saved_model.CLASSIFY_INPUTS]:
                request.input.example_list.examples.add().ParseFromString(serialized)
            log = prediction_log_pb2.PredictionLog(**{log_field: log_type(request=request)})
        elif signature.method_name == tf.saved_model.PREDICT_METHOD_NAME:
            request = predict_pb2.PredictRequest()
            request.model_spec.signature_name = name
            for key in signature.inputs:
                request.inputs[key].CopyFrom(tf.make_tensor_proto(inputs[key]))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request))
        else:
            raise UserError(f'no warm-up request for signature {name} ({signature.method_name}):'
                            ' give it a predict, classify or regress export output')
        logs.append(log)
    return logs


def write(path: str, logs: List[prediction_log_pb2.PredictionLog]) -> None:
    """Written into the hidden staging folder, which is moved into place whole afterwards."""
    files.makedirs(os.path.dirname(path))
    with tf.io.TFRecordWriter(path) as writer:
        for log in logs:
            writer.write(log.SerializeToString())
