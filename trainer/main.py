"""Train, evaluate, export and predict registered models with tf.estimator.

  python -m trainer.main --model=mnist_cnn --mode=train --model_dir=DIR \
      --train_files='shards/train-*' --eval_files='shards/validation-*'
  python -m trainer.main --mode=export --model_dir=DIR --export_dir=EXPORTS
  python -m trainer.main --mode=predict --saved_model=EXPORTS/1000 digit.png ...
  python -m trainer.main --model=csv_mlp --mode=benchmark_input --train_files='csv/train-*'

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
from trainer import benchmark_input, evaluation, export, hooks, inputs, run_files  # noqa: E402
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
                                seed=seed, options=trainer_flags.input_options(FLAGS))


def eval_input_fn(spec, file_pattern=None, flag_name='--eval_files'):
    return inputs.make_input_fn(spec, file_pattern or FLAGS.eval_files, flag_name, False,
                                FLAGS.batch_size, options=trainer_flags.input_options(FLAGS))


def checkpoint_to_use(estimator):
    checkpoint = FLAGS.checkpoint or estimator.latest_checkpoint()
    if not checkpoint:
        raise DataError(f'--model_dir={FLAGS.model_dir}: no checkpoint yet; train first '
                        'or pass --checkpoint')
    return checkpoint


def progress_hooks():
    return [hooks.ProgressHook(FLAGS.log_every_n_steps, FLAGS.batch_size, FLAGS.model_dir)]


def run_train(spec, estimator):
    estimator.train(train_input_fn(spec), max_steps=FLAGS.train_steps, hooks=progress_hooks())


def run_train_and_evaluate(spec, estimator):
    tf.estimator.train_and_evaluate(
        estimator,
        tf.estimator.TrainSpec(train_input_fn(spec), max_steps=FLAGS.train_steps,
                               hooks=progress_hooks()),
        tf.estimator.EvalSpec(eval_input_fn(spec), steps=None, start_delay_secs=0,
                              throttle_secs=FLAGS.eval_throttle_secs))


def run_evaluate(spec, estimator):
    threshold_input_fn = FLAGS.threshold_files and eval_input_fn(
        spec, FLAGS.threshold_files, '--threshold_files')
    metrics = evaluation.evaluate(estimator, spec, checkpoint_to_use(estimator),
                                  eval_input_fn(spec), FLAGS.eval_files,
                                  threshold_input_fn, FLAGS.threshold_files)
    print(json.dumps(metrics), flush=True)


def run_export(spec, estimator):
    receiver_fn = inputs.serving_input_receiver_fn(spec, trainer_flags.input_options(FLAGS))
    path = export.export_saved_model(estimator, receiver_fn, FLAGS.export_dir,
                                     checkpoint_to_use(estimator), spec.signature_renames)
    print(json.dumps({'saved_model': path}), flush=True)


MODES = {'train': run_train, 'train_and_evaluate': run_train_and_evaluate,
         'evaluate': run_evaluate, 'export': run_export}


def run(spec, image_paths):
    if FLAGS.mode == 'predict':  # needs only the SavedModel
        return export.print_json_lines(export.predict_files(FLAGS.saved_model, image_paths))
    if FLAGS.mode == 'benchmark_input':  # trains in a temporary folder, never --model_dir
        return benchmark_input.run(spec, FLAGS)
    if FLAGS.mode in ('train', 'train_and_evaluate'):
        run_files.record_flags(FLAGS, spec.name)
    MODES[FLAGS.mode](spec, build_estimator(spec))


def op_error_summary(error) -> str:
    """The line of a TF error message that says what went wrong, not where."""
    lines = [line.strip() for line in error.message.splitlines()]
    after_node = [i + 1 for i, line in enumerate(lines) if line.startswith('Node:')]
    for line in lines[after_node[-1] if after_node else 0:]:
        if line and not line.startswith(('Graph execution error', 'Detected at node')):
            return line
    return lines[0]


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
        print(f'error: {type(e).__name__}: {op_error_summary(e)} (run with --verbosity=1 for '
              'the traceback)', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    trainer_flags.define_flags()
    app.run(main)
