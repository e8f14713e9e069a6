"""The one exception type for bad user data, reported as a one-line message."""


class DataError(ValueError):
    """Input files or records a user supplied are missing or malformed.

    The message names the file, pattern or flag and says what to do.
    """
