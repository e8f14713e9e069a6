"""Stopping cleanly on SIGTERM (Kubernetes, Vertex AI, `docker stop`) and SIGINT (Ctrl-C).

install() gives both signals a handler, which also makes them reach a process that is pid 1
of its container (the kernel drops a signal that pid 1 does not handle). What a signal
then does depends on where the main thread is:

- inside a finish_first() section (the chief's training, publishing an export), it only
  asks for a stop: the code there looks at requested() (training stops at the step it
  reached and saves that step's checkpoint), and the section's end raises Terminated;
- anywhere else, it raises Terminated at once: an evaluation in progress or a shard being
  written is abandoned, and their writers remove their temporary files on the way out.

Only the first signal raises; a second one is noted and changes nothing, so it cannot cut
a final checkpoint save or a clean-up short. common.cli turns Terminated into exit 143
(SIGTERM) or 130 (SIGINT).
"""
import contextlib
import signal
import threading
from typing import Optional

from absl import logging

SIGNALS = (signal.SIGTERM, signal.SIGINT)

_requested = threading.Event()
_received = {}  # 'signum' of the first signal
_finishing = []  # what each open finish_first() section finishes, innermost last


class Terminated(BaseException):
    """A signal stops the command; a BaseException, so that `except Exception` lets it by."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def install() -> None:
    """Handles SIGTERM and SIGINT in this process (call from the main thread).

    A signal that is ignored (SIGINT in a shell's background job) or has someone else's
    handler is left as it is.
    """
    for signum in SIGNALS:
        if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(signum, _on_signal)


def requested() -> bool:
    return _requested.is_set()


def received() -> Optional[int]:
    """The first signal that asked for a stop, or None."""
    return _received.get('signum')


def signal_name() -> str:
    """'SIGTERM' or 'SIGINT': the first signal that asked for a stop."""
    return signal.Signals(_received['signum']).name if _received else 'no signal'


def _on_signal(signum, frame):
    name = signal.Signals(signum).name
    if _requested.is_set():
        logging.warning('%s again: already stopping (%s); kill -9 stops at once', name,
                        _finishing[-1] if _finishing else 'cleaning up')
        return
    _received['signum'] = signum
    _requested.set()
    if _finishing:
        logging.warning('%s: %s, then stopping', name, _finishing[-1])
        return
    raise Terminated(signum)


@contextlib.contextmanager
def finish_first(what: str):
    """Inside, a signal only asks for a stop; once the section ends, Terminated is raised.

    what: what the section finishes first, for the log ('saving the checkpoint of the step
    reached'). Raised only when the section ends normally: its own error goes on as it is.
    """
    _finishing.append(what)
    try:
        yield
    finally:
        _finishing.pop()
    check()


def check() -> None:
    """Raises Terminated if a signal asked for a stop (outside finish_first sections).

    For loops that must notice a signal even when a library swallowed the exception it raised.
    """
    if _requested.is_set() and not _finishing:
        raise Terminated(_received['signum'])
