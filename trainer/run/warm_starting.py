"""--warm_start_from and --warm_start_vars: a new model_dir's first weights taken from another
model's checkpoint, a model_dir's latest or an export's, never over the model_dir's own.

A model_dir with a checkpoint of its own resumes from it (a restarted or preempted job, or
training on to more steps) and the source is not read at all. Otherwise training starts
from the source's values of the model's variables whose names --warm_start_vars matches
(as re.match, the way tf.estimator.WarmStartSettings reads it): the weights and batch-norm
statistics (models.training.mark_model_variables), never the global step or the
optimizer's slots, so the new run counts its own steps from 0. WarmStartSettings' own regex
reaches the trainable variables alone (batch-norm statistics would start afresh) and its
list form every global variable (the source's global step too): so the variables are chosen
here, once the graph is built, and handed to tf.compat.v1.train.warm_start, the function
WarmStartSettings feeds. A source without one of them leaves it at its initial value (a
new head), and so does one it holds in another shape (a head for other classes), each named
in the log; a source that holds none of them in the model's shapes is a one-line error
before anything in model_dir changes (Experiment.check_checkpoint_fits builds the graph).
"""
import dataclasses
import os
import re
from typing import List, Optional, Tuple

import tensorflow as tf
from absl import logging

from common import files, paths
from common.errors import UserError
from trainer.model_dir import checkpoints
from trainer.serving import export

TRAINING_MODES = ('train', 'train_and_evaluate')
# How many variable names a message lists.
NAMES_SHOWN = 5


@dataclasses.dataclass(frozen=True)
class WarmStart:
    source: str  # --warm_start_from, as given
    checkpoint: str  # the checkpoint it names
    variables: str  # --warm_start_vars

    def flag(self) -> str:
        return f'--warm_start_from={self.source}'


def plan(settings) -> Optional[WarmStart]:
    """The warm start a training run makes: None in other modes, without --warm_start_from, or
    when --model_dir has a checkpoint of its own."""
    if not settings.warm_start_from or settings.mode not in TRAINING_MODES:
        return None
    if settings.model_dir and checkpoints.has_checkpoints(settings.model_dir):
        logging.info('--warm_start_from=%s not used: %s resumes from its own checkpoints',
                     settings.warm_start_from, settings.model_dir)
        return None
    if settings.model_param_overrides.get('backbone_weights'):  # loaded after, over it
        raise UserError(f'--warm_start_from={settings.warm_start_from} and --backbone_weights: '
                        f'give one; the warm start carries the backbone it was trained with')
    try:
        re.compile(settings.warm_start_vars)
    except re.error as e:
        raise UserError(f'--warm_start_vars={settings.warm_start_vars}: not a regular '
                        f'expression ({e})') from None
    return WarmStart(settings.warm_start_from, source_checkpoint(settings.warm_start_from),
                     settings.warm_start_vars)


def source_checkpoint(source: str) -> str:
    """The checkpoint --warm_start_from names: a checkpoint path (model.ckpt-N), a model_dir
    (its latest), a SavedModel folder (its variables) or an export pointer (EXPORT_DIR/best)."""
    if checkpoints.exists(source):
        return source
    if files.exists(source) and not files.isdir(source):
        step = export.read_pointer(os.path.dirname(source.rstrip('/')), os.path.basename(source))
        if step is None:
            raise UserError(f'--warm_start_from={source}: a file that is not an export pointer '
                            '(EXPORT_DIR/best); give a model_dir, a checkpoint or an export')
        source = paths.join(os.path.dirname(source.rstrip('/')), str(step))
    if not files.isdir(source):
        raise UserError(f'--warm_start_from={source}: no such checkpoint, model_dir or '
                        'SavedModel; give a trained model_dir, a checkpoint path '
                        '(MODEL_DIR/model.ckpt-N) or an export (EXPORT_DIR/STEP)')
    latest = tf.train.latest_checkpoint(source)
    if latest:
        return latest
    variables = paths.join(source, 'variables', 'variables')
    if files.exists(paths.join(source, export.SAVED_MODEL_PB)) and checkpoints.exists(variables):
        return variables
    raise UserError(f'--warm_start_from={source}: holds no checkpoint and no SavedModel; give '
                    'a trained model_dir, a checkpoint path (MODEL_DIR/model.ckpt-N) or an '
                    'export (EXPORT_DIR/STEP)')


