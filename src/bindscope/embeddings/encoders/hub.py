"""Hub access shared by the backends: one commit per load, the cache when the hub is out of reach, one-line errors.

:func:`pin` fetches one small file of a repo (``config.json``, ``modules.json``...) and pins the rest of
the load to the commit it came from, so that every file of a model comes from one commit and the
manifest can record it. Before that it asks the hub once, without retries, whether it answers: when
``HF_HUB_OFFLINE`` is set or the hub cannot be reached (refused, timed out, a 5xx answer), the whole
load reads the local cache only, instead of letting each library call retry for half a minute.
:func:`hub_error` turns what the libraries raise (hub answers, broken connections, cache misses) into
one :class:`BindscopeError` line that says what to do.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders.base import short_reason, snapshot_commit

#: HTTP answers that mean "the hub is not serving now" rather than "no such thing".
_UNAVAILABLE = (408, 429, 500, 502, 503, 504)


@dataclass(frozen=True)
class HubFiles:
    """Where one load reads a hub repo's files.

    Attributes
    ----------
    repo : str
        The hub id.
    commit : str or None
        The commit every file is read at (None until :func:`pin` resolved it).
    offline : bool
        Read the local cache only: ``HF_HUB_OFFLINE`` is set, or the hub could not be reached.
    unreachable : str or None
        Why the hub could not be reached (None when it answered or was not asked).
    folder : str
        How to give the backend a local folder instead, for error messages.
    """

    repo: str
    commit: str | None
    offline: bool
    unreachable: str | None = None
    folder: str = "a local folder"

    def revision(self, asked: str | None = None) -> str | None:
        """The revision to pass to a library: the pinned commit, else what was asked for."""
        return self.commit or asked


def offline_env() -> bool:
    """HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE as set now, or as huggingface_hub read them when it was imported."""
    from huggingface_hub import constants

    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in ("1", "true", "yes", "on") or bool(constants.HF_HUB_OFFLINE)


def endpoint() -> str:
    """The hub huggingface_hub talks to (``HF_ENDPOINT`` as it was when huggingface_hub was imported)."""
    from huggingface_hub import constants

    return str(constants.ENDPOINT)


def pin(
    spec: object,
    repo: str,
    filename: str,
    revision: str | None,
    what: str,
    missing: str = "",
    folder: str = "",
    optional: bool = False,
) -> tuple[HubFiles, str | None]:
    """Fetch ``filename`` of ``repo`` at ``revision`` and pin the load to the commit it resolves to.

    Parameters
    ----------
    spec : object
        The model spec, for error messages.
    repo, filename, revision : str
        What to fetch (``revision`` None: ``main``).
    what : str
        What the file is, for error messages (e.g. ``config.json``).
    missing : str
        What to do when the repo has no such file (see :func:`hub_error`).
    folder : str
        How to give the backend a local folder instead (default: "a local folder").
    optional : bool
        Return no path (and no commit) when the repo has no such file, instead of raising.

    Returns
    -------
    HubFiles, str or None
        Where the rest of the load reads from, and the local path of ``filename``.
    """
    offline = offline_env()
    try:
        unreachable = None if offline else probe(repo, filename, revision)
    except Exception as exc:  # what the probe did not expect, as one line too
        raise hub_error(spec, HubFiles(repo, None, offline), what, exc, revision, missing) from None
    files = HubFiles(repo, None, offline or unreachable is not None, unreachable, folder or "a local folder")
    path = _download(spec, files, filename, revision, what, missing, optional)
    if path is None:
        return files, None
    return HubFiles(repo, snapshot_commit(path), files.offline, unreachable, files.folder), path


def fetch(spec: object, files: HubFiles, filename: str, what: str, optional: bool = False) -> str | None:
    """The local path of one more file of a pinned repo (downloaded at the pinned commit when online).

    With ``optional``, None when the repo has no such file (offline: when the cache has none).
    """
    return _download(spec, files, filename, files.revision(), what, "", optional)


def _download(
    spec: object, files: HubFiles, filename: str, revision: str | None, what: str, missing: str, optional: bool
) -> str | None:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError, RemoteEntryNotFoundError

    try:
        with quiet_hub_logs():
            return str(hf_hub_download(files.repo, filename, revision=revision, local_files_only=files.offline))
    except Exception as exc:  # hub answers, broken connections, cache misses: all become one line
        absent = isinstance(exc, RemoteEntryNotFoundError) or (
            files.offline and isinstance(exc, LocalEntryNotFoundError)
        )
        if optional and absent:
            return None
        raise hub_error(spec, files, what, exc, revision, missing) from None


def probe(repo: str, filename: str, revision: str | None) -> str | None:
    """Ask the hub once, without retries, for a file's metadata: None when it answers, else why it could not.

    An answer such as "no such repo" counts as an answer (the download that follows reports it).
    """
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError

    try:
        with quiet_hub_logs():
            get_hf_file_metadata(hf_hub_url(repo, filename, revision=revision))
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        return short_reason(exc, 120) if status is None or status in _UNAVAILABLE else None
    except Exception as exc:
        if is_transport_error(exc):
            return short_reason(exc, 120)
        raise
    return None


def is_transport_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a failed connection (refused, reset, timed out, cut short), not an answer of the hub."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if isinstance(exc, (HfHubHTTPError, OfflineModeIsEnabled)):
        return False
    if isinstance(exc, OSError) and "Consistency check failed" in str(exc):  # a download that ended early
        return True
    return isinstance(exc, _transport_errors())


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Connection failures of the HTTP clients huggingface_hub may use (httpx2 now, httpx before)."""
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for name in ("httpx2", "httpx"):
        try:
            errors.append(importlib.import_module(name).TransportError)
        except (ImportError, AttributeError):
            continue
    return tuple(errors)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, outermost first."""
    seen: list[BaseException] = []
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop(0)
        if any(current is s for s in seen):
            continue
        seen.append(current)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return seen


def hub_error(
    spec: object, files: HubFiles, what: str, exc: BaseException, revision: str | None = None, missing: str = ""
) -> BindscopeError:
    """One line for a failed hub load: what went wrong and what to do.

    Parameters
    ----------
    spec : object
        The model spec.
    files : HubFiles
        Where the load was reading from.
    what : str
        What was being loaded (``config.json``, ``weights``, ``tokenizer``...).
    exc : BaseException
        What the library raised (its cause chain is searched for the hub's answer).
    revision : str or None
        The revision asked for, for "no such revision".
    missing : str
        What to do when the repo lacks the file (default: give a complete repo or a local folder).
    """
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    chain = _chain(exc)

    def first(kind: type[BaseException] | tuple[type[BaseException], ...]) -> BaseException | None:
        return next((e for e in chain if isinstance(e, kind)), None)

    repo, where = files.repo, f"the hub at {endpoint()}"
    if first(GatedRepoError):
        return BindscopeError(
            f"{spec}: {repo} is gated on the hub; accept its terms there and log in (hf auth login), "
            f"or give {files.folder}"
        )
    if first(RepositoryNotFoundError):
        return BindscopeError(
            f"{spec}: no model {repo!r} on {where} (or it is private: log in with hf auth login); "
            f"check the id, or give {files.folder}"
        )
    if first(RevisionNotFoundError):
        return BindscopeError(f"{spec}: {repo} has no revision {revision!r}; give an existing branch, tag or commit")
    if first(RemoteEntryNotFoundError) or "does not appear to have a file named" in str(exc):
        at = f" at commit {files.commit}" if files.commit else ""
        todo = missing or f"give a repo that holds the whole model, or {files.folder}"
        return BindscopeError(f"{spec}: {repo} has no {what}{at}; {todo}")
    cut = next((e for e in chain if is_transport_error(e)), None)
    if cut is not None or any(
        isinstance(e, HfHubHTTPError) and e.response is not None and e.response.status_code in _UNAVAILABLE
        for e in chain
    ):
        reason = short_reason(cut or exc, 150)
        return BindscopeError(
            f"{spec}: could not reach {where} while loading its {what} ({reason}); check the connection or "
            "set HF_ENDPOINT, then run the same command again (or run offline with HF_HUB_OFFLINE=1 once "
            "the model is cached)"
        )
    if files.offline or first((LocalEntryNotFoundError, OfflineModeIsEnabled)):
        if files.unreachable:
            return BindscopeError(
                f"{spec} could not be loaded: {where} could not be reached ({files.unreachable}) and its {what} "
                f"is not in the local hub cache; check the connection or set HF_ENDPOINT, or give {files.folder}"
            )
        return BindscopeError(
            f"{spec} could not be loaded (no network or no such model?): its {what} is not in the local hub "
            f"cache and HF_HUB_OFFLINE is set; give {files.folder}, or unset HF_HUB_OFFLINE and check the id "
            "and your connection"
        )
    return BindscopeError(
        f"{spec} could not be loaded from {where}: {what}: {short_reason(exc)}; check the id and your "
        f"connection, or give {files.folder}"
    )


@contextlib.contextmanager
def quiet_hub_logs() -> Iterator[None]:
    """Hide huggingface_hub's retry warnings while a load runs (a failure ends in one BindscopeError line)."""
    logger = logging.getLogger("huggingface_hub")
    before = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(before)


@contextlib.contextmanager
def held_logs(name: str = "transformers") -> Iterator[None]:
    """Hold back what the logger ``name`` logs while a load runs: replayed when the load succeeds, dropped when it
    raises (a failed load ends in one BindscopeError line, not a library's report of it above that line)."""
    importlib.import_module(name)  # the library sets up its logger on import: before it is swapped out here
    logger = logging.getLogger(name)
    held = _Held()
    handlers, propagate = logger.handlers, logger.propagate
    logger.handlers, logger.propagate = [held], False
    try:
        yield
    finally:
        logger.handlers, logger.propagate = handlers, propagate
    for record in held.records:
        logging.getLogger(record.name).handle(record)


class _Held(logging.Handler):
    """A log handler that keeps the records it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
