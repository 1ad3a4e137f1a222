"""The installed package version."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("bindscope")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+unknown"


def utc_now() -> str:
    """The current UTC time to the second, ISO 8601 (when a file was made)."""
    import datetime as _dt

    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def stamp() -> dict[str, str]:
    """The provenance stamp every manifest and summary carries: bindscope's version and when."""
    return {"bindscope_version": __version__, "created": utc_now()}