def with_warm_start(model_fn, warm_start: Optional[WarmStart]):
    """model_fn that, in training, initializes the chosen variables from the warm start's
    checkpoint (an initializer: a restored checkpoint still wins)."""
    if warm_start is None:
        return model_fn

    said = []  # the graph is built aside first (Experiment.check_checkpoint_fits): one line

    def model_fn_warm_starting(features, labels, mode, params, config):  # the names Estimator reads
        spec = model_fn(features, labels, mode, params, config)
        if mode == tf.estimator.ModeKeys.TRAIN:
            chosen, afresh = chosen_variables(warm_start)
            if not said:
                logging.info('%s: %d variables from %s; %d start afresh%s', warm_start.flag(),
                             len(chosen), warm_start.checkpoint, len(afresh),
                             f': {_shown(afresh)}' if afresh else '')
                said.append(True)
            tf.compat.v1.train.warm_start(warm_start.checkpoint, vars_to_warm_start=chosen)
        return spec

    return model_fn_warm_starting


def _name(variable) -> str:
    return variable.name.split(':')[0]


def _shown(names) -> str:
    names = sorted(names)
    more = f' (and {len(names) - NAMES_SHOWN} more)' if len(names) > NAMES_SHOWN else ''
    return ', '.join(names[:NAMES_SHOWN]) + more


def chosen_variables(warm_start: WarmStart) -> Tuple[List, List[str]]:
    """The model's variables (in the graph being built) that --warm_start_vars matches and the
    source holds in their shape, and the names of the others, which start afresh (with the
    source's shape where it differs); a UserError when it holds none of them so."""
    model = (tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.MODEL_VARIABLES)
             or tf.compat.v1.trainable_variables())  # a model_fn with an optimizer of its own
    pattern = re.compile(warm_start.variables)
    named = [variable for variable in model if pattern.match(_name(variable))]
    vars_flag = f'--warm_start_vars={warm_start.variables}'
    if not named:
        raise UserError(f'{vars_flag} matches none of the model\'s variables '
                        f'({_shown(map(_name, model))}); widen it')
    try:
        saved = tf.train.load_checkpoint(warm_start.checkpoint).get_variable_to_shape_map()
    except (tf.errors.OpError, ValueError) as e:
        raise UserError(f'{warm_start.flag()}: {warm_start.checkpoint} cannot be read '
                        f'({type(e).__name__}); give another checkpoint') from None
    found = [variable for variable in named if _name(variable) in saved]
    if not found:
        raise UserError(f'{warm_start.flag()} holds none of the variables {vars_flag} matches '
                        f'({_shown(map(_name, named))}); it holds {_shown(saved)}: another '
                        'model\'s checkpoint, or a wider --warm_start_vars')
    # Another shape there: a head for another number of classes, which starts afresh.
    reshaped = {_name(variable): f'{_name(variable)} ({saved[_name(variable)]} there)'
                for variable in found if saved[_name(variable)] != variable.shape.as_list()}
    carried = [variable for variable in found if _name(variable) not in reshaped]
    if not carried:
        raise UserError(f'{warm_start.flag()} holds the variables {vars_flag} matches in other '
                        f'shapes only ({_shown(reshaped.values())}): another model\'s checkpoint; '
                        'give the one this model was trained from')
    carried_names = {_name(variable) for variable in carried}
    return carried, [reshaped.get(_name(variable), _name(variable)) for variable in model
                     if _name(variable) not in carried_names]
