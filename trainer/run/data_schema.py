"""The data schema of a model built from its data (models.registry.ModelSpec.schema_kind).

Training reads it from the manifest.json beside --train_files, and the chief records it in
MODEL_DIR/schema.json; evaluation and export build the model from that record, so an exported
model is the trained one even when the data has been prepared again since. Before the first
training run has recorded it, an eval job reads --eval_files' manifest.
"""
import collections
import dataclasses
from typing import Tuple

from common.errors import UserError
from input_fns.records import file_patterns
from input_fns.tables import label_classes
from models.tables import table_columns
from trainer.config import modes
from trainer.config.settings import model_fn_params
from trainer.model_dir import run_files


def _from_manifest(settings, flag_name: str) -> Tuple[dict, str]:
    pattern = getattr(settings, flag_name)
    if not pattern:
        raise UserError(f'--model={settings.model} is built from its data\'s schema: give '
                        f'--{flag_name}')
    return (file_patterns.read_schema(pattern, f'--{flag_name}'),
            f'the manifest of --{flag_name}={pattern}')


def estimator_params(settings, spec) -> dict:
    """The params an Estimator's model_fn gets: model_fn_params, and a model built from its data
    gets its schema too (not a scalar hyperparameter, so not among model_fn_params)."""
    params = model_fn_params(settings, spec)
    if spec.schema is not None:
        params['schema'] = spec.schema
    return params


def with_schema(settings, spec):
    """spec with its `schema` filled in, for a model that has a schema_kind; spec unchanged else."""
    if not spec.schema_kind:
        return spec
    if not modes.MODES[settings.mode].reads_trained_model:
        schema, source = _from_manifest(settings, 'train_files')
    else:
        recorded = settings.model_dir and run_files.recorded_schema(settings.model_dir)
        if recorded:
            schema, source = recorded, f'{settings.model_dir}/{run_files.SCHEMA_FILE}'
        elif settings.eval_files:
            schema, source = _from_manifest(settings, 'eval_files')
        else:
            raise UserError(f'--model_dir={settings.model_dir} has no {run_files.SCHEMA_FILE} '
                            f'(the data schema {spec.name} was trained on); train it first, or '
                            'give --eval_files to build the model from their manifest')
    if schema['kind'] != spec.schema_kind:
        prepared_by = file_patterns.PREPARED_BY.get(spec.schema_kind, spec.schema_kind)
        raise UserError(f'--model={spec.name} takes data prepared by {prepared_by}; {source} '
                        f'holds {schema["kind"]!r} data')
    _check_eval_data(settings, schema, source)
    return dataclasses.replace(spec, schema=schema)


def _check_eval_data(settings, schema, source) -> None:
    """Data prepared apart from the training data has a schema of its own: photos number their
    classes by their own folders and may be fitted to another size (evaluating them would
    mislabel them silently), and a table's label may hold a class the model has no output for
    (evaluation would stop at its first batch with a bare assertion)."""
    if (schema['kind'] not in ('images', 'table') or not settings.eval_files
            or 'eval_files' not in modes.MODES[settings.mode].data_flags):
        return
    manifests = {}  # by path: globs of two splits of one folder share it
    for pattern in file_patterns.split_patterns(settings.eval_files):
        path = file_patterns.manifest_path(pattern)
        try:
            manifests[path] = (manifests.get(path)
                               or file_patterns.read_prepared_manifest(pattern, '--eval_files'))
        except UserError:
            continue  # no manifest beside them: the reader's checks say what is wrong
        _check_eval_manifest(schema, manifests[path], pattern, source)


def _check_eval_manifest(schema, manifest, pattern, source) -> None:
    theirs, where = manifest['schema'], f'--eval_files={pattern}'
    if schema['kind'] == 'table':
        _check_eval_classes(schema, manifest, pattern, source)
        return
    for key, what in (('classes', 'classes'), ('image_shape', 'image shape')):
        if theirs.get(key) != schema[key]:
            raise UserError(f'{where}: {what} {theirs.get(key)} in their manifest, {schema[key]} '
                            f'in the model\'s ({source}); prepare them with `prepare images '
                            '--schema_from=TRAINING_DATA_FOLDER --split=test`')


def _check_eval_classes(schema, manifest, pattern, source) -> None:
    """The classes of the splits an --eval_files glob reads (their manifest entries' counts;
    older manifests have only the schema's) must be among the model's."""
    theirs, where = manifest['schema'], f'--eval_files={pattern}'
    label = theirs.get('label') or {}
    if (schema.get('label') or {}).get('task') != 'classification' or 'classes' not in label:
        return
    counts = collections.Counter()
    for entry in file_patterns.matched_splits(pattern, manifest):
        counts.update(entry.get('class_counts') or {})
    if not counts:
        counts.update(dict(zip(table_columns.class_names(theirs), label.get('class_counts') or [])))
    known = table_columns.class_names(schema)
    unknown = {name: count for name, count in counts.items() if name not in known}
    if unknown:
        predicts = known if len(known) <= 10 else f'{len(known)} classes'
        raise UserError(f'{where}: label {label.get("column", label["name"])!r} holds classes the '
                        f'model was not trained on: {label_classes.with_rows(unknown)}; it '
                        f'predicts {predicts} ({source}); leave those rows out, or train on data '
                        'that has them')
