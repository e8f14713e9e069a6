"""One function per mode of trainer.main, run_<mode> (trainer.config.modes.MODES), in RUNNERS.

Each takes the Settings and the arguments after the flags (the files --mode=predict reads).
"""
import json
from typing import Callable, Dict, List

import tensorflow as tf

from models import registry
from trainer.cluster import multi_worker
from trainer.evaluation import eval_job, ledger_reports
from trainer.model_dir import checkpoint_fit, checkpoints, ledger
from trainer.run import benchmark_input, data_schema, experiment, job_end, store_failures
from trainer.serving import export, predict


def _on_experiment(run_on: Callable[[experiment.Experiment], None]):
    """A mode that runs on an Experiment; a bad record read on the way names its file."""
    def run(settings, arguments: List[str]):
        built = experiment.build(settings, registry.get(settings.model))
        try:
            run_on(built)
        except tf.errors.OpError as e:
            raise built.data_error(e) or store_failures.as_store_error(e, settings) or e
    run.__doc__ = run_on.__doc__
    return run


@_on_experiment
def run_train(run: experiment.Experiment):
    with run.training():
        store_failures.resuming(lambda: _train(run), run.settings, 'training',
                                mend=lambda: checkpoints.prepare_to_resume(
                                    run.settings.model_dir))  # what a failed save left


def _train(run: experiment.Experiment):
    """Estimator restores the model_dir's latest checkpoint, if any, then trains on."""
    with checkpoint_fit.restoring(tf.train.latest_checkpoint(run.settings.model_dir)):
        run.estimator.train(run.train_spec.input_fn, max_steps=run.train_spec.max_steps,
                            hooks=run.train_spec.hooks)


def _continuous_eval(run: experiment.Experiment):
    run.check_model()
    store_failures.resuming(
        lambda: eval_job.continuous_eval(run.eval_job, run.settings.model_dir,
                                         run.settings.final_train_steps,
                                         run.settings.eval_timeout_secs),
        run.settings, 'the eval job')


run_continuous_eval = _on_experiment(_continuous_eval)


@_on_experiment
def run_train_and_evaluate(run: experiment.Experiment):
    if run.estimator.config.task_type == 'evaluator':  # tf.estimator's own skips checkpoints
        return _continuous_eval(run)
    if not run.estimator.config.cluster_spec:  # one machine: it evaluates, into the ledger
        job = run.eval_job
        with job.ledger.lock():
            job.start()
            with run.training(with_eval_spec=True):
                tf.estimator.train_and_evaluate(run.estimator, run.train_spec, run.eval_spec)
        # A run stopped between its final save and that checkpoint's evaluation resumes with
        # nothing to train, and tf.estimator then evaluates nothing: the ledger would lack it.
        [(step, path)] = checkpoints.resolve(run.settings.model_dir, 'latest')
        if job.ledger.find(step) is None:
            eval_job.evaluate_once(job, [(step, path)])
        return
    # On a cluster (TF_CONFIG): the chief, a worker or a parameter server.
    with run.training(with_eval_spec=True):
        if run.estimator.config.task_type == 'ps':  # tf.estimator's would serve for ever
            job_end.serve_until_training_ends(run.estimator.config, run.settings.model_dir)
        else:
            tf.estimator.train_and_evaluate(run.estimator, run.train_spec, run.eval_spec)
            if run.plan.sync_workers:
                multi_worker.remove_worker_checkpoints(run.settings.model_dir)
    if run.is_chief and run.settings.wait_for_eval_secs:
        # A tuning trial ends with its chief, and Katib reads the chief's output.
        ledger_reports.report_ledger(run.eval_job)


@_on_experiment
def run_evaluate(run: experiment.Experiment):
    run.check_model()
    chosen = checkpoints.resolve(run.settings.model_dir, run.settings.checkpoint)
    entries = eval_job.evaluate_once(run.eval_job, chosen)
    predict.print_json_lines(entry.metrics if entry.status == ledger.EVALUATED else entry.to_json()
                             for entry in entries)


@_on_experiment
def run_export(run: experiment.Experiment):
    run.check_model()
    [(_, path)] = checkpoints.resolve(run.settings.model_dir, run.settings.checkpoint)
    saved_model = store_failures.resuming(  # each try stages its own copy and removes it
        lambda: run.export_checkpoint(path), run.settings, 'the export')
    export.point_latest(run.settings.export_dir)
    print(json.dumps({'saved_model': saved_model}), flush=True)


def run_predict(settings, arguments: List[str]):
    try:
        predict.print_json_lines(predict.predict_rows(
            settings.saved_model, arguments, settings.signature, decimal=settings.decimal,
            thousands=settings.thousands, encoding=settings.encoding, sheet=settings.sheet))
    except tf.errors.OpError as e:
        raise store_failures.as_store_error(e, settings) or e


def run_benchmark_input(settings, arguments: List[str]):
    """Trains in a temporary folder, never in --model_dir."""
    benchmark_input.run(settings, data_schema.with_schema(settings, registry.get(settings.model)))


RUNNERS: Dict[str, Callable] = {
    'train': run_train, 'evaluate': run_evaluate, 'continuous_eval': run_continuous_eval,
    'train_and_evaluate': run_train_and_evaluate, 'export': run_export, 'predict': run_predict,
    'benchmark_input': run_benchmark_input,
}
