"""Synchronous training across a TF_CONFIG cluster: --distribution=multi_worker_mirrored.

tf.distribute.MultiWorkerMirroredStrategy through RunConfig(train_distribute=...): with a
chief and workers in TF_CONFIG (no ps) tf.estimator's train_and_evaluate runs its distribute
coordinator, each training task builds the graph and all-reduces the gradients with collective
ops every step. The chief saves the checkpoints; each worker saves its copy of every
checkpoint under MODEL_DIR/tmp_worker_N/ (the save may hold collective ops all must run), which
it removes once training ends.
"""
from typing import Optional

import tensorflow as tf
from absl import logging

from common import file_trees, paths, tf_config
from common.errors import UserError


def check_cluster(batch_size: Optional[int], replicas_per_worker: int) -> int:
    """--distribution=multi_worker_mirrored: the training tasks of a TF_CONFIG cluster of a
    chief and workers, no parameter servers; a UserError says what to do otherwise."""
    jobs = tf_config.cluster_jobs()
    if not tf_config.role().in_cluster:
        raise UserError('--distribution=multi_worker_mirrored needs a TF_CONFIG cluster of a '
                        'chief and workers: start one with ./run.sh cluster --sync, or deploy '
                        'tfjob/vertex --sync; on one machine use --distribution=mirrored or none')
    if jobs.get('ps'):
        raise UserError(f'--distribution=multi_worker_mirrored trains without parameter '
                        f'servers, but TF_CONFIG\'s cluster has {jobs["ps"]} ps task(s): drop '
                        'them (./run.sh cluster --sync, deploy --sync), or use '
                        '--distribution=none for parameter-server training')
    if jobs.get('master'):
        raise UserError('--distribution=multi_worker_mirrored: TF_CONFIG names the chief '
                        '"master" (older Cloud ML Engine jobs); tf.estimator trains '
                        'synchronously only with a "chief": rename the task type')
    workers = jobs.get('chief', 0) + jobs.get('worker', 0)
    replicas = workers * replicas_per_worker
    if batch_size is not None and batch_size % replicas:
        raise UserError(f'--batch_size={batch_size} is the global batch and must split evenly '
                        f'over {replicas} replicas ({workers} workers); use a multiple of '
                        f'{replicas}')
    return workers


def check_precision(precision: str, gpus: int) -> None:
    # Measured in TF 2.15: the first step fails with "Value for attr 'T' of bfloat16 is not in
    # the list of allowed values" when the graph runs on the cluster's gRPC session.
    if precision == 'mixed_bfloat16' and not gpus:
        raise UserError('--precision=mixed_bfloat16 fails under --distribution=multi_worker_'
                        'mirrored on CPUs (an op without a bfloat16 kernel in the cluster\'s '
                        'session); use --precision=float32 (auto chooses it here)')


_STRATEGY = []


def strategy() -> tf.distribute.Strategy:
    """One per process: making it starts this task's collective-ops server on its TF_CONFIG
    port, which a second one could not bind. tf.estimator's distribute coordinator then runs
    training in graph mode on that server (RunConfig(train_distribute=...))."""
    if not _STRATEGY:
        _STRATEGY.append(tf.distribute.MultiWorkerMirroredStrategy())
    return _STRATEGY[0]


def check_settings(settings) -> None:
    if settings.mode != 'train_and_evaluate':
        raise UserError(f'--distribution=multi_worker_mirrored runs in --mode=train_and_evaluate '
                        f'(tf.estimator\'s distribute coordinator), not --mode={settings.mode}: '
                        'use ./run.sh cluster --sync or deploy --sync, which set it')
    if settings.early_stopping_eval_name:
        raise UserError('--early_stopping_eval_name with --distribution=multi_worker_mirrored: '
                        'workers reading the ledger could stop at different steps and wait for '
                        'ever on each other\'s all-reduce; drop it, or train with parameter '
                        'servers (--distribution=none)')


def remove_worker_checkpoints(model_dir: str) -> None:
    """A worker's copies of the checkpoints, MODEL_DIR/tmp_worker_N/ (as tf.estimator's
    MonitoredTrainingSession names it), once training is over: the chief's are the run's."""
    role = tf_config.role()
    if role.task_type != 'worker':
        return
    folder = paths.join(model_dir, f'tmp_worker_{role.index}')
    file_trees.remove_tree(folder)
    logging.info('removed this worker\'s copies of the checkpoints, %s', folder)
