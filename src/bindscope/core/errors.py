"""The one exception type bindscope raises for bad input."""


class BindscopeError(ValueError):
    """Bad input or inconsistent files; the message says what to do.

    The CLI prints the message as one line and exits with status 1.
    """
