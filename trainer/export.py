"""SavedModel export into EXPORT_DIR/<global step>/, atomically, and loading one to predict."""
import json
import os
import re
import shutil
from typing import List

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from input_fns.errors import DataError
from input_fns.shards import pid_alive

def _rename_signatures(saved_model_dir: str, renames) -> None:
    """Estimator names alternative-input signatures '<receiver>:<output>'; give them plain names."""
    path = os.path.join(saved_model_dir, 'saved_model.pb')
    saved_model = saved_model_pb2.SavedModel()
    with open(path, 'rb') as f:
        saved_model.ParseFromString(f.read())
    for meta_graph in saved_model.meta_graphs:
        signatures = meta_graph.signature_def
        taken = {}  # remove every renamed or dropped signature first, then add the new names
        for old in renames:
            if old in signatures:
                taken[old] = type(signatures[old])()
                taken[old].CopyFrom(signatures[old])
                del signatures[old]
        for old, new in renames.items():
            if old in taken and new:
                signatures[new].CopyFrom(taken[old])
    with open(path, 'wb') as f:
        f.write(saved_model.SerializeToString())


def _remove_leftovers(export_dir: str) -> None:
    """Staging folders of exports killed midway (kill -9 skips the cleanup below)."""
    if not os.path.isdir(export_dir):
        return
    for name in os.listdir(export_dir):
        match = re.fullmatch(r'(?:\.staging|\d+\.old)-(\d+)', name)
        if match and not pid_alive(int(match.group(1))):
            shutil.rmtree(os.path.join(export_dir, name), ignore_errors=True)


def export_saved_model(estimator, receiver_fn, export_dir: str, checkpoint_path: str,
                       signature_renames=None) -> str:
    """Exports a checkpoint to EXPORT_DIR/<its global step>/."""
    step = int(tf.train.load_variable(checkpoint_path, 'global_step'))
    _remove_leftovers(export_dir)
    final_dir = os.path.join(export_dir, str(step))
    staging_base = os.path.join(export_dir, f'.staging-{os.getpid()}')
    try:
        staged = estimator.export_saved_model(staging_base, receiver_fn,
                                              checkpoint_path=checkpoint_path)
        staged = staged.decode() if isinstance(staged, bytes) else staged
        _rename_signatures(staged, signature_renames or {})
        if os.path.exists(final_dir):  # re-export of the same step: swap it in
            old_dir = f'{final_dir}.old-{os.getpid()}'
            os.rename(final_dir, old_dir)
            os.rename(staged, final_dir)
            shutil.rmtree(old_dir)
        else:
            os.rename(staged, final_dir)
    finally:
        shutil.rmtree(staging_base, ignore_errors=True)
    return final_dir


def predict_files(saved_model_dir: str, image_paths: List[str]) -> List[dict]:
    """Runs the SavedModel's serving_default signature (no Estimator) on image files."""
    if not os.path.exists(os.path.join(saved_model_dir, 'saved_model.pb')):
        raise DataError(f'--saved_model={saved_model_dir}: no saved_model.pb there; '
                        'export one with --mode=export')
    if not image_paths:
        raise DataError('predict: give one or more image files after the flags')
    encoded = []
    for path in image_paths:
        try:
            with open(path, 'rb') as f:
                data = f.read()
            tf.io.decode_image(data, expand_animations=False)
        except OSError as e:
            raise DataError(f'{path}: cannot read it ({e.strerror})')
        except tf.errors.InvalidArgumentError:
            raise DataError(f'{path}: not a PNG, JPEG, GIF or BMP image')
        encoded.append(data)
    serve = tf.saved_model.load(saved_model_dir).signatures['serving_default']
    if sorted(serve.structured_input_signature[1]) == ['image_bytes_a', 'image_bytes_b']:
        if len(encoded) % 2:
            raise DataError('predict: this model compares two photos: give pairs of image files '
                            '(a1 b1 a2 b2 ...)')
        outputs = serve(image_bytes_a=tf.constant(encoded[0::2]),
                        image_bytes_b=tf.constant(encoded[1::2]))
        names = [{'image_a': a, 'image_b': b} for a, b in zip(image_paths[0::2], image_paths[1::2])]
    else:
        outputs = serve(image_bytes=tf.constant(encoded))
        names = [{'image': path} for path in image_paths]
    outputs = {key: value.numpy() for key, value in outputs.items()}
    return [{**name, **{key: value[i].tolist() for key, value in sorted(outputs.items())}}
            for i, name in enumerate(names)]


def print_json_lines(rows):
    for row in rows:
        print(json.dumps(row), flush=True)
