"""Getting the bench's data: MNIST (real, or synthetic of its shape) and a folder of face
photos in LFW's layout (real LFW people, linked, or rendered synthetic ones), and copies of
its people under new names for the memory rows."""
import os

import numpy as np
from absl import flags

from input_fns.faces import lfw_files, synthetic_faces
from input_fns.images import digit_sources

FLAGS = flags.FLAGS


def load_mnist():
    folder = os.path.join(FLAGS.data_dir, 'mnist')
    if os.path.isdir(folder):
        images, labels, _ = digit_sources.load_mnist(folder)['train']
        source = f'real: {folder}'
    else:
        rng = np.random.RandomState(0)
        images = rng.randint(0, 256, (FLAGS.mnist_examples, 28, 28)).astype(np.uint8)
        labels = rng.randint(0, 10, FLAGS.mnist_examples).astype(np.uint8)
        source = f'synthetic ({folder} not found): random 28x28 uint8 images'
    images, labels = images[:FLAGS.mnist_examples], labels[:FLAGS.mnist_examples]
    return images, labels, f'{source}, {len(labels):,} images'


def face_photo_root(work_dir):
    """A folder of --face_people people in LFW's layout: real LFW people (linked), or synthetic."""
    lfw = os.path.join(FLAGS.data_dir, 'lfw-devtrain', 'lfw')
    root = os.path.join(work_dir, 'faces')
    os.makedirs(root)
    if os.path.isdir(lfw):
        names = sorted(lfw_files.scan_people(lfw))
        step = max(1, len(names) // FLAGS.face_people)
        for name in names[::step][:FLAGS.face_people]:  # spread over the alphabet
            os.symlink(os.path.abspath(os.path.join(lfw, name)), os.path.join(root, name))
        source = f'real: {lfw}'
    else:
        synthetic_faces.write_faces(root, FLAGS.face_people, size=250, seed=0)
        source = f'synthetic ({lfw} not found): rendered 250x250 JPEG faces'
    photos = sum(len(p) for p in lfw_files.scan_people(root).values())
    return root, f'{source}, {len(os.listdir(root))} people, {photos} photos'


def copies_of_people(root, scale, work_dir):
    """A folder of `scale` copies of root's people, each copy under new names (links to the
    same photos): `scale` times the people for the memory rows."""
    copied = os.path.join(work_dir, f'faces_{scale}x')
    for name, photos in lfw_files.scan_people(root).items():
        for copy in range(scale):
            person = f'{name}_c{copy}'
            os.makedirs(os.path.join(copied, person))
            for photo in photos:
                number = photo.rsplit('_', 1)[1]
                os.symlink(os.path.realpath(os.path.join(root, name, photo)),
                           os.path.join(copied, person, f'{person}_{number}'))
    return copied


def total_bytes(files):
    return sum(os.path.getsize(f) for f in files)
