"""The one exception type for mistakes a user must fix (exit 2), and one-line TensorFlow errors."""


class UserError(ValueError):
    """Something the user gave (files, flags, a model_dir, a checkpoint) must change.

    The message names the file, pattern, flag or checkpoint and says what to do.
    """


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
