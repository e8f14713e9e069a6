"""--backbone_weights: a Keras .h5 weights file (save_weights' format, as Keras' own
applications ship theirs) checked against the backbone and loaded into it once, when training
starts a model_dir afresh.

The one file models/ reads. Keras' load_weights cannot serve: under an Estimator the backbone's
variables live in a graph whose session Keras never sees. So the file's arrays are matched to the
backbone's layers in order, as load_weights does, and assigned by the Scaffold's init_fn, which
runs only when no checkpoint is restored: a resumed run keeps its own trained values.
"""
from typing import Dict, List

import h5py
import numpy as np
import tensorflow as tf
from absl import logging

from common import files
from common.errors import UserError
from models import backbones

IMAGENET = 'imagenet'


def weights_path(params: Dict) -> str:
    """The file --backbone_weights names; for 'imagenet', Keras' own file, fetched once into
    ~/.keras/models (the machine must reach storage.googleapis.com)."""
    given = params['backbone_weights']
    if given != IMAGENET:
        return given
    url = backbones.checked(params).imagenet_url(params['backbone_image_size'],
                                                 params['backbone_alpha'])
    try:
        return tf.keras.utils.get_file(url.rsplit('/', 1)[-1], url, cache_subdir='models')
    except Exception as error:  # urllib's and Keras' own errors alike: the fetch failed
        raise UserError(f'--backbone_weights=imagenet: could not fetch {url} ({error}); '
                        f'download it where you can and give --backbone_weights=FILE') from None


def file_layers(path: str, read=np.asarray) -> List[tuple]:
    """[(layer name, [read(dataset)])] of the layers with weights in a Keras .h5 weights file:
    their arrays, or with read=shape only what the header says."""
    if not files.exists(path):
        raise UserError(f'--backbone_weights={path}: no such file')
    try:
        with files.open_file(path) as stream, h5py.File(stream, 'r') as f:
            group = f['model_weights'] if 'layer_names' not in f.attrs and 'model_weights' in f else f
            layers = []
            for name in _names(group, 'layer_names'):
                weights = [read(group[name][weight]) for weight in _names(group[name], 'weight_names')]
                if weights:
                    layers.append((name, weights))
            return layers
    except (OSError, KeyError) as error:
        raise UserError(f'--backbone_weights={path}: not a Keras .h5 weights file ({error}); '
                        f'a model\'s save_weights(\'NAME.h5\') writes one') from None


def shape(dataset) -> tuple:
    return tuple(dataset.shape)


def _names(group, attribute: str) -> List[str]:
    """An attribute list as Keras writes it: whole, or in chunks ATTRIBUTE0, ATTRIBUTE1...
    where it would pass HDF5's 64 KB header limit."""
    if attribute in group.attrs:
        chunks = [group.attrs[attribute]]
    else:
        chunks, index = [], 0
        while f'{attribute}{index}' in group.attrs:
            chunks.append(group.attrs[f'{attribute}{index}'])
            index += 1
        if not chunks:
            raise KeyError(f'no {attribute} attribute')
    return [name.decode('utf8') if isinstance(name, bytes) else str(name)
            for chunk in chunks for name in chunk]


def check(network: tf.keras.Model, params: Dict, path: str) -> None:
    """Whether the file's weights fit the backbone's, layer by layer in order (as Keras'
    load_weights matches them); a file of another architecture or size is one line that names
    what the backbone expected."""
    expected = [layer for layer in network.layers if layer.weights]
    found, described = file_layers(path, shape), backbones.described(params)
    if len(found) != len(expected):
        raise UserError(f'--backbone_weights={path}: holds the weights of {len(found)} layers; '
                        f'{described} without its top has {len(expected)}: give that '
                        f'backbone\'s weights (include_top=False)')
    for layer, (name, found_shapes) in zip(expected, found):
        shapes = [tuple(variable.shape) for variable in _variables(layer)]
        if found_shapes != shapes:
            raise UserError(f'--backbone_weights={path}: layer {name} holds shapes '
                            f'{_shapes(found_shapes)}; {described} expects '
                            f'{_shapes(shapes)} for its layer {layer.name}')


def _variables(layer) -> List:
    return layer.trainable_weights + layer.non_trainable_weights  # save_weights' order


def _shapes(shapes) -> str:
    return ', '.join('x'.join(map(str, shape)) or 'scalar' for shape in shapes)


def scaffold(network: tf.keras.Model, params: Dict) -> tf.compat.v1.train.Scaffold:
    """A Scaffold whose init_fn loads the weights file into the backbone. The file is checked
    now when it is there (its header: a misfit is told before training starts) and read only
    then, so a resumed run needs it no more (placeholders fed: its arrays stay out of the graph)."""
    path = weights_path(params)
    if files.exists(path):
        check(network, params, path)
    variables = [variable for layer in network.layers if layer.weights
                 for variable in _variables(layer)]
    placeholders = [tf.compat.v1.placeholder(variable.dtype.base_dtype, variable.shape)
                    for variable in variables]
    load = tf.group([variable.assign(placeholder) for variable, placeholder
                     in zip(variables, placeholders)], name='load_backbone_weights')

    def init_fn(unused_scaffold, session):
        check(network, params, path)
        arrays = [array for _, weights in file_layers(path) for array in weights]
        session.run(load, feed_dict=dict(zip(placeholders, arrays)))
        logging.info('Loaded the %d weights of %s from %s', len(arrays),
                     backbones.described(params), path)

    return tf.compat.v1.train.Scaffold(init_fn=init_fn)
