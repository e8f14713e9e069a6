"""--mode=predict: a signature of a SavedModel (no Estimator) on image files, on TF Serving REST
request bodies (.json files: trainer/serving/rest_body.py), or on rows (CSV or JSON lines files:
trainer/serving/predict_table.py) for a table model.

--saved_model takes what a TF Serving user has: the base path EXPORT_DIR (its newest complete
version, the one TF Serving serves by default), a version folder EXPORT_DIR/STEP, or a pointer
file such as EXPORT_DIR/best; one log line says which version was chosen and why.
"""
import json
import os
from typing import Iterator, List, Optional

import tensorflow as tf
from absl import logging

from common import file_trees, files, paths
from common.errors import UserError, op_error_summary
from input_fns.images import converted_images
from trainer.input_kinds.image_classification import image_example
from trainer.serving import export, predict_table, rest_body

DEFAULT_SIGNATURE = 'serving_default'
# Images read and served at a time: a folder of photos is not held in memory at once.
SERVE_BATCH = 64


def resolve_saved_model(path: str) -> str:
    """--saved_model: a base path, a version folder or a pointer file -> the version folder."""
    if files.exists(path) and not files.isdir(path):
        return _follow_pointer(path)
    parent = os.path.dirname(path.rstrip('/'))
    if os.path.basename(path.rstrip('/')).isdigit():  # EXPORT_DIR/STEP
        if not files.isdir(path) and files.isdir(parent):
            raise UserError(f'--saved_model={path}: no such version; {_holdings(parent)}')
        if files.isdir(path) and not export.is_complete(path):
            raise UserError(f'--saved_model={path}: this export is incomplete (no '
                            f'{export.COMPLETE_MARKER}): still being written, or its job was '
                            f'killed; {_holdings(parent)}')
    if files.exists(paths.join(path, export.SAVED_MODEL_PB)):
        return path
    if files.isdir(path):
        return _newest_version(path)
    raise UserError(f'--saved_model={path}: no such folder or file; give EXPORT_DIR, a version '
                    'folder EXPORT_DIR/STEP or a pointer such as EXPORT_DIR/best')


def _follow_pointer(path: str) -> str:
    step = files.read_text(path).strip()
    if not step.isdigit():
        raise UserError(f'--saved_model={path}: neither a SavedModel folder nor an export '
                        'pointer (a file naming a step)')
    export_dir = os.path.dirname(path.rstrip('/'))
    version = paths.join(export_dir, step)
    if not export.is_complete(version):
        raise UserError(f'--saved_model={path}: it names version {step}, but {version} is '
                        f'{"incomplete" if files.isdir(version) else "gone"}; {_holdings(export_dir)}')
    logging.info('--saved_model=%s: version %s, which that pointer names', path, step)
    return version


def _newest_version(export_dir: str) -> str:
    """A base path: its newest complete version, as TF Serving serves it without a config."""
    steps = export.complete_versions(export_dir)
    if not steps:
        raise UserError(f'--saved_model={export_dir}: no complete version there '
                        f'({_contents(export_dir)}); export one with --mode=export')
    why = f'the newest complete one of {len(steps)}, as TF Serving serves a base path'
    best = export.read_pointer(export_dir, 'best')
    if best is not None and best != steps[-1]:
        why += (f'; the best, {best}, is --saved_model={paths.join(export_dir, "best")} '
                '(TF Serving: EXPORT_DIR/models.config)')
    logging.info('--saved_model=%s: version %d, %s', export_dir, steps[-1], why)
    return paths.join(export_dir, str(steps[-1]))


def _holdings(export_dir: str) -> str:
    steps = export.complete_versions(export_dir)
    if steps:
        return f'{export_dir} has complete versions {", ".join(map(str, steps))}'
    return f'{export_dir} has no complete version ({_contents(export_dir)})'


def _contents(export_dir: str) -> str:
    """What a folder without a complete version holds, for an error message."""
    names = [name + (' (incomplete: no export_complete.json)' if name.isdigit() else '')
             for name in files.listdir(export_dir)]
    return 'it holds ' + ', '.join(names) if names else 'it is empty'


def input_files(arguments: List[str]) -> List[str]:
    """The files predict reads: each argument a file, a glob (quoted: a shell cannot expand
    gs:// or s3://) or a folder (the files in it and its subfolders, in name order, hidden
    ones such as .DS_Store left out)."""
    found = []
    for argument in arguments:
        if files.is_glob(argument) and not files.exists(argument):
            matched = files.glob(argument)  # (a file named photo[1].jpg is itself)
            if not matched:
                raise UserError(f'{argument}: no file matches it')
            found += matched
        elif files.isdir(argument):
            inside = [paths.join(argument, relative) for relative in file_trees.list_tree(argument)
                      if not any(part.startswith('.') for part in relative.split('/'))]
            if not inside:
                raise UserError(f'{argument}: a folder with no files in it')
            found += inside
        else:
            found.append(argument)
    return found


def predict_files(saved_model_dir: str, arguments: List[str],
                  signature: str = DEFAULT_SIGNATURE, **reading: Optional[str]) -> List[dict]:
    """predict_rows, all of them."""
    return list(predict_rows(saved_model_dir, arguments, signature, **reading))


