"""The one exception type bindscope raises for bad input."""

import re
from collections.abc import Iterable


class BindscopeError(ValueError):
    """Bad input or inconsistent files; the message says what to do.

    The CLI prints the message as one line and exits with status 1.
    """


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The one of ``choices`` closest to a mistyped ``word`` (case aside), or None when none is close."""
    import difflib

    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[close[0]] if close else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean X?)`` for the closest of ``choices`` to a mistyped ``word``, or ``""``.

    >>> did_you_mean("clevr2", ["clevr", "clevr2d", "text"])
    ' (did you mean clevr2d?)'
    """
    close = closest(word, choices)
    return f" (did you mean {close}?)" if close else ""


_FULL = {"ENOSPC", "EDQUOT", "EFBIG"}
_DENIED = {"EROFS", "EACCES", "EPERM"}
#: numpy's ``tofile`` (under ``numpy.save``) on a short write: an OSError without errno.
_SHORT_WRITE = re.compile(r"(\d+) requested and (\d+) written")


def naming(exc: OSError, path: object) -> OSError:
    """``exc`` with ``path`` as its file, for the messages: the same error number and reason (numpy's short
    write, which has none, becomes a full disk, ENOSPC)."""
    import errno

    short = _SHORT_WRITE.fullmatch(str(exc)) if exc.errno is None else None
    if short:
        return OSError(errno.ENOSPC, f"a short write: {short[2]} of {short[1]} bytes written", str(path))
    return OSError(exc.errno, exc.strerror or str(exc), str(path))


def disk_error_message(exc: OSError) -> str | None:
    """The one line for a write the disk refused (full, over quota or a file-size limit, read-only, no
    permission), or None for any other OS error.

    Every bindscope writer stages its output and moves it into place only once complete, so in each
    case the previous result is intact; the message says so. A short write (numpy's, which carries no
    errno) is a full disk too: the disk took fewer bytes than it was given.
    """
    import errno
    import os

    names = {errno.errorcode.get(exc.errno or -1, "")}
    names |= {name for name in _FULL | _DENIED if os.strerror(getattr(errno, name, 0)) in str(exc)}
    where = f" to {exc.filename}" if exc.filename else ""
    reason = exc.strerror or str(exc)
    short = _SHORT_WRITE.fullmatch(str(exc)) if exc.errno is None else None
    if short:
        names.add("ENOSPC")
        reason = f"a short write: {short[2]} of {short[1]} bytes written"
    if names & _FULL:
        return (
            f"the disk refused the write{where} ({reason}); nothing was replaced and the previous result is intact: "
            "free some space (or raise the file-size limit) and run the same command again"
        )
    if names & _DENIED:
        return (
            f"cannot write{where.replace(' to ', ' ', 1)} ({reason}); nothing was replaced and the previous result is "
            "intact: "
            "choose an --out on a writable disk or fix the folder's permissions"
        )
    return None


#: What to do about the OS errors that are not the disk refusing a write, by errno name.
_FIXES = {
    "ENAMETOOLONG": "the name is longer than this file system allows: choose a shorter --out or path",
    "ELOOP": "a link loop: remove the loop or choose another path",
    "EBUSY": "it is in use or a mount point: choose a folder below it or another --out",
    "ENOTDIR": "a file stands where a folder belongs: check the path or choose another --out",
    "EISDIR": "a folder stands where a file belongs: check the path or choose another --out",
    "ENOENT": "a file or folder disappeared while the command ran (deleted, or the working folder removed): "
    "restore it and run the same command again",
    "EXDEV": "it crosses file systems: keep the output and its hidden siblings on one disk",
}


def os_error_message(exc: OSError) -> str:
    """The one line for any OS error that reaches the command line: the disk's own message
    (:func:`disk_error_message`) or what failed, where, and what to do."""
    import errno
    import os

    message = disk_error_message(exc)
    if message is not None:
        return message
    name = errno.errorcode.get(exc.errno or -1, "")
    where = f" at {os.fsdecode(exc.filename)}" if exc.filename else ""
    if exc.filename2:
        where += f" (and {os.fsdecode(exc.filename2)})"
    reason = exc.strerror or str(exc)
    fix = _FIXES.get(name, "check the path and its permissions, then run the same command again")
    return f"the system refused an operation{where} ({reason}); {fix}"
