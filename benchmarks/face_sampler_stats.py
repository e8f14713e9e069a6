"""What the face pair samplers draw, and what they hold in memory.

  python -m benchmarks.face_sampler_stats --train_files='data/lfw/train-*' [--pairs=96000]

draws --pairs training pairs (file names, not pixels) with the streaming sampler
(input_fns/faces/face_sampler.py) and with the in-memory one it replaced
(benchmarks/baselines.py), and prints for each: among different-person pairs, the share
of distinct pairs of people and the share of all people that appear; how often a pair
of photos repeats one drawn earlier (same-person and different-person pairs apart); and
the share of a batch's rows whose first person is in another row of the same batch
(an in-batch loss takes those rows as negatives).

With --memory_batches=N it instead reads N decoded batches with one sampler (--sampler)
and prints its peak RSS as JSON (benchmarks.input_bench runs it in a fresh process).
"""
import collections
import json

import numpy as np
from absl import flags

from benchmarks import baselines
from common import cli
from input_fns.faces import face_images, face_pairs, face_sampler
from input_fns.records import pipeline

FLAGS = flags.FLAGS
SAMPLERS = ('streaming', 'in_memory')


def define_flags():
    flags.DEFINE_string('train_files', None, 'Person shards (prepare faces), a glob.')
    flags.DEFINE_integer('pairs', 96_000, 'Pairs to draw (1,000 steps of 96).', lower_bound=100)
    flags.DEFINE_integer('batch_size', 96, 'Pairs per batch, for the in-batch repeats.',
                         lower_bound=2)
    flags.DEFINE_float('same_fraction', 0.75, 'Share of same-person pairs (the recipe\'s).')
    flags.DEFINE_integer('seed', 0, 'The samplers\' seed.')
    flags.DEFINE_integer('memory_batches', 0, 'If > 0: read this many decoded batches with '
                         '--sampler and print the peak RSS instead.', lower_bound=0)
    flags.DEFINE_enum('sampler', 'streaming', SAMPLERS, 'The sampler --memory_batches reads.')
    flags.DEFINE_bool('augment', False, '--memory_batches: with --augment\'s augmentation.')
    flags.mark_flag_as_required('train_files')


def drawn_pairs(sampler, files, num_people):
    """(file name a, file name b, same) arrays of FLAGS.pairs pairs in the order drawn."""
    if sampler == 'streaming':
        pairs = face_sampler.streamed_pairs(files, num_people, FLAGS.seed,
                                            face_sampler.PairMix(FLAGS.same_fraction),
                                            photo_feature='filenames')
    else:
        pairs = baselines.in_memory_pairs(files, face_pairs.read_photo_index(files), FLAGS.seed,
                                          FLAGS.same_fraction, photo_feature='filenames')
    a, b, same = [], [], []
    for x, y, s, _ in pairs.take(FLAGS.pairs).batch(4096).as_numpy_iterator():
        a.append(x), b.append(y), same.append(s == 1)
    return np.concatenate(a), np.concatenate(b), np.concatenate(same)


def person_of(names):
    return np.array([name.split(b'/')[0] for name in names])


def repeat_share(first, second):
    """Share of draws that repeat an earlier draw (as unordered pairs)."""
    drawn = collections.Counter(tuple(sorted(pair)) for pair in zip(first, second))
    return 1 - len(drawn) / max(len(first), 1)


def in_batch_repeat_share(person_a, person_b, batch_size):
    rows = repeated = 0
    for start in range(0, len(person_a) - batch_size + 1, batch_size):
        a, b = person_a[start:start + batch_size], person_b[start:start + batch_size]
        seen = collections.Counter(a) + collections.Counter(b[b != a])
        repeated += sum(seen[person] > 1 for person in a)
        rows += batch_size
    return repeated / max(rows, 1)


def statistics(sampler, files, num_people):
    a, b, same = drawn_pairs(sampler, files, num_people)
    person_a, person_b = person_of(a), person_of(b)
    different = ~same
    people_pairs = {tuple(sorted(pair)) for pair in zip(person_a[different], person_b[different])}
    return {
        'sampler': sampler, 'pairs': len(a), 'same_share': float(same.mean()),
        'negatives_distinct_people_pairs': len(people_pairs) / max(different.sum(), 1),
        'negatives_people_covered': len(set(person_a[different]) | set(person_b[different]))
                                    / num_people,
        'same_pairs_repeated': repeat_share(a[same], b[same]),
        'different_pairs_repeated': repeat_share(a[different], b[different]),
        'batch_rows_person_repeated': in_batch_repeat_share(person_a, person_b, FLAGS.batch_size),
    }


def peak_rss_mb(files, num_people):
    """Reads --memory_batches decoded batches with --sampler; the process's peak RSS in MB."""
    geometry = face_images.FaceGeometry(image_size=64, channels=1)
    if FLAGS.sampler == 'streaming':
        dataset = face_pairs.sampled_pairs_dataset(
            files, num_people, geometry, FLAGS.batch_size, FLAGS.seed,
            face_sampler.PairMix(FLAGS.same_fraction), augment_images=FLAGS.augment)
    else:
        dataset = baselines.in_memory_pairs_dataset(
            files, face_pairs.read_photo_index(files), geometry, FLAGS.batch_size, FLAGS.seed,
            FLAGS.same_fraction, augment_images=FLAGS.augment)
    for _ in dataset.take(FLAGS.memory_batches):
        pass
    # Not getrusage's ru_maxrss: Linux carries it over exec from the forked parent (the bench).
    with open('/proc/self/status') as status:  # local: this process's own memory
        high_water_kb = next(line.split()[1] for line in status if line.startswith('VmHWM:'))
    return int(high_water_kb) / 1024


def main(argv):
    del argv
    files = pipeline.list_record_files(FLAGS.train_files, '--train_files')
    num_people, with_two = face_pairs.check_people(files)
    if FLAGS.memory_batches:
        print(json.dumps({'sampler': FLAGS.sampler, 'peak_rss_mb': peak_rss_mb(files, num_people)}))
        return
    print(f'{FLAGS.train_files}: {num_people:,} people ({with_two:,} with 2+ photos); '
          f'{FLAGS.pairs:,} pairs, same_fraction {FLAGS.same_fraction}, batch {FLAGS.batch_size}')
    for sampler in SAMPLERS:
        print(json.dumps(statistics(sampler, files, num_people)), flush=True)


if __name__ == '__main__':
    define_flags()
    cli.run(main, own_modules=[])
