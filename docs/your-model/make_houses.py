"""Writes made-up houses as tf.Example TFRecord shards: OUTPUT_DIR/{train,validation}-*.tfrecord.

  python docs/your-model/make_houses.py OUTPUT_DIR [TRAIN_HOUSES]

price = 0.5 + 0.3 rooms + 1.5 area - 0.05 age - 0.4 distance, plus noise (sd 0.05); a model
that learns it reaches a root mean squared error near 0.05 on the validation houses.
"""
import os
import sys

import numpy as np
import tensorflow as tf


def houses(count: int, seed: int):
    rng = np.random.RandomState(seed)
    values = {'rooms': rng.randint(1, 7, count).astype(float), 'area': rng.uniform(0.3, 2, count),
              'age': rng.uniform(0, 10, count), 'distance': rng.uniform(0, 2, count)}
    values['price'] = (0.5 + 0.3 * values['rooms'] + 1.5 * values['area'] - 0.05 * values['age']
                       - 0.4 * values['distance'] + rng.normal(0, 0.05, count))
    return [{name: float(column[i]) for name, column in values.items()} for i in range(count)]


def write(output_dir: str, split: str, rows, num_shards: int) -> None:
    os.makedirs(output_dir, exist_ok=True)
    for shard in range(num_shards):
        path = os.path.join(output_dir, f'{split}-{shard:05d}-of-{num_shards:05d}.tfrecord')
        with tf.io.TFRecordWriter(path) as writer:
            for row in rows[shard::num_shards]:
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    name: tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
                    for name, value in row.items()})).SerializeToString())


if __name__ == '__main__':
    output_dir, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    write(output_dir, 'train', houses(count, seed=1), num_shards=4)
    write(output_dir, 'validation', houses(count // 4, seed=2), num_shards=2)
    print(f'{output_dir}: {count} training and {count // 4} validation houses')
