"""--mode=predict: a SavedModel's serving_default signature (no Estimator) on image files."""
import json
import os
from typing import List

import tensorflow as tf

from common import files, paths
from common.errors import UserError, op_error_summary
from trainer.serving import export


def resolve_saved_model(path: str) -> str:
    """--saved_model: a SavedModel folder, or a pointer file such as EXPORT_DIR/best."""
    if files.exists(path) and not files.isdir(path):
        step = files.read_text(path).strip()
        if not step.isdigit():
            raise UserError(f'--saved_model={path}: neither a SavedModel folder nor an export '
                            'pointer (a file naming a step)')
        path = paths.join(os.path.dirname(path.rstrip('/')), step)
    if not files.exists(paths.join(path, 'saved_model.pb')):
        raise UserError(f'--saved_model={path}: no saved_model.pb there; '
                        'export one with --mode=export')
    if os.path.basename(path.rstrip('/')).isdigit() and not export.is_complete(path):
        raise UserError(f'--saved_model={path}: this export is incomplete (no {export.COMPLETE_MARKER}): '
                        'still being written, or its job was killed; use another version')
    return path


def predict_files(saved_model_dir: str, image_paths: List[str]) -> List[dict]:
    """Runs the SavedModel's serving_default signature (no Estimator) on image files."""
    saved_model_dir = resolve_saved_model(saved_model_dir)
    if not image_paths:
        raise UserError('predict: give one or more image files after the flags')
    encoded = []
    for path in image_paths:
        try:
            data = files.read_bytes(path)
            tf.io.decode_image(data, expand_animations=False)
        except tf.errors.NotFoundError:
            raise UserError(f'{path}: no such file')
        except (tf.errors.PermissionDeniedError, tf.errors.FailedPreconditionError) as e:
            raise UserError(f'{path}: cannot read it ({e.message})')
        except tf.errors.InvalidArgumentError:
            raise UserError(f'{path}: not a PNG, JPEG, GIF or BMP image')
        encoded.append(data)
    serve = tf.saved_model.load(saved_model_dir).signatures['serving_default']
    if sorted(serve.structured_input_signature[1]) == ['image_bytes_a', 'image_bytes_b']:
        if len(encoded) % 2:
            raise UserError('predict: this model compares two photos: give pairs of image files '
                            '(a1 b1 a2 b2 ...)')
        outputs = _serve(serve, image_paths, image_bytes_a=encoded[0::2],
                         image_bytes_b=encoded[1::2])
        names = [{'image_a': a, 'image_b': b} for a, b in zip(image_paths[0::2], image_paths[1::2])]
    else:
        outputs = _serve(serve, image_paths, image_bytes=encoded)
        names = [{'image': path} for path in image_paths]
    outputs = {key: value.numpy() for key, value in outputs.items()}
    return [{**name, **{key: value[i].tolist() for key, value in sorted(outputs.items())}}
            for i, name in enumerate(names)]


def _serve(serve, image_paths, **batches):
    """serve(**batches); when the model cannot read an image, an error naming the image file."""
    try:
        return serve(**{name: tf.constant(batch) for name, batch in batches.items()})
    except tf.errors.InvalidArgumentError as e:
        error = e
    per_row = len(batches)  # 1 image a row, or 2 for a pair model
    for row in range(len(image_paths) // per_row):  # which one: each row alone
        try:
            serve(**{name: tf.constant(batch[row:row + 1]) for name, batch in batches.items()})
        except tf.errors.InvalidArgumentError as e:
            paths = ' / '.join(image_paths[row * per_row:(row + 1) * per_row])
            raise UserError(f'{paths}: the SavedModel cannot read it ({op_error_summary(e)}); '
                            'convert it to an RGB or greyscale PNG or JPEG')
    raise UserError(f'--saved_model: the model refused the batch ({op_error_summary(error)})')


def print_json_lines(rows):
    for row in rows:
        print(json.dumps(row), flush=True)
