"""`./run.sh digit_photos --output_dir=ROOT`: a folder of labelled photos to try `prepare images` on,
offline: scikit-learn's 1,797 bundled digit scans written as PNG files, one sub-folder per class
named after the digit (ROOT/seven/0017.png), each at its own size (20 to 56 pixels a side, most
not square), as photos of one's own come.
"""
import os

import numpy as np
import tensorflow as tf
from absl import flags

from common import cli
from input_fns.images import digit_sources

NAMES = ('zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine')


def define_flags():
    flags.DEFINE_string('output_dir', None, 'The folder to write ROOT/<digit name>/NNNN.png into.')
    flags.DEFINE_integer('seed', 0, 'Seed for the photos\' sizes.')
    flags.mark_flag_as_required('output_dir')


def write_digit_photos(output_dir: str, seed: int = 0) -> int:
    """Writes the digits as PNG class folders; returns how many."""
    images, labels, _ = digit_sources.load_sklearn_digits()
    sizes = np.random.RandomState(seed).randint(20, 57, size=(len(labels), 2))
    for number, (image, label, size) in enumerate(zip(images, labels, sizes)):
        folder = os.path.join(output_dir, NAMES[label])
        os.makedirs(folder, exist_ok=True)
        photo = tf.image.resize(image[..., None].astype(np.float32), size, antialias=True)
        png = tf.io.encode_png(tf.cast(tf.round(tf.clip_by_value(photo, 0, 255)), tf.uint8))
        with open(os.path.join(folder, f'{number:04d}.png'), 'wb') as f:
            f.write(png.numpy())
    return len(labels)


def main(argv):
    count = write_digit_photos(flags.FLAGS.output_dir, flags.FLAGS.seed)
    print(f'wrote {count} digit photos into {len(NAMES)} class folders under '
          f'{flags.FLAGS.output_dir}')
    return 0


if __name__ == '__main__':
    define_flags()
    cli.run(main, own_modules=[])  # bad flags: one line, exit 2
