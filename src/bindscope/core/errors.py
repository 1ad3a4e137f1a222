"""The one exception type bindscope raises for bad input."""

import re


class BindscopeError(ValueError):
    """Bad input or inconsistent files; the message says what to do.

    The CLI prints the message as one line and exits with status 1.
    """


_FULL = {"ENOSPC", "EDQUOT", "EFBIG"}
_DENIED = {"EROFS", "EACCES", "EPERM"}
#: numpy's ``tofile`` (under ``numpy.save``) on a short write: an OSError without errno.
_SHORT_WRITE = re.compile(r"(\d+) requested and (\d+) written")


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
    where = f" writing {exc.filename}" if exc.filename else ""
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
            f"cannot write{where} ({reason}); nothing was replaced and the previous result is intact: "
            "choose an --out on a writable disk or fix the folder's permissions"
        )
    return None
