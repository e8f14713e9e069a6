"""The bench's image-folder rows (sections 10 and 11 of `./run.sh bench`); alone:
`python -m benchmarks.image_bench [--quick]` (benchmarks/image_bench.py).

On a generated class-folder tree (--image_photos JPEG photos in 5 classes, 80 to 240 pixels a
side, noise with a class colour):
  10. `prepare images` (counted once: images/s), then an epoch of training input
      (examples/s): this service's input_fn over the prepared shards against
      tf.keras.utils.image_dataset_from_directory reading and decoding the same tree, both
      fitting to --image_bench_size (stretched, as Keras does) and batching --batch_size;
  11. image_classifier training (Estimator, float32) fed by that input_fn against the same
      batch held in memory: whether training from shards is input-bound.
"""
import os
import time

import numpy as np
import tensorflow as tf
from absl import flags

from benchmarks import precision_bench
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


def image_rows(work_dir: str, results, measure, dataset_turn, training_turn) -> str:
    """Sections 10 and 11 into results (bench_report's Results, bench_sections' measure and
    dataset_turn, and a
    training_turn(spec, input_fn, batch_size)); returns what the data was."""
    root, data = os.path.join(work_dir, 'photos'), os.path.join(work_dir, 'image_shards')
    write_photo_tree(root, FLAGS.image_photos)
    size, batch_size = FLAGS.image_bench_size, FLAGS.batch_size
    started = time.perf_counter()
    entries = prepare_images.prepare_images(
        source_dir=root, output_dir=data, image_size=f'{size}x{size}', channels='3',
        resize='stretch', validation_fraction=0.0, skip_bad_images=False, decode_workers=0,
        num_shards=10, num_eval_shards=1, seed=0)
    seconds = time.perf_counter() - started
    section = '10 image folders'
    results.add('images.prepare', section, 'prepare images (all cores): images/s',
                [FLAGS.image_photos / seconds], 'images/s', f'{seconds:.1f} s with writing')
    pattern = os.path.join(data, 'train-*')
    shape = (size, size, 3)
    input_fn = image_records.make_input_fn(pattern, shape, batch_size, True)
    epoch_steps = entries['train']['num_records'] // batch_size
    epoch = dict(repetitions=1, steps=epoch_steps, warmup_steps=5)
    measure(results, section, [
        ('images.shards', "an epoch: this service's input_fn on the image shards",
         dataset_turn(input_fn, batch_size, epoch), ''),
        ('images.from_directory', 'an epoch: image_dataset_from_directory on the tree',
         dataset_turn(lambda: keras_directory_dataset(root, size, batch_size), batch_size,
                      epoch), 'decodes every photo every epoch'),
    ], 'examples/s')
    schema = file_patterns.read_schema(pattern, 'the bench')
    measure(results, '11 image_classifier training', precision_bench.schema_model_rows(
        'images', 'image_classifier', schema, input_fn, batch_size, training_turn), 'examples/s')
    return (f'generated: {FLAGS.image_photos:,} JPEG photos, {len(CLASSES)} classes, 80-240 px, '
            f'fitted to {size}x{size}x3; batch {batch_size}')

