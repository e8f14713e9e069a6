"""Train, evaluate, export and predict registered models with tf.estimator.

  python -m trainer.main --model=mnist_cnn --mode=train --model_dir=DIR \
      --train_files='shards/train-*'
  python -m trainer.main --mode=continuous_eval --model_dir=DIR \
      --eval_files='shards/validation-*' --eval_name=validation --export_dir=EXPORTS
  python -m trainer.main --mode=export --model_dir=DIR --export_dir=EXPORTS
  python -m trainer.main --mode=predict --saved_model=EXPORTS digit.png ...
  python -m trainer.main --model=csv_mlp --mode=benchmark_input --train_files='csv/train-*'

All flags can come from a file: --flagfile=FILE. Exit status: 0 done, 1 a failure while
running, 2 bad flags or input, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM); training
first saves the step it reached, and train and eval modes resume when run again.
"""
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '1')

import tensorflow as tf  # noqa: E402
from absl import flags, logging  # noqa: E402

from common import bucket_probe, cli, files  # noqa: E402
from common.errors import (UserError, full_disk_path, op_error_summary,  # noqa: E402
                           quiet_full_disk_in_threads)
from trainer.config import flags as trainer_flags, modes  # noqa: E402
from trainer.config.settings import Settings  # noqa: E402
from trainer.evaluation import wait_for_trainer  # noqa: E402
from trainer.model_dir import run_files  # noqa: E402
from trainer.run import mode_runners  # noqa: E402
from trainer.usr_dir import command_line as usr_dir  # noqa: E402

FLAGS = flags.FLAGS
# Flags that name files or folders: each may be in a bucket (gs://, s3://).
PATH_FLAGS = ('model_dir', 'train_files', 'eval_files', 'threshold_files', 'export_dir',
              'saved_model', 'warm_start_from')


def run(settings: Settings, arguments):
    """Dispatches on the mode, as tf.estimator's training.py does on the task type."""
    mode_runners.RUNNERS[settings.mode](settings, arguments)


def quiet_tensorflow_logging():
    """One copy of each TF log line (through absl), without tf.estimator's deprecation notices."""
    tf_logger = tf.get_logger()
    tf_logger.handlers.clear()
    tf_logger.addFilter(lambda record: 'is deprecated and will be removed' not in record.getMessage())


def stopped_message() -> str:
    if modes.MODES[FLAGS.mode].resumes:
        return (f'--mode={FLAGS.mode} stopped; resume with the same command '
                '(it goes on from the last checkpoint or ledger entry)')
    return f'--mode={FLAGS.mode} stopped'


def main(argv):
    if argv[1:] and FLAGS.mode != 'predict':
        raise UserError(f'unexpected arguments {argv[1:]}; only --mode=predict takes file names')
    quiet_tensorflow_logging()
    quiet_full_disk_in_threads()
    try:
        # A missing bucket or unreachable endpoint: one line now, not retries or empty listings later.
        bucket_probe.check_buckets([FLAGS[name].value for name in PATH_FLAGS] + argv[1:])
        for flag in modes.MODES[FLAGS.mode].writes:  # read-only: one line now, not after training
            if FLAGS[flag].value:
                files.check_writable(FLAGS[flag].value, flag)
        if FLAGS.mode == 'continuous_eval' and FLAGS.model_dir:  # its settings read the model's flags.txt
            wait_for_trainer.wait_for_flags_or_checkpoint(FLAGS.model_dir, FLAGS.eval_timeout_secs)
        run(Settings.from_flags(FLAGS, trainer_flags.flagfile_text(FLAGS)), argv[1:])
    except tf.compat.v1.train.NanLossDuringTrainingError:
        print('error: training diverged: the loss became NaN; lower --learning_rate (or check '
              'the data) and train again, in a new --model_dir if the last checkpoint diverged too',
              file=sys.stderr)
        return cli.EXIT_FAILURE
    except wait_for_trainer.EvalTimeout as e:
        print(f'error: {e}', file=sys.stderr)
        return cli.EXIT_FAILURE
    except (tf.errors.OpError, OSError, RuntimeError) as e:  # a record corrupt mid-file, a full disk
        logging.debug('traceback', exc_info=True)
        if full_disk_path(e):
            print(run_files.full_disk_message(full_disk_path(e), modes.MODES[FLAGS.mode].resumes),
                  file=sys.stderr)
            return cli.EXIT_FAILURE
        if not isinstance(e, tf.errors.OpError):
            raise
        print(f'error: {type(e).__name__}: {op_error_summary(e)} (run with --verbosity=1 for '
              'the traceback)', file=sys.stderr)
        # A damaged file is bad input; anything else (out of memory...) failed while running.
        return cli.EXIT_USAGE if isinstance(e, tf.errors.DataLossError) else cli.EXIT_FAILURE
    return cli.EXIT_OK


if __name__ == '__main__':
    # The user's models and their params' flags exist before the flags are defined and parsed.
    cli.before_flags(lambda: usr_dir.import_for_command(sys.argv), user_errors=(UserError,))
    trainer_flags.define_flags()
    cli.run(main, own_modules=[trainer_flags.__name__], user_errors=(UserError,),
            stopped_message=stopped_message)
