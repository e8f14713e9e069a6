"""What each mode runs, built from the trainer's flags: the Estimator, input_fns, hooks, jobs."""
import tensorflow as tf
from absl import flags

from models import precision
from trainer import devices, eval_job, evaluation, export, hooks, inputs, ledger, run_files
from trainer import vertex_env
from trainer import flags as trainer_flags
from trainer.export_policy import LedgerExports

FLAGS = flags.FLAGS


def build_estimator(spec):
    plan = devices.from_flags(FLAGS)
    devices.log_plan(plan)
    config = tf.estimator.RunConfig(
        model_dir=FLAGS.model_dir, tf_random_seed=FLAGS.random_seed,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max or None,
        save_summary_steps=FLAGS.log_every_n_steps,
        log_step_count_steps=None)  # ProgressHook logs instead
    return tf.estimator.Estimator(precision.with_policy(spec.model_fn, FLAGS.precision),
                                  config=plan.run_config(config),
                                  params=trainer_flags.model_params(FLAGS, spec))


def replica_batch_size():
    """--batch_size is the global batch: with N replicas, each input_fn call makes 1/N of it."""
    return devices.from_flags(FLAGS).per_replica_batch(FLAGS.batch_size)


def train_input_fn(spec):
    # A resumed run reshuffles differently instead of replaying the first epoch's order.
    seed = FLAGS.random_seed + run_files.latest_step(FLAGS.model_dir)
    return inputs.make_input_fn(spec, FLAGS.train_files, '--train_files', True,
                                replica_batch_size(), seed=seed,
                                options=trainer_flags.input_options(FLAGS))


def eval_input_fn(spec, file_pattern=None, flag_name='--eval_files'):
    return inputs.make_input_fn(spec, file_pattern or FLAGS.eval_files, flag_name, False,
                                FLAGS.batch_size, options=trainer_flags.input_options(FLAGS))


def export_checkpoint(spec, estimator, checkpoint_path):
    receiver_fn = inputs.serving_input_receiver_fn(spec, trainer_flags.input_options(FLAGS))
    return export.export_saved_model(estimator, receiver_fn, FLAGS.export_dir, checkpoint_path,
                                     spec.signature_renames)


def extra_metrics(spec, estimator, eval_fn):
    """Face pairs: LFW's protocol (accuracy at a threshold chosen elsewhere, AUC) per checkpoint."""
    if spec.input_kind != 'face_pairs':
        return None
    threshold_fn = FLAGS.threshold_files and eval_input_fn(spec, FLAGS.threshold_files,
                                                           '--threshold_files')
    return lambda checkpoint: {'lfw_protocol': evaluation.pair_protocol_report(
        estimator, checkpoint, eval_fn, FLAGS.eval_files, threshold_fn, FLAGS.threshold_files)}


def progress_hooks():
    return [hooks.ProgressHook(FLAGS.log_every_n_steps, FLAGS.batch_size, FLAGS.model_dir)]


def early_stopping_hooks():
    if not FLAGS.early_stopping_eval_name:
        return []
    return [hooks.EarlyStoppingHook(
        ledger.Ledger(FLAGS.model_dir, FLAGS.early_stopping_eval_name), FLAGS.early_stopping_metric,
        trainer_flags.metric_mode(FLAGS.early_stopping_metric, FLAGS.early_stopping_mode),
        FLAGS.early_stopping_patience, FLAGS.early_stopping_check_secs)]


def train(spec, estimator):
    is_chief = estimator.config.is_chief
    if is_chief:
        run_files.record_flags(FLAGS, spec.name)
        run_files.clear_train_finished(FLAGS.model_dir)
    stoppers = early_stopping_hooks()
    tensorboard = vertex_env.tensorboard_hooks(FLAGS.log_every_n_steps, is_chief)
    train_spec = tf.estimator.TrainSpec(train_input_fn(spec), max_steps=FLAGS.train_steps,
                                        hooks=progress_hooks() + stoppers + tensorboard)
    if FLAGS.mode == 'train':
        estimator.train(train_spec.input_fn, max_steps=train_spec.max_steps, hooks=train_spec.hooks)
    else:  # on a cluster (TF_CONFIG) this runs the chief, a worker or a parameter server
        tf.estimator.train_and_evaluate(estimator, train_spec, tf.estimator.EvalSpec(
            eval_input_fn(spec), steps=None, start_delay_secs=0,
            throttle_secs=FLAGS.eval_throttle_secs))
    if is_chief:
        run_files.write_train_finished(FLAGS.model_dir, FLAGS.train_steps,
                                       next((hook.reason for hook in stoppers), None))


def make_eval_job(spec, estimator):
    exports = None
    if FLAGS.export_dir:
        exports = LedgerExports(
            FLAGS.export_dir, FLAGS.export_policy, FLAGS.export_metric,
            trainer_flags.metric_mode(FLAGS.export_metric, FLAGS.export_mode), FLAGS.exports_to_keep,
            lambda path: export_checkpoint(spec, estimator, path))
    eval_fn = eval_input_fn(spec)  # checks the eval files once, for both uses
    return eval_job.EvalJob(estimator, eval_fn, FLAGS.eval_files,
                            ledger.Ledger(FLAGS.model_dir, FLAGS.eval_name), exports,
                            extra_metrics(spec, estimator, eval_fn))
