"""The code blocks of the documentation pages, as steps a test runs in order (the docs cannot rot).

A page's ``bash`` and ``python`` blocks run, top to bottom, in one fresh folder (the page's workspace):
bash through real ``bindscope`` processes; python blocks saved as a script, as a user saves one (no
``if __name__ == "__main__":`` guard), consecutive python blocks forming one script.
An HTML comment on the line before a block changes that:

- ``<!-- docs: not run (REASON) -->``  shown, not run (it needs the hub, a GPU, hours); the reason is required.
- ``<!-- docs: file PATH -->``          the block (any language) is written to PATH in the workspace first,
  so the YAML a page shows is the file its commands read.

A page may start from another page's workspace: ``<!-- docs: after getting-started/cli.md -->`` anywhere on
the page means its blocks run in a copy of the folder that page left behind. Blocks in other languages
(yaml, text, console, json) are only shown.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
RUNNABLE = ("bash", "python")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)(?P<info>[^\n`]*)$")
_DIRECTIVE = re.compile(r"<!--\s*docs:\s*(?P<kind>not run|file|after|limit)\s*(?P<arg>.*?)\s*-->")
_LIMIT = re.compile(r"(?P<seconds>\d+)\s*\((?P<reason>.+)\)")
#: What makes a line more than one plain command (then bash runs it).
_SHELL = re.compile(r"[|<>;&$`*?(){}\[\]~]|^\s*(for|if|while|export|cd)\b")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str
    line: int  # 1-based line of its opening fence
    language: str
    code: str
    skip_reason: str | None = None
    file: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


class DocFormatError(ValueError):
    """A page's directives are malformed (a test reports it as a failure)."""


def page_blocks(page: str) -> list[Block]:
    """Every fenced block of ``docs/<page>``, with the directive on the line before it."""
    lines = (DOCS / page).read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence = match["indent"], match["fence"]
        language = (match["info"].strip().split() or [""])[0].lower().lstrip(".")
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        if j == len(lines):
            raise DocFormatError(f"{page}:{i + 1}: a code block is never closed")
        previous = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        directive = _DIRECTIVE.fullmatch(previous)
        skip = file = None
        if directive and directive["kind"] == "not run":
            skip = directive["arg"].strip("() ")
            if not skip:
                raise DocFormatError(f"{page}:{i}: 'docs: not run' needs a reason, e.g. (needs the hub)")
        elif directive and directive["kind"] == "file":
            file = directive["arg"]
            if not file or Path(file).is_absolute() or ".." in Path(file).parts:
                raise DocFormatError(f"{page}:{i}: 'docs: file' needs a relative path inside the workspace")
        blocks.append(Block(page, i + 1, language, "\n".join(body) + "\n", skip, file))
        i = j + 1
    return blocks


def page_prerequisite(page: str) -> str | None:
    """The page whose workspace this page starts from (``<!-- docs: after PAGE -->``), if any."""
    found = [m["arg"] for m in _DIRECTIVE.finditer((DOCS / page).read_text()) if m["kind"] == "after"]
    if len(found) > 1:
        raise DocFormatError(f"{page}: more than one 'docs: after' line")
    if found and not (DOCS / found[0]).is_file():
        raise DocFormatError(f"{page}: 'docs: after {found[0]}' names no page under docs/")
    return found[0] if found else None


def commands(code: str) -> list[str]:
    """A bash block's commands: continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    out = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            out.append(line)
    return out


def plain_bindscope(line: str) -> list[str] | None:
    """The arguments of a line that is one plain ``bindscope ...`` command (no shell syntax), else None."""
    code = line.split(" #", 1)[0]
    words = shlex.split(code, comments=True)
    if not words or words[0] != "bindscope" or _SHELL.search(code):
        return None
    return words[1:]


def page_limit(page: str) -> tuple[float, str] | None:
    """A page's own time limit and its reason (``<!-- docs: limit SECONDS (REASON) -->``), if it has one."""
    for match in _DIRECTIVE.finditer((DOCS / page).read_text()):
        if match["kind"] == "limit":
            limit = _LIMIT.fullmatch(match["arg"])
            if limit is None:
                raise DocFormatError(f"{page}: write 'docs: limit SECONDS (REASON)', e.g. limit 40 (trains a model)")
            return float(limit["seconds"]), limit["reason"]
    return None


def runnable_pages(folder: str) -> list:
    """The pages under ``docs/<folder>`` whose blocks the suite runs, as pytest params."""
    return page_params(str(p.relative_to(DOCS)) for p in sorted((DOCS / folder).glob("*.md")))


def page_params(pages: Iterable[str]) -> list:
    """Pages (paths relative to ``docs/``) as pytest params, a page's own time limit as its
    ``duration_limit`` mark."""
    import pytest

    params = []
    for page in pages:
        limit = page_limit(page)
        marks = [pytest.mark.duration_limit(limit[0], reason=limit[1])] if limit else []
        params.append(pytest.param(page, marks=marks, id=page))
    return params
