"""Renders synthetic identities as JPEGs in LFW's folder layout: ROOT/<Name>/<Name>_0001.jpg.

Each identity is a distinct parametric face (head shape, skin and hair tone, eye,
brow, nose and mouth geometry); each photo of it varies pose, lighting and noise.
The faces sit in the centre of the frame, as in LFW, so the real folder loader,
cropping and pair sampling run on them unchanged. Used by the tests and by
`./run.sh faces` when no --lfw_dir is given.

  python -m input_fns.faces.synthetic_faces --output_dir=DIR [--num_people=60]
"""
from typing import Dict, List

import numpy as np
import tensorflow as tf
from absl import app, flags

from common import atomic_writes, paths


def _identity(rng: np.random.RandomState) -> Dict[str, float]:
    return {
        'head_w': rng.uniform(0.26, 0.36), 'head_h': rng.uniform(0.34, 0.44),
        'skin': rng.uniform(90, 230), 'hair': rng.uniform(10, 200),
        'hair_top': rng.uniform(0.0, 0.12), 'eye_dx': rng.uniform(0.09, 0.15),
        'eye_y': rng.uniform(-0.08, 0.0), 'eye_r': rng.uniform(0.025, 0.05),
        'brow_tilt': rng.uniform(-0.04, 0.04), 'nose_len': rng.uniform(0.06, 0.14),
        'mouth_w': rng.uniform(0.06, 0.14), 'mouth_y': rng.uniform(0.15, 0.22),
        'mouth_curve': rng.uniform(-0.04, 0.04), 'background': rng.uniform(40, 220),
    }


def render_face(person: Dict[str, float], rng: np.random.RandomState, size: int) -> np.ndarray:
    """One photo of `person`: uint8 [size, size, 3]."""
    coords = (np.arange(size) + 0.5) / size - 0.5
    y, x = np.meshgrid(coords, coords, indexing='ij')
    angle = rng.uniform(-0.15, 0.15)  # pose: small rotation and shift
    shift_x, shift_y = rng.uniform(-0.03, 0.03, size=2)
    cos, sin = np.cos(angle), np.sin(angle)
    u = cos * (x - shift_x) + sin * (y - shift_y)
    v = -sin * (x - shift_x) + cos * (y - shift_y)

    image = np.full((size, size), person['background'], np.float32)
    head = (u / person['head_w']) ** 2 + (v / person['head_h']) ** 2 < 1
    hair = head & (v < -person['head_h'] * (0.55 - person['hair_top']))
    image[head] = person['skin']
    image[hair] = person['hair']
    for side in (-1, 1):
        eye = (u - side * person['eye_dx']) ** 2 + (v - person['eye_y']) ** 2 < person['eye_r'] ** 2
        image[eye] = 20
        brow_v = person['eye_y'] - 2 * person['eye_r'] + side * person['brow_tilt'] * (
            u - side * person['eye_dx']) / 0.1
        brow = (np.abs(u - side * person['eye_dx']) < 1.6 * person['eye_r']) & (
            np.abs(v - brow_v) < 0.012)
        image[brow] = person['hair'] * 0.6
    nose = (np.abs(u) < 0.015) & (v > person['eye_y']) & (v < person['eye_y'] + person['nose_len'])
    image[nose] = person['skin'] * 0.7
    mouth_v = person['mouth_y'] + person['mouth_curve'] * (1 - (u / person['mouth_w']) ** 2)
    mouth = (np.abs(u) < person['mouth_w']) & (np.abs(v - mouth_v) < 0.012)
    image[mouth] = 60

    light = 1 + rng.uniform(-0.35, 0.35) * u / 0.5 + rng.uniform(-0.2, 0.2) * v / 0.5
    image = image * light * rng.uniform(0.75, 1.2) + rng.normal(0, 8, image.shape)
    tint = np.array([1.0, 0.9, 0.8]) * rng.uniform(0.9, 1.1, size=3)
    return np.clip(image[..., None] * tint, 0, 255).astype(np.uint8)


def write_faces(output_dir: str, num_people: int = 60, min_photos: int = 1, max_photos: int = 6,
                size: int = 120, seed: int = 0) -> Dict[str, List[str]]:
    """Writes the folder tree; returns {name: [file paths]}. About a third of people get one photo."""
    rng = np.random.RandomState(seed)
    written = {}
    for index in range(num_people):
        name = f'Synthetic_Person_{index:04d}'
        person = _identity(rng)
        count = 1 if rng.rand() < 0.33 else rng.randint(max(2, min_photos), max_photos + 1)
        count = max(count, min_photos)
        written[name] = []
        for photo in range(1, count + 1):  # write_bytes_atomic makes the folders
            path = paths.join(output_dir, name, f'{name}_{photo:04d}.jpg')
            jpeg = tf.io.encode_jpeg(render_face(person, rng, size), quality=90).numpy()
            atomic_writes.write_bytes_atomic(path, jpeg)
            written[name].append(path)
    return written


def main(argv):
    del argv
    FLAGS = flags.FLAGS
    written = write_faces(FLAGS.output_dir, FLAGS.num_people, size=FLAGS.size, seed=FLAGS.seed)
    print(f'wrote {sum(map(len, written.values()))} photos of {len(written)} people '
          f'to {FLAGS.output_dir}')


if __name__ == '__main__':
    flags.DEFINE_string('output_dir', None, 'Root of the LFW-style folder tree to write.')
    flags.DEFINE_integer('num_people', 60, 'Identities to render.', lower_bound=2)
    flags.DEFINE_integer('size', 120, 'Photo width and height in pixels.', lower_bound=32)
    flags.DEFINE_integer('seed', 0, 'Seed: the same seed renders the same people and photos.')
    flags.mark_flag_as_required('output_dir')
    app.run(main)
