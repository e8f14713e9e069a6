"""What TF Serving does with an export, from Python and through its C++ loader
(tools/serving_loader.cc), and the check that both give the same answers (issue 38)."""
import json
import os

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2

from tools import serving_loader
from trainer.serving import export, warmup


def replayed_warmup(saved_model_dir):
    """TF Serving's warm-up: each record of the file run through the loaded SavedModel, as
    {signature name: its outputs}."""
    path = os.path.join(saved_model_dir, export.EXTRA_DIR, warmup.FILE_NAME)
    signatures = tf.saved_model.load(saved_model_dir).signatures
    outputs = {}
    for record in tf.data.TFRecordDataset(path):
        log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
        if log.HasField('classify_log') or log.HasField('regress_log'):  # tf.Example requests
            request = (log.classify_log if log.HasField('classify_log') else log.regress_log).request
            inputs = {'inputs': tf.constant([example.SerializeToString()
                                             for example in request.input.example_list.examples])}
        else:
            request = log.predict_log.request
            inputs = {key: tf.constant(tf.make_ndarray(tensor))
                      for key, tensor in request.inputs.items()}
        name = request.model_spec.signature_name
        assert name not in outputs, f'two warm-up requests for {name}'
        outputs[name] = {key: value.numpy() for key, value in signatures[name](**inputs).items()}
    return outputs


def run_loader(binary, saved_model_dir, examples=None, rest_body=None):
    return serving_loader.run(binary, saved_model_dir, examples, rest_body, capture_output=True,
                              text=True, timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))


def as_array(output):
    """One output of the loader's JSON as numpy (strings as bytes, as TensorFlow gives them)."""
    values = [value.encode() if isinstance(value, str) else value for value in output['values']]
    return np.array(values).reshape(output['shape'])


def assert_same_answers(cpp_outputs, python_outputs):
    assert sorted(cpp_outputs) == sorted(python_outputs)
    for key, python in python_outputs.items():
        cpp = as_array(cpp_outputs[key])
        assert cpp.shape == python.shape, key
        if python.dtype.kind == 'f':
            np.testing.assert_allclose(cpp, python, rtol=1e-5, atol=1e-6, err_msg=key)
        else:
            np.testing.assert_array_equal(cpp, python, err_msg=key)


def check_against_python(binary, version_dir, examples=None, rest_body=None):
    """Loads the export in C++: its signatures (TensorInfo names included) and every warm-up
    answer are Python's. Returns the loader's JSON lines."""
    result = run_loader(binary, version_dir, examples, rest_body)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    python_signatures = export.signature_defs(version_dir)
    assert {name: (value['method'], value['inputs'], value['outputs'])
            for name, value in lines[0]['signatures'].items()} == {
        name: (signature.method_name, {k: v.name for k, v in signature.inputs.items()},
               {k: v.name for k, v in signature.outputs.items()})
        for name, signature in python_signatures.items()}
    warmups = [line for line in lines if 'warmup' in line]
    python = replayed_warmup(version_dir)
    assert sorted(line['signature'] for line in warmups) == sorted(python_signatures) == sorted(python)
    for line in warmups:
        assert_same_answers(line['outputs'], python[line['signature']])
    return lines
