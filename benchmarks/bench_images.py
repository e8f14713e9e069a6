"""The bench's image-folder rows (sections 10 and 11 of `./run.sh bench`); alone:
`python -m benchmarks.image_bench [--quick]` (benchmarks/image_bench.py).

On a generated class-folder tree (--image_photos JPEG photos in 5 classes, 80 to 240 pixels a
side, noise with a class colour):
  10. `prepare images` on all cores (photos/s, writing included) and an epoch of training
      input (examples/s) over its shards, for each --stored_as (and their bytes per photo),
      against tf.keras.utils.image_dataset_from_directory reading and decoding the same tree,
      all in the same rounds, so each is a ratio of turns side by side; all fitting to
      --image_bench_size (stretched, as Keras does) and batching --batch_size;
  11. image_classifier training (Estimator, float32) fed by that input_fn against the same
      batch held in memory: whether training from shards is input-bound.
"""
import glob
import os
import time

import numpy as np
import tensorflow as tf
from absl import flags

from benchmarks import bench_data, precision_bench
from input_fns.images import image_records, prepare_images
from input_fns.records import file_patterns

FLAGS = flags.FLAGS
CLASSES = ('apple', 'banana', 'cherry', 'date', 'elder')


def define_flags():
    flags.DEFINE_integer('image_photos', 2000, 'Image rows: JPEG photos in the generated tree.',
                         lower_bound=10)
    flags.DEFINE_integer('image_bench_size', 32, 'Image rows: the side the photos are fitted to.',
                         lower_bound=8)
    flags.DEFINE_integer('image_train_steps', 10, 'Training steps per timed repeat of an '
                         'image_classifier row.', lower_bound=1)


def write_photo_tree(root: str, count: int, seed: int = 0, sides=(80, 240)) -> None:
    """count JPEG photos, in CLASSES' folders in turn: noise, with the class's own colour cast,
    each side between sides' two lengths."""
    rng = np.random.RandomState(seed)
    colours = rng.randint(0, 256, (len(CLASSES), 3))
    for number in range(count):
        label = number % len(CLASSES)
        height, width = rng.randint(sides[0], sides[1] + 1, size=2)
        pixels = rng.randint(0, 120, (height, width, 3)) + colours[label] // 2
        folder = os.path.join(root, CLASSES[label])
        os.makedirs(folder, exist_ok=True)
        jpeg = tf.io.encode_jpeg(np.clip(pixels, 0, 255).astype(np.uint8), quality=90)
        with open(os.path.join(folder, f'{number:05d}.jpg'), 'wb') as f:
            f.write(jpeg.numpy())


def keras_directory_dataset(root: str, size: int, batch_size: int):
    """image_dataset_from_directory as a Keras user feeds it: decoded and resized every epoch
    (in parallel: it maps with AUTOTUNE), repeated and prefetched like the service's input_fn."""
    dataset = tf.keras.utils.image_dataset_from_directory(
        root, image_size=(size, size), batch_size=batch_size, shuffle=True, seed=0)
    return dataset.map(lambda images, labels: (images / 255.0, labels)).repeat().prefetch(
        tf.data.AUTOTUNE)


def prepare_turn(root: str, output_dir: str, stored_as: str):
    """A turn that prepares the tree on all cores (writing included) and returns photos/s."""
    size = FLAGS.image_bench_size

    def turn():
        started = time.perf_counter()
        prepare_images.prepare_images(
            source_dir=root, output_dir=output_dir, image_size=f'{size}x{size}', channels='3',
            resize='stretch', validation_fraction=0.0, skip_bad_images=False, decode_workers=0,
            num_shards=10, num_eval_shards=1, seed=0, stored_as=stored_as)
        return FLAGS.image_photos / (time.perf_counter() - started)

    return turn


def image_rows(work_dir: str, results, measure, dataset_turn, training_turn) -> str:
    """Sections 10 and 11 into results (bench_report's Results, bench_sections' measure and
    dataset_turn, and a training_turn(spec, input_fn, batch_size)); returns what the data was."""
    root = os.path.join(work_dir, 'photos')
    write_photo_tree(root, FLAGS.image_photos)
    size, batch_size = FLAGS.image_bench_size, FLAGS.batch_size
    section, shape = '10 image folders', (size, size, 3)
    epoch = dict(repetitions=1, steps=FLAGS.image_photos // batch_size, warmup_steps=5)
    rows, input_fns = [], {}
    for stored_as in image_records.STORED_FORMS:
        data = os.path.join(work_dir, f'image_shards_{stored_as}')
        turn = prepare_turn(root, data, stored_as)
        turn()  # the shards the epoch rows read (each turn writes the same bytes again)
        pattern = os.path.join(data, 'train-*')
        results.add(f'images.bytes_{stored_as}', section, f'shard bytes per photo: {stored_as}',
                    [bench_data.total_bytes(glob.glob(pattern)) / FLAGS.image_photos], 'bytes')
        input_fns[stored_as] = image_records.make_input_fn(pattern, shape, batch_size, True)
        rows += [(f'images.prepare_{stored_as}', f'prepare images --stored_as={stored_as} '
                  '(all cores): photos/s', turn, 'with its writing'),
                 (f'images.shards_{stored_as}', f"an epoch: this service's input_fn on the "
                  f'{stored_as} shards', dataset_turn(input_fns[stored_as], batch_size, epoch), '')]
    rows.append(('images.from_directory', 'an epoch: image_dataset_from_directory on the tree',
                 dataset_turn(lambda: keras_directory_dataset(root, size, batch_size), batch_size,
                              epoch), 'decodes every photo every epoch'))
    measure(results, section, rows, 'examples/s',
            {key: 'photos/s' for key, *_ in rows if key.startswith('images.prepare')})
    schema = file_patterns.read_schema(os.path.join(work_dir, 'image_shards_pixels', 'train-*'),
                                       'the bench')
    measure(results, '11 image_classifier training', precision_bench.schema_model_rows(
        'images', 'image_classifier', schema, input_fns['pixels'], batch_size, training_turn),
        'examples/s')
    return (f'generated: {FLAGS.image_photos:,} JPEG photos, {len(CLASSES)} classes, 80-240 px, '
            f'fitted to {size}x{size}x3; batch {batch_size}')
