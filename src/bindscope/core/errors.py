"""The one exception type bindscope raises for bad input."""


class BindscopeError(ValueError):
    """Bad input or inconsistent files; the message says what to do.

    The CLI prints the message as one line and exits with status 1.
    """


_FULL = {"ENOSPC", "EDQUOT", "EFBIG"}
_DENIED = {"EROFS", "EACCES", "EPERM"}


def disk_error_message(exc: OSError) -> str | None:
    """The one line for a write the disk refused (full, over quota or a file-size limit, read-only, no
    permission), or None for any other OS error.

    Every bindscope writer stages its output and moves it into place only once complete, so in each
    case the previous result is intact; the message says so.
    """
    import errno
    import os

    names = {errno.errorcode.get(exc.errno or -1, "")}
    names |= {name for name in _FULL | _DENIED if os.strerror(getattr(errno, name, 0)) in str(exc)}
    where = f" writing {exc.filename}" if exc.filename else ""
    reason = exc.strerror or str(exc)
    if names & _FULL:
        return (
            f"the disk refused the write{where} ({reason}); nothing was replaced and the previous result is intact: "
            "free some space (or raise the file-size limit) and run the same command again"
        )
    if names & _DENIED:
        return (
            f"cannot write{where} ({reason}); nothing was replaced and the previous result is intact: "
            "choose an --out on a writable disk or fix the folder's permissions"
        )
    return None
