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

FILE_NAME = 'tf_serving_warmup_requests'


def prediction_logs(signature_defs: Dict, inputs: Dict[str, np.ndarray]
                    ) -> List[prediction_log_pb2.PredictionLog]:
    """One request per signature, by name; inputs: a batch for each signature input name (the
    classify and regress signatures' 'inputs': serialized tf.Example protos)."""
    logs = []
    for name, signature in sorted(signature_defs.items()):
        missing = sorted(set(signature.inputs) - set(inputs))
        if missing:
            raise ValueError(f'no warm-up input for {", ".join(missing)} of signature {name}')
        if signature.method_name in (tf.saved_model.CLASSIFY_METHOD_NAME,
                                     tf.saved_model.REGRESS_METHOD_NAME):
            classify = signature.method_name == tf.saved_model.CLASSIFY_METHOD_NAME
            request = (classification_pb2.ClassificationRequest() if classify
                       else regression_pb2.RegressionRequest())
            request.model_spec.signature_name = name
            for serialized in inputs[tf.saved_model.CLASSIFY_INPUTS]:
                request.input.example_list.examples.add().ParseFromString(serialized)
            log = prediction_log_pb2.PredictionLog(
                classify_log=prediction_log_pb2.ClassifyLog(request=request)) if classify else \
                prediction_log_pb2.PredictionLog(
                    regress_log=prediction_log_pb2.RegressLog(request=request))
        elif signature.method_name == tf.saved_model.PREDICT_METHOD_NAME:
            request = predict_pb2.PredictRequest()
            request.model_spec.signature_name = name
            for key in signature.inputs:
                request.inputs[key].CopyFrom(tf.make_tensor_proto(inputs[key]))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request))
        else:
            raise ValueError(f'no warm-up request for signature {name} ({signature.method_name})')
        logs.append(log)
    return logs


def write(path: str, logs: List[prediction_log_pb2.PredictionLog]) -> None:
    """Written into the hidden staging folder, which is moved into place whole afterwards."""
    files.makedirs(os.path.dirname(path))
    with tf.io.TFRecordWriter(path) as writer:
        for log in logs:
            writer.write(log.SerializeToString())
