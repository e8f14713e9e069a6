"""The data schema of a model built from its data (models.registry.ModelSpec.schema_kind).

Training reads it from the manifest.json beside --train_files, and the chief records it in
MODEL_DIR/schema.json; evaluation and export build the model from that record, so an exported
model is the trained one even when the data has been prepared again since. Before the first
training run has recorded it, an eval job reads --eval_files' manifest.
"""
import dataclasses
from typing import Tuple

from common.errors import UserError
from input_fns import file_patterns
from trainer.config import modes
from trainer.config.settings import model_fn_params
from trainer.model_dir import run_files

# What prepares data of each schema kind, for messages.
PREPARED_BY = {'table': '`prepare csv` or `prepare examples`', 'images': '`prepare images`'}


def _from_manifest(settings, flag_name: str) -> Tuple[dict, str]:
    pattern = getattr(settings, flag_name)
    if not pattern:
        raise UserError(f'--model={settings.model} is built from its data\'s schema: give '
                        f'--{flag_name}')
    return file_patterns.read_schema(pattern, f'--{flag_name}'), f'the manifest of --{flag_name}={pattern}'


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
        raise UserError(f'--model={spec.name} takes data prepared by '
                        f'{PREPARED_BY.get(spec.schema_kind, spec.schema_kind)}; {source} '
                        f'holds {schema["kind"]!r} data')
    return dataclasses.replace(spec, schema=schema)
