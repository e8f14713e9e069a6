"""What an eval job waits for from its trainer: the model_dir, its flags, the final checkpoint."""
import time
from typing import Optional

from absl import logging

from common import files, paths
from common.errors import UserError
from trainer.model_dir import checkpoints, run_files

# How long an eval job waits for a model_dir that does not exist yet.
MODEL_DIR_GRACE_SECS = 120


class EvalTimeout(RuntimeError):
    """No checkpoint ever came: a runtime failure (exit 1), not bad input."""


def wait_for_flags_or_checkpoint(model_dir: str, timeout_secs: float) -> None:
    """Waits until a trainer has written model_dir's flags.txt, or any checkpoint.

    An eval job started beside its trainer must read the model's flags.txt (which model,
    and how it sees its input) before it builds anything; the trainer writes it before
    its first checkpoint.
    """
    wait_for_model_dir(model_dir, timeout_secs)
    deadline, said_waiting = time.time() + timeout_secs, False
    while (run_files.recorded_flags(model_dir) is None
           and not checkpoints.list_checkpoints(model_dir)):
        if not said_waiting:
            logging.info('waiting for a trainer to write %s or a checkpoint',
                         paths.join(model_dir, run_files.FLAGS_FILE))
            said_waiting = True
        if time.time() > deadline:
            raise no_checkpoint(model_dir, timeout_secs)
        time.sleep(checkpoints.POLL_SECS)


def no_checkpoint(model_dir: str, timeout_secs: float) -> EvalTimeout:
    return EvalTimeout(f'--model_dir={model_dir}: no checkpoint appeared in {timeout_secs} s '
                       '(--eval_timeout_secs); is a trainer writing there?')


def wait_for_model_dir(model_dir: str, timeout_secs: float) -> None:
    """A trainer started at the same time creates model_dir within seconds; a typo never does.

    Waits without creating it (the ledger would), then stops instead of polling for
    --eval_timeout_secs.
    """
    grace_secs = min(timeout_secs, MODEL_DIR_GRACE_SECS)
    deadline = time.time() + grace_secs
    while not files.isdir(model_dir):
        if time.time() > deadline:
            raise UserError(f'--model_dir={model_dir}: no such folder (waited {grace_secs:.0f} s '
                            'for a trainer to create it); check the path')
        time.sleep(checkpoints.POLL_SECS)


def is_final(step: int, model_dir: str, train_steps: Optional[int]) -> bool:
    """Whether step is the last checkpoint of the trainer, as it recorded when it finished.

    Not simply step >= --train_steps: a cluster's chief saves once more after that, and
    early stopping ends short of it. A record from an earlier, shorter run does not count.
    """
    finished = run_files.train_finished(model_dir)
    return bool(finished and step >= finished.step and
                (finished.early_stopped or train_steps is None
                 or finished.train_steps >= train_steps))
