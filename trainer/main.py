"""Train, evaluate, export and predict registered models with tf.estimator.

  python -m trainer.main --model=mnist_cnn --mode=train --model_dir=DIR \
      --train_files='shards/train-*'
  python -m trainer.main --mode=continuous_eval --model_dir=DIR \
      --eval_files='shards/validation-*' --eval_name=validation --export_dir=EXPORTS
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

from common.errors import UserError  # noqa: E402
from models import registry  # noqa: E402
from trainer import benchmark_input, checkpoints, eval_job, export, jobs  # noqa: E402
from trainer import flags as trainer_flags  # noqa: E402

FLAGS = flags.FLAGS


def quiet_tensorflow_logging():
    """One copy of each TF log line (through absl), without tf.estimator's deprecation notices."""
    tf_logger = tf.get_logger()
    tf_logger.handlers.clear()
    tf_logger.addFilter(lambda record: 'is deprecated and will be removed' not in record.getMessage())


def run(spec, image_paths):
    mode = FLAGS.mode
    if mode == 'predict':
        return export.print_json_lines(export.predict_files(FLAGS.saved_model, image_paths))
    if mode == 'benchmark_input':  # trains in a temporary folder, never --model_dir
        return benchmark_input.run(spec, FLAGS)
    estimator = jobs.build_estimator(spec)
    # A cluster's evaluator runs the eval job: tf.estimator's own evaluator skips checkpoints.
    if mode == 'continuous_eval' or (mode == 'train_and_evaluate'
                                     and estimator.config.task_type == 'evaluator'):
        eval_job.continuous_eval(
            jobs.make_eval_job(spec, estimator), FLAGS.model_dir,
            FLAGS.train_steps if FLAGS['train_steps'].present else None, FLAGS.eval_timeout_secs)
    elif mode in ('train', 'train_and_evaluate'):
        jobs.train(spec, estimator)
    elif mode == 'evaluate':
        chosen = checkpoints.resolve(FLAGS.model_dir, FLAGS.checkpoint or 'latest')
        entries = eval_job.evaluate_once(jobs.make_eval_job(spec, estimator), chosen)
        export.print_json_lines(entry.get('metrics', entry) for entry in entries)
    elif mode == 'export':
        [(_, path)] = checkpoints.resolve(FLAGS.model_dir, FLAGS.checkpoint or 'latest')
        print(json.dumps({'saved_model': jobs.export_checkpoint(spec, estimator, path)}), flush=True)


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
    except UserError as e:
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
