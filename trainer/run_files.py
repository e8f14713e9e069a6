"""What the trainer keeps beside the checkpoints in model_dir."""
import os

import numpy as np
import tensorflow as tf

from input_fns.errors import DataError
from input_fns.shards import write_text_atomic

# The flags of the last training run, in --flagfile format: rerun with --flagfile=MODEL_DIR/flags.txt.
FLAGS_FILE = 'flags.txt'
TRAINER_FLAGS_MODULE = 'trainer.flags'


def latest_step(model_dir: str) -> int:
    checkpoint = tf.train.latest_checkpoint(model_dir) if model_dir else None
    return int(tf.train.load_variable(checkpoint, 'global_step')) if checkpoint else 0


def record_flags(FLAGS, model_name: str) -> None:
    """Writes the trainer's flags to model_dir/flags.txt, refusing to resume a different model."""
    path = os.path.join(FLAGS.model_dir, FLAGS_FILE)
    if os.path.exists(path):
        with open(path) as f:
            previous = [line.strip()[len('--model='):] for line in f
                        if line.startswith('--model=')]
        if previous and previous[0] != model_name:
            raise DataError(f'--model_dir={FLAGS.model_dir} holds a {previous[0]} model (see {path}); '
                            f'use another --model_dir for {model_name}')
    lines = [flag.serialize() for flag in FLAGS.get_flags_for_module(TRAINER_FLAGS_MODULE)]
    os.makedirs(FLAGS.model_dir, exist_ok=True)
    write_text_atomic(path, ''.join(f'{line}\n' for line in sorted(lines) if line))


def json_value(value):
    """NumPy scalars from Estimator results as plain JSON numbers."""
    return value.item() if isinstance(value, np.generic) else value
