"""The package as installed: one version everywhere it is written, and the torch pair open_clip needs pinned."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import pytest

from cli_checks import run_in_process

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VERSION = PROJECT["version"]


def _as_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_one_version_in_the_package_the_cli_the_changelog_the_readme_and_the_citation() -> None:
    assert version("bindscope") == VERSION, "the installed metadata is stale: reinstall (bash scripts/setup)"
    code, out, _ = run_in_process("--version")
    assert code == 0 and out.strip() == f"bindscope {VERSION}"
    newest = re.search(r"^## (\d+\.\d+\.\d+) \(\d{4}-\d\d-\d\d\)$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert newest is not None and newest[1] == VERSION
    assert f"bindscope {VERSION}" in (ROOT / "README.md").read_text()
    assert re.search(rf"^version: {re.escape(VERSION)}$", (ROOT / "CITATION.cff").read_text(), re.M)


def test_no_page_speaks_of_a_version_after_this_one() -> None:
    words = r"[Cc]hanged in|[Nn]ew in|[Rr]enamed in|[Bb]efore|[Ss]ince|[Uu]ntil"
    mention = re.compile(rf"\b(?:{words}) (\d+\.\d+(?:\.\d+)?)\b")
    later = []
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "src").rglob("*.py")]
    for page in pages:
        for match in mention.finditer(page.read_text()):
            if _as_tuple(match[1]) > _as_tuple(VERSION):
                later.append(f"{page.relative_to(ROOT)}: {match[0]}")
    assert not later, later


def test_the_torch_pair_is_pinned_as_setup_installs_it() -> None:
    pins = {d.split("==")[0]: d.split("==")[1] for d in PROJECT["dependencies"] if d.startswith("torch")}
    assert set(pins) == {"torch", "torchvision"}, PROJECT["dependencies"]
    setup = (ROOT / "scripts" / "setup").read_text()
    assert f"'torch=={pins['torch']}' 'torchvision=={pins['torchvision']}'" in setup
    for key in ("authors", "classifiers", "urls", "license"):
        assert PROJECT.get(key), key