def predict_rows(saved_model_dir: str, arguments: List[str],
                 signature: str = DEFAULT_SIGNATURE, **reading: Optional[str]) -> Iterator[dict]:
    """Runs a signature of the SavedModel (no Estimator) on image files (or folders or globs of
    them): one row per image, or per pair of images for a model that compares two photos, as
    each batch of SERVE_BATCH is served; table rows (reading: --decimal, --thousands,
    --encoding, --sheet, where a file is not read as detected) and REST bodies as their
    modules say."""
    saved_model_dir = resolve_saved_model(saved_model_dir)
    image_paths = input_files(arguments)
    if not image_paths:
        raise UserError('predict: give one or more image files (or CSV or JSON lines files, '
                        'for a table model; or TF Serving REST request bodies) after the flags')
    if all(rest_body.is_request_body(path) for path in image_paths):
        yield from predict_rest_bodies(saved_model_dir, image_paths, signature)
        return
    signatures = tf.saved_model.load(saved_model_dir).signatures
    if all(predict_table.is_table_file(path, signatures) for path in image_paths):
        yield from predict_table.predict_rows(signatures, saved_model_dir, image_paths, **reading)
        return
    if signature not in signatures:
        raise UserError(f'--signature={signature}: {saved_model_dir} has no such signature; it '
                        f'has {", ".join(sorted(signatures))}')
    serve = signatures[signature]
    inputs = serve.structured_input_signature[1]
    input_names = sorted(inputs)
    if input_names not in (['image_bytes_a', 'image_bytes_b'], ['image_bytes']) and not (
            input_names == ['inputs'] and inputs['inputs'].dtype == tf.string):  # Classify API
        takes = ', '.join(f'{name} ({spec.dtype.name} {spec.shape})'
                          for name, spec in sorted(inputs.items()))
        raise UserError(f'--signature={signature}: it takes {takes}, not image files; give one '
                        f'of {", ".join(_image_signatures(signatures))}')
    per_row = len(input_names)  # a pair model's rows are two photos
    if len(image_paths) % per_row:
        raise UserError('predict: this model compares two photos: give pairs of image files '
                        '(a1 b1 a2 b2 ...)')
    step = SERVE_BATCH * per_row
    for start in range(0, len(image_paths), step):
        chunk = image_paths[start:start + step]
        outputs = _serve(serve, chunk, **_feed(input_names, [_read_image(p) for p in chunk]))
        outputs = {key: value.numpy() for key, value in sorted(outputs.items())}
        for row in range(len(chunk) // per_row):
            row_paths = chunk[row * per_row:(row + 1) * per_row]
            named = ({'image_a': row_paths[0], 'image_b': row_paths[1]} if per_row == 2 else
                     {'image': row_paths[0]})
            yield {**named, **{key: files.json_value(value[row]) for key, value in outputs.items()}}


def _feed(input_names: List[str], encoded: List[bytes]) -> dict:
    """The signature's inputs for encoded images (pairs interleaved: a1 b1 a2 b2 ...)."""
    if input_names == ['image_bytes_a', 'image_bytes_b']:
        return dict(image_bytes_a=encoded[0::2], image_bytes_b=encoded[1::2])
    if input_names == ['image_bytes']:
        return dict(image_bytes=encoded)
    return dict(inputs=[image_example(data) for data in encoded])


def predict_rest_bodies(saved_model_dir: str, body_paths: List[str],
                        signature: str = DEFAULT_SIGNATURE) -> List[dict]:
    """Each TF Serving REST request body (a .json file) through the signature it names (else
    --signature): one row per instance or example."""
    loaded = tf.saved_model.load(saved_model_dir)
    methods = {name: definition.method_name
               for name, definition in export.signature_defs(saved_model_dir).items()}
    found = []
    for path in body_paths:
        body = rest_body.read_body(path)
        name = body.get('signature_name', signature)
        if name not in loaded.signatures:
            raise UserError(f'{path}: signature_name {name}: {saved_model_dir} has no such '
                            f'signature; it has {", ".join(sorted(loaded.signatures))}')
        where = f'{path} (signature {name})'
        try:
            outputs = loaded.signatures[name](**rest_body.signature_inputs(
                body, loaded.signatures[name], methods[name], where))
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as e:
            summary = op_error_summary(e) if isinstance(e, tf.errors.OpError) else str(e)
            raise UserError(f'{where}: the model refused it ({summary.splitlines()[0]})') from None
        found += [{'request': path, **{key: files.json_value(value) for key, value in row.items()}}
                  for row in rest_body.rows({k: v.numpy() for k, v in outputs.items()})]
    return found


def _read_image(path: str) -> bytes:
    try:
        data = converted_images.decodable(files.read_bytes(path))  # WebP, TIFF, HEIC, AVIF: as PNG
        tf.io.decode_image(data, expand_animations=False)
    except tf.errors.NotFoundError:
        raise UserError(f'{path}: no such file')
    except (tf.errors.PermissionDeniedError, tf.errors.FailedPreconditionError) as e:
        raise UserError(f'{path}: cannot read it ({e.message})')
    except tf.errors.InvalidArgumentError:
        raise UserError(f'{path}: not a {converted_images.FORMATS} image')
    return data


def _image_signatures(signatures) -> List[str]:
    """The signatures predict can feed image files to."""
    return sorted(name for name, function in signatures.items()
                  if set(function.structured_input_signature[1]) in (
                      {'image_bytes'}, {'image_bytes_a', 'image_bytes_b'}, {'inputs'})
                  and all(spec.dtype == tf.string
                          for spec in function.structured_input_signature[1].values()))


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
