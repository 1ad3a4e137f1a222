"""The README and the documentation site agree with the code: short README, links that resolve, every
command line the docs show names real commands and options, and the generated references cover all."""

from __future__ import annotations

import re
from pathlib import Path

import cli_reference
import hooks
import pytest

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
_FENCED = re.compile(r"^[ \t]*(```+|~~~+)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.S | re.M)
_INLINE = re.compile(r"`([^`\n]+)`")
#: a command line: ``bindscope`` at the start of a line or after a shell separator (not ``import bindscope``)
_COMMAND = re.compile(r"(?:^\s*(?:\$\s+)?|[;|&]\s*|\b(?:do|then)\s+)(?:\.venv/bin/)?bindscope((?:\s+[^\s|;&#)`]+)+)")
#: commands a page defines itself (the toy analysis that docs/development/adding-an-analysis.md registers)
DEFINED_ON_PAGE = {"spread"}


def code_text(markdown: str) -> list[str]:
    """The code of a page: each fenced block (continuations joined) and each inline code span that is a
    command line."""
    blocks = [re.sub(r"\\\n\s*", " ", m.group(2)) for m in _FENCED.finditer(markdown)]
    prose = _FENCED.sub("", markdown)
    spans = [s for s in _INLINE.findall(prose) if re.match(r"(\.venv/bin/)?bindscope\s", s)]  # a command, not a message
    return blocks + spans


@pytest.fixture(scope="module")
def commands() -> dict[tuple[str, ...], set[str]]:
    """Every command's words and its option names."""
    return {entry.path: cli_reference.option_names(entry.command) for entry in cli_reference.walk()}


def command_lines(text: str) -> list[list[str]]:
    """The words after ``bindscope`` of every command line in ``text``."""
    return [m.group(1).split() for line in text.splitlines() for m in _COMMAND.finditer(line)]


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail into docs/ (at most 200)"


@pytest.mark.parametrize("source", [ROOT / "README.md", *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_line_shown_names_real_commands_and_options(source: Path, commands) -> None:
    wrong = []
    for text in code_text(source.read_text()):
        for words in command_lines(text):
            path: tuple[str, ...] = ()
            while words and (*path, words[0]) in commands:
                path, words = (*path, words[0]), words[1:]
            if not path:
                if words and re.fullmatch(r"[a-z][a-z-]*", words[0]) and words[0] not in DEFINED_ON_PAGE:
                    wrong.append(f"bindscope {words[0]}: no such command")
                continue
            for word in words:
                option = word.split("=", 1)[0]
                if re.fullmatch(r"--?[a-z][a-z0-9-]*", option) and option not in commands[path]:
                    wrong.append(f"bindscope {' '.join(path)} {option}: no such option")
    assert not wrong, f"{source.relative_to(ROOT)}: " + "; ".join(sorted(set(wrong)))


def test_readme_links_resolve() -> None:
    text = (ROOT / "README.md").read_text()
    missing = [
        target
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
        if "://" not in target and not (ROOT / target).exists()
    ]
    assert not missing, f"README.md links to missing files: {missing}"


def test_cli_reference_covers_every_command_and_option(commands) -> None:
    reference = cli_reference.cli_reference()
    for path, options in commands.items():
        anchor = "-".join(("bindscope", *path))
        assert f"{{ #{anchor} }}" in reference, f"no section for bindscope {' '.join(path)}"
        section = reference.split(f"{{ #{anchor} }}", 1)[1].split("{ #", 1)[0]
        for option in options - {"--help"}:
            assert f"{option}" in section, f"bindscope {' '.join(path)} {option} is missing from the reference"


def test_every_generated_marker_expands() -> None:
    for page in PAGES:
        text = page.read_text()
        for match in hooks.MARKER.finditer(text):
            assert hooks.generated(match.group(1), match.group(2)).strip(), f"{page}: {match.group(0)} is empty"


def test_an_unknown_marker_stops_the_build() -> None:
    with pytest.raises(ValueError, match="unknown docs marker"):
        hooks.expand("<!-- generated: nothing -->")


def test_the_option_check_catches_a_wrong_option(commands) -> None:
    assert command_lines("bindscope probe emb --out r --no-such-thing") == [
        ["probe", "emb", "--out", "r", "--no-such-thing"]
    ]
    assert "--no-such-thing" not in commands[("probe",)]
