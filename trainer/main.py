"""Train, evaluate, export and predict registered models with tf.estimator.

  python -m trainer.main --model=mnist_cnn --mode=train --model_dir=DIR \
      --train_files='shards/train-*' --eval_files='shards/validation-*'
  python -m trainer.main --mode=export --model_dir=DIR --export_dir=EXPORTS
  python -m trainer.main --mode=predict --saved_model=EXPORTS/1000 digit.png ...

All flags can come from a file: --flagfile=FILE.
"""
import json
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '1')

import tensorflow as tf  # noqa: E402
from absl import app, flags, logging  # noqa: E402

from input_fns.errors import DataError  # noqa: E402
from models import registry  # noqa: E402
from trainer import export, hooks, inputs, run_files  # noqa: E402
from trainer import flags as trainer_flags  # noqa: E402

FLAGS = flags.FLAGS


def quiet_tensorflow_logging():
    """One copy of each TF log line (through absl), without tf.estimator's deprecation notices."""
    tf_logger = tf.get_logger()
    tf_logger.handlers.clear()
    tf_logger.addFilter(lambda record: 'is deprecated and will be removed' not in record.getMessage())


def build_estimator(spec):
    config = tf.estimator.RunConfig(
        model_dir=FLAGS.model_dir, tf_random_seed=FLAGS.random_seed,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max or None,
        save_summary_steps=FLAGS.log_every_n_steps,
        log_step_count_steps=None)  # ProgressHook logs instead
    return tf.estimator.Estimator(spec.model_fn, config=config,
                                  params=trainer_flags.model_params(FLAGS, spec))


def train_input_fn(spec):
    # A resumed run reshuffles differently instead of replaying the first epoch's order.
    seed = FLAGS.random_seed + run_files.latest_step(FLAGS.model_dir)
    return inputs.make_input_fn(spec, FLAGS.train_files, '--train_files', True, FLAGS.batch_size,
                                seed=seed, shuffle_buffer=FLAGS.shuffle_buffer)


def eval_input_fn(spec):
    return inputs.make_input_fn(spec, FLAGS.eval_files, '--eval_files', False, FLAGS.batch_size)


def checkpoint_to_use(estimator):
    checkpoint = FLAGS.checkpoint or estimator.latest_checkpoint()
    if not checkpoint:
        raise DataError(f'--model_dir={FLAGS.model_dir}: no checkpoint yet; train first '
                        'or pass --checkpoint')
    return checkpoint


def progress_hooks():
    return [hooks.ProgressHook(FLAGS.log_every_n_steps, FLAGS.batch_size, FLAGS.model_dir)]


def run(spec, image_paths):
    mode = FLAGS.mode
    if mode == 'predict':
        return export.print_json_lines(export.predict_files(FLAGS.saved_model, image_paths))
    estimator = build_estimator(spec)
    if mode in ('train', 'train_and_evaluate'):
        run_files.record_flags(FLAGS, spec.name)
    if mode == 'train':
        estimator.train(train_input_fn(spec), max_steps=FLAGS.train_steps, hooks=progress_hooks())
    elif mode == 'train_and_evaluate':
        tf.estimator.train_and_evaluate(
            estimator,
            tf.estimator.TrainSpec(train_input_fn(spec), max_steps=FLAGS.train_steps,
                                   hooks=progress_hooks()),
            tf.estimator.EvalSpec(eval_input_fn(spec), steps=None, start_delay_secs=0,
                                  throttle_secs=FLAGS.eval_throttle_secs))
    elif mode == 'evaluate':
        metrics = estimator.evaluate(eval_input_fn(spec),
                                     checkpoint_path=checkpoint_to_use(estimator))
        print(json.dumps({key: run_files.json_value(value) for key, value in metrics.items()}),
              flush=True)
    elif mode == 'export':
        path = export.export_saved_model(estimator, inputs.serving_input_receiver_fn(spec),
                                         FLAGS.export_dir, checkpoint_to_use(estimator))
        print(json.dumps({'saved_model': path}), flush=True)


def main(argv):
    if argv[1:] and FLAGS.mode != 'predict':
        print(f'error: unexpected arguments {argv[1:]}; only --mode=predict takes file names',
              file=sys.stderr)
        return 2
    quiet_tensorflow_logging()
    try:
        run(registry.get(FLAGS.model), image_paths=argv[1:])
    except DataError as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    except tf.errors.OpError as e:  # data that only failed once read, e.g. a corrupt record
        logging.debug('traceback', exc_info=True)
        print(f'error: {type(e).__name__}: {e.message.splitlines()[0]} '
              f'(reading --train_files/--eval_files?)', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    trainer_flags.define_flags()
    app.run(main)
