"""The one exception type for mistakes a user must fix, reported as a one-line message, exit 2."""


class UserError(ValueError):
    """Something the user gave (files, flags, a model_dir, a checkpoint) must change.

    The message names the file, pattern, flag or checkpoint and says what to do.
    """
