"""Every recipe in recipes/ runs as docs/recipes.md gives it, for two steps on small data."""
import glob
import os
import re

import pytest
import tensorflow as tf

from helpers import REPO, run_module, run_prepare
from input_fns.faces import prepare_faces, synthetic_faces

RECIPES = sorted(os.path.basename(path) for path in glob.glob(os.path.join(REPO, 'recipes', '*.flags')))


@pytest.fixture(scope='module')
def face_train_pattern(tmp_path_factory):
    root = tmp_path_factory.mktemp('recipe_faces') / 'lfw'
    synthetic_faces.write_faces(str(root), num_people=12, min_photos=2, size=48, seed=5)
    out = str(tmp_path_factory.mktemp('recipe_face_shards'))
    run_prepare(prepare_faces.prepare_faces, source_dir=str(root.parent), output_dir=out,
                validation_fraction=0.25, num_pairs=4)
    return os.path.join(out, 'train-*')


def test_there_are_recipes():
    assert {'mnist_cnn.flags', 'face_embedding.flags'} <= set(RECIPES)


@pytest.mark.parametrize('recipe', RECIPES)
def test_recipe_sets_each_flag_once_one_to_a_line(recipe):
    """absl reads a flagfile line as one flag: a second flag on the line becomes part of the
    first's value, and a later line setting the same flag silently overrides an earlier one."""
    with open(os.path.join(REPO, 'recipes', recipe)) as flagfile:
        lines = [line.strip() for line in flagfile if line.strip() and not line.startswith('#')]
    assert all(re.fullmatch(r'--\w+(=\S+)?', line) for line in lines), lines
    names = [line[2:].split('=')[0] for line in lines]
    assert len(names) == len(set(names)), names


@pytest.mark.parametrize('recipe', RECIPES)
def test_recipe_trains_with_the_flags_it_names(recipe, digit_shards, face_train_pattern, tmp_path):
    train_files = {'mnist_cnn.flags': digit_shards.train_pattern,
                   'face_embedding.flags': face_train_pattern}[recipe]  # a new recipe needs data here
    model_dir = str(tmp_path / 'model')
    result = run_module('trainer.main', f'--flagfile=recipes/{recipe}', f'--train_files={train_files}',
                        f'--model_dir={model_dir}', '--train_steps=2', '--batch_size=8')
    assert '(--precision=auto)' in result.stderr  # fast on any CPU: bfloat16 only where it is built in
    assert tf.train.load_variable(tf.train.latest_checkpoint(model_dir), 'global_step') == 2
