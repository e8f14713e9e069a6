"""--mode=predict: a SavedModel's serving_default signature (no Estimator) on image files."""
import json
import os
from typing import List

import tensorflow as tf

from common.errors import UserError


def predict_files(saved_model_dir: str, image_paths: List[str]) -> List[dict]:
    """Runs the SavedModel's serving_default signature (no Estimator) on image files."""
    if not os.path.exists(os.path.join(saved_model_dir, 'saved_model.pb')):
        raise UserError(f'--saved_model={saved_model_dir}: no saved_model.pb there; '
                        'export one with --mode=export')
    if not image_paths:
        raise UserError('predict: give one or more image files after the flags')
    encoded = []
    for path in image_paths:
        try:
            with open(path, 'rb') as f:
                data = f.read()
            tf.io.decode_image(data, expand_animations=False)
        except OSError as e:
            raise UserError(f'{path}: cannot read it ({e.strerror})')
        except tf.errors.InvalidArgumentError:
            raise UserError(f'{path}: not a PNG, JPEG, GIF or BMP image')
        encoded.append(data)
    serve = tf.saved_model.load(saved_model_dir).signatures['serving_default']
    if sorted(serve.structured_input_signature[1]) == ['image_bytes_a', 'image_bytes_b']:
        if len(encoded) % 2:
            raise UserError('predict: this model compares two photos: give pairs of image files '
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
