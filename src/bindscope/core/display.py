"""Paths as reports, summaries and comparisons show them: never absolute, so that a folder travels.

One rule, :func:`display_path`:

- a path inside ``root`` (the folder the document describes: a run folder, a comparison's output folder) is shown
  relative to it, ``datasets/clevr``;
- else a path inside the home folder is shown from it, ``~/runs/demo``;
- else only its last part is shown, behind an ellipsis, ``…/clevr``: a place outside both is one machine's, and its
  full name may name a user.

:func:`display_text` applies the rule to every absolute path inside a text (a model spec such as
``scratch:/home/me/model``, an error message kept as a skip's reason, a JSON block).

>>> display_path("/data/runs/a/datasets/clevr", "/data/runs/a")
'datasets/clevr'
>>> display_path("/srv/shared/clevr", "/data/runs/a")
'…/clevr'
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from bindscope.core.io import written_kind

#: How an elided place is shown: its last part after this.
ELIDED = "…/"
#: An absolute path inside a text: a ``/`` that starts no URL (``//``) and follows no word, dot, ``~`` or ``/``
#: (so ``a/b``, ``1/2``, ``./x`` and ``~/x`` are left alone), up to white space, a quote, ``<``, ``>``, ``|`` or ``,``.
ABSOLUTE = re.compile(r"(?<![\w.~/\\])/(?![/\s])[^\s'\"<>|,;`]*")


def run_folder(path: str | os.PathLike[str]) -> Path | None:
    """The run folder ``path`` lies in (the nearest folder above it that bindscope wrote as a run), or None: the
    folder a result's paths are shown relative to."""
    for parent in Path(os.path.abspath(path)).parents:
        if written_kind(parent) == "run":
            return parent
    return None


def home() -> Path | None:
    """The home folder (``HOME``, resolved), or None where none is known."""
    with contextlib.suppress(RuntimeError, KeyError, OSError):
        return Path(os.path.realpath(Path.home()))
    return None


def _absolute(path: str | os.PathLike[str]) -> Path:
    """``path`` made absolute with its links resolved (as far as it exists)."""
    return Path(os.path.realpath(os.path.abspath(os.path.expanduser(os.fspath(path)))))


def _inside(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` in POSIX form (``.`` for ``root`` itself), or None where it lies outside."""
    if path == root:
        return "."
    if root in path.parents:
        return PurePosixPath(*path.relative_to(root).parts).as_posix()
    return None


def display_path(path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> str:
    """How a path is shown in a report, a summary or a comparison (see the module doc): relative to ``root`` when
    inside it, from ``~`` when inside the home folder, else ``…/<name>``.

    Parameters
    ----------
    path
        Any path; a relative one is taken from the current folder.
    root
        The folder the document describes (None: none, only the home rule and the ellipsis apply).

    Returns
    -------
    str
        The path as shown, never absolute.
    """
    real = _absolute(path)
    if root is not None:
        inside = _inside(real, _absolute(root))
        if inside is not None:
            return inside
    mine = home()
    if mine is not None and mine != Path(mine.anchor):
        from_home = _inside(real, mine)
        if from_home is not None:
            return "~" if from_home == "." else f"~/{from_home}"
    return ELIDED + (real.name or real.anchor.strip("/") or "")


def display_text(text: str, root: str | os.PathLike[str] | None = None) -> str:
    """``text`` with every absolute path in it shown by :func:`display_path` (a path written as given and as
    resolved alike); text without one is returned as it is.

    >>> display_text("scratch:/srv/models/tiny+rand", "/data/run")
    'scratch:…/tiny+rand'
    """
    if "/" not in text and "\\" not in text:
        return text
    return ABSOLUTE.sub(lambda m: _shown(m.group(0), root), text)


def _shown(found: str, root: str | os.PathLike[str] | None) -> str:
    """One absolute path found in a text, shown; a trailing ``.``, ``)`` or ``:`` (prose around it) is kept out."""
    tail = ""
    while found and found[-1] in ".):]}" and len(found) > 1:
        found, tail = found[:-1], found[-1] + tail
    return display_path(found, root) + tail


def display_values(value: Any, root: str | os.PathLike[str] | None = None) -> Any:
    """A JSON-like value (a manifest, a header's inputs) with every absolute path in its texts shown as
    :func:`display_text` shows it; keys, numbers and the structure are kept."""
    if isinstance(value, str):
        return display_text(value, root)
    if isinstance(value, Mapping):
        return {k: display_values(v, root) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [display_values(v, root) for v in value]
    return value
