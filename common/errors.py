"""The one exception type for mistakes a user must fix (exit 2), the one for a failure while
running that the same command may get past (exit 1: a store that keeps failing, a worker process
killed), and one-line TensorFlow errors."""
import errno
import sys
import threading
from typing import Optional

NO_SPACE = 'No space left on device'


class UserError(ValueError):
    """Something the user gave (files, flags, a model_dir, a checkpoint) must change.

    The message names the file, pattern, flag or checkpoint and says what to do.
    """


class RunFailure(RuntimeError):
    """Something failed while running that the user's input did not cause (exit 1, one line):
    the message names what failed and says that the same command resumes or starts again."""


class StoreError(RunFailure):
    """A bucket kept failing (500, 503 SlowDown, 429, resets, stalls) after common.files tried
    again: a failure while running (exit 1), not bad input. The message names the path and
    the operation, and says that the same command resumes."""


def op_error_summary(error) -> str:
    """The line of a TensorFlow error message that says what went wrong, not where.

    Skips the headers and the indented stack frames ('  File ...', source lines, '[[node]]')
    that graph-execution errors put before and after the cause.
    """
    lines = error.message.splitlines()
    after_node = [i + 1 for i, line in enumerate(lines) if line.startswith('Node:')]
    for line in lines[after_node[-1] if after_node else 0:]:
        if line.strip() and not line[0].isspace() and not line.startswith(
                ('Graph execution error', 'Detected at node', 'Node:')):
            return line.strip()
    return lines[0].strip() if lines else type(error).__name__


def full_disk_path(error: Exception) -> Optional[str]:
    """The file a TensorFlow or OS error was writing when the disk was full; None for others.
    TensorFlow says '<path>; No space left on device'."""
    if isinstance(error, OSError):
        return error.filename if error.errno == errno.ENOSPC else None
    message = getattr(error, 'message', None) or str(error)  # RuntimeError: the event writer's
    for line in message.splitlines():
        if line.strip().endswith(f'; {NO_SPACE}'):
            return line.strip()[:-len(f'; {NO_SPACE}')].split(': ')[-1]
    return None


def quiet_full_disk_in_threads() -> None:
    """A full disk in a writer thread (TensorBoard's event writer) is one line there, not a
    traceback: the main thread's error says what to do."""
    default_hook = threading.excepthook

    def hook(args):
        path = full_disk_path(args.exc_value) if args.exc_value else None
        if path:
            print(f'warning: thread {args.thread.name}: writing {path}: {NO_SPACE}', file=sys.stderr)
        else:
            default_hook(args)
    threading.excepthook = hook
