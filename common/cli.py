"""absl conventions for this project's commands: help that shows their own flags, and exit statuses.

  0    done (and --help, --helpshort, --helpfull)
  1    a failure while running
  2    bad flags or bad input: a one-line error naming the flag or file
  130  interrupted (Ctrl-C)
  143  terminated (SIGTERM, as Kubernetes and Vertex AI stop a task)

Both signals stop a command cleanly (common.termination): training saves the step it
reached first, and the last line says whether the same command resumes.

--helpshort (and --help) lists the command's own flags; --helpfull lists them
first, then absl's logging and flag-file flags, leaving out the flags that
imported test and TPU modules define (they do nothing here).
"""
import os
import signal
import sys
from typing import Callable, Sequence, Tuple, Type, Union

from absl import app, flags

from common import bucket_probe, termination
from common.errors import RunFailure

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143
# Modules whose flags TensorFlow's imports bring along but no command here reads.
UNRELATED_FLAG_MODULES = ('absl.testing.', 'tensorflow.python.tpu.',
                          'tensorflow.python.ops.parallel_for.')

FLAGS = flags.FLAGS


def main_module_name() -> str:
    """The name absl files the main module's flags under (the script path, even with -m)."""
    return sys.argv[0]


def adopt_flags(modules: Sequence[str]) -> None:
    """Makes the flags defined in these modules key flags of the main module: --helpshort lists them."""
    for module in modules:
        for flag in FLAGS.get_flags_for_module(module):
            FLAGS.register_key_flag_for_module(main_module_name(), flag)


def full_help(own_modules: Sequence[str]) -> str:
    """The command's own flags first, then the other modules' flags, without unrelated ones."""
    by_module = FLAGS.flags_by_module_dict()
    first = [main_module_name()] if main_module_name() in by_module else []
    first += own_modules
    others = sorted(module for module in by_module if module not in first
                    and not module.startswith(UNRELATED_FLAG_MODULES))
    return '\n\n'.join(FLAGS.module_help(module) for module in [*first, *others])


def _usage(flag_text: str) -> None:
    doc = sys.modules['__main__'].__doc__ or f'USAGE: {sys.argv[0]} [flags]\n'
    sys.stdout.write(f'{doc}\nflags:\n{flag_text}\n')
    sys.stdout.flush()
    exit_process(EXIT_OK)


class _ShortHelpFlag(flags.BooleanFlag):
    def __init__(self, name, short_name=None):
        super().__init__(name, False, 'show this command\'s flags', short_name=short_name,
                         allow_hide_cpp=True)

    def parse(self, argument):
        if self._parse(argument):
            _usage(FLAGS.main_module_help())


class _FullHelpFlag(flags.BooleanFlag):
    def __init__(self, own_modules):
        super().__init__('helpfull', False, 'show this command\'s flags, then the general ones',
                         allow_hide_cpp=True)
        self._own_modules = own_modules

    def parse(self, argument):
        if self._parse(argument):
            _usage(full_help(self._own_modules))


def install_help(own_modules: Sequence[str]) -> None:
    """Replaces absl's help flags (which exit 1 and list every imported module's flags)."""
    adopt_flags(own_modules)
    app.define_help_flags()
    for name in ('help', '?', 'helpshort', 'helpfull'):
        delattr(FLAGS, name)
    flags.DEFINE_flag(_ShortHelpFlag('help', short_name='?'))
    flags.DEFINE_flag(_ShortHelpFlag('helpshort'))
    flags.DEFINE_flag(_FullHelpFlag(tuple(own_modules)))


def parse_flags(argv, known_only: bool = False, unknown_flag_hint: str = ''):
    """absl's parsing, but a bad flag is a one-line error and exit status 2.

    known_only: leave unknown flags in the arguments (for a launcher that passes them on).
    unknown_flag_hint: added to the error for an unknown flag, e.g. where such flags go.
    """
    try:
        return FLAGS(argv, known_only=known_only)
    except flags.Error as error:
        message = ' '.join(str(error).split())
        if message.startswith('flags ') and ': --' in message:  # drop absl's list of every value
            message = message[message.index(': --') + 2:]
        if unknown_flag_hint and isinstance(error, flags.UnrecognizedFlagError):
            message += f'; {unknown_flag_hint}'
        sys.stderr.write(f'error: {message}\n(--helpshort lists the flags)\n')
        exit_process(EXIT_USAGE)  # a model_dir's flags.txt may have been read from s3:// first


def exit_process(code: int) -> None:
    """Exits with code. After s3:// was used, skips the interpreter's teardown: tensorflow-io
    0.36.0's AWS SDK aborts in it ("pure virtual method called", status 134) even when all the
    work is done, which would turn every success into a failure."""
    if not bucket_probe.used_s3():
        sys.exit(code)
    exit_at_once(code)


def exit_at_once(code: int) -> None:
    """Flushes the logs and exits with code now, from any thread, without the interpreter's
    teardown (os._exit)."""
    try:
        from absl import logging
        logging.flush()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def cli_main(main):
    """Wraps an absl main(argv) so its exit status survives exit_process (see there)."""
    def wrapped(argv):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # noqa: B902  (printed, then a failure status)
            import traceback
            traceback.print_exc()
            code = 1
        exit_process(code or 0)
    return wrapped


def before_flags(step: Callable[[], object], user_errors: Tuple[Type[Exception], ...]) -> None:
    """A step a command takes before absl parses its flags, with run's exit statuses for a
    user error (2) and Ctrl-C (130)."""
    try:
        step()
    except user_errors as error:
        print(f'error: {error}', file=sys.stderr)
        exit_process(EXIT_USAGE)
    except KeyboardInterrupt:
        exit_process(EXIT_INTERRUPTED)


def run(main: Callable, own_modules: Sequence[str],
        user_errors: Tuple[Type[Exception], ...] = (),
        stopped_message: Union[str, Callable[[], str]] = 'stopped',
        **parse_options) -> None:
    """app.run(main) with this project's help and exit statuses.

    user_errors: exceptions that mean bad input (exit 2 with their message).
    stopped_message: what SIGTERM or Ctrl-C prints after 'terminated: ' or 'interrupted: ',
      e.g. '... stopped; resume with the same command', or a function returning it (called
      after the flags are parsed). Signals are handled as common.termination says.
    parse_options: known_only, unknown_flag_hint (see parse_flags).
    """
    install_help(own_modules)

    def guarded_main(argv):
        termination.install()
        try:
            code = main(argv)
            if not termination.requested():
                return code
        except (termination.Terminated, KeyboardInterrupt):
            pass
        except Exception as error:
            # After a signal, any error is the stop: TensorFlow's bare `except:` in
            # Graph.as_graph_element turns an exception raised inside it into a TypeError.
            if not termination.requested():
                if isinstance(error, user_errors):
                    print(f'error: {error}', file=sys.stderr)
                    return EXIT_USAGE
                if isinstance(error, RunFailure):  # a store after retries, a killed worker
                    print(f'error: {error}', file=sys.stderr)
                    return EXIT_FAILURE
                raise
        message = stopped_message() if callable(stopped_message) else stopped_message
        if termination.received() == signal.SIGTERM:
            print(f'\nterminated: {message}', file=sys.stderr)
            return EXIT_TERMINATED
        print(f'\ninterrupted: {message}', file=sys.stderr)
        return EXIT_INTERRUPTED

    # cli_main: the exit status survives tensorflow-io's abort at exit after s3:// use.
    app.run(cli_main(guarded_main), flags_parser=lambda argv: parse_flags(argv, **parse_options))
