"""The CLI reference page, generated from the ``bindscope`` typer app (every command, argument and option).

Nothing here is kept by hand: a command, an option, its choices, default and help come from the click
objects the app builds, the analysis commands from their settings classes (:mod:`bindscope.cli.generate`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import typer

#: Rich style tags typer allows in help strings ([bold], [/bold], [/]); [required] and [default: x] stay.
_MARKUP = re.compile(r"\[/?(?:bold|italic|dim|underline|red|green|yellow|blue|magenta|cyan)?\]")


@dataclass(frozen=True)
class Command:
    """One command of the tree: its words after ``bindscope`` and the click command."""

    path: tuple[str, ...]
    command: Any

    @property
    def name(self) -> str:
        return " ".join(("bindscope", *self.path))

    @property
    def anchor(self) -> str:
        return "-".join(("bindscope", *self.path))


def root_command() -> Any:
    """The command group behind ``bindscope`` (every command module imported, as the console script does)."""
    from bindscope.cli import app

    return typer.main.get_command(app)


def _resolve(group: Any, ctx: Any, name: str) -> Any:
    """A subcommand as it runs: an analysis command is generated from its settings when resolved."""
    _, command, _ = group.resolve_command(ctx, [name])
    assert command is not None, name
    return command


def walk(group: Any = None, path: tuple[str, ...] = ()) -> Iterator[Command]:
    """Every command under ``group`` (default: the root), depth first in the order the help lists them."""
    from typer._click import Context

    group = group or root_command()
    ctx = Context(group, info_name=" ".join(("bindscope", *path)))
    for name in group.list_commands(ctx):
        command = _resolve(group, ctx, name)
        if getattr(command, "hidden", False):
            continue
        yield Command((*path, name), command)
        if is_group(command):
            yield from walk(command, (*path, name))


def is_group(command: Any) -> bool:
    """Whether a command has subcommands (typer's own click keeps groups apart by their methods)."""
    return hasattr(command, "list_commands")


def _params(command: Any) -> list[Any]:
    return [p for p in command.params if not getattr(p, "hidden", False)]


def option_names(command: Any) -> set[str]:
    """Every ``--long`` and ``-s`` name of a command's options (``--help`` included)."""
    names = {"--help"}
    for param in _params(command):
        names.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("-"))
    return names


def _cell(text: str) -> str:
    return " ".join(_MARKUP.sub("", text).split()).replace("|", "\\|")


def _usage(entry: Command, ctx: Any) -> str:
    pieces = [p.strip("{}").upper() if p.startswith("{") else p for p in entry.command.collect_usage_pieces(ctx)]
    return " ".join((entry.name, *pieces))


def command_section(entry: Command) -> str:
    """One command in markdown: heading, usage, help, then its arguments and options as ``--help`` prints
    them (names and value, then help with default), or its subcommands."""
    from typer._click import Context

    ctx = Context(entry.command, info_name=entry.name)
    level = "#" * min(len(entry.path) + 1, 4)
    help_text = _MARKUP.sub("", entry.command.help or "").strip()
    lines = [f"{level} `{entry.name}` {{ #{entry.anchor} }}", "", "```", _usage(entry, ctx), "```", "", help_text, ""]
    if is_group(entry.command):
        lines += ["| command | what it does |", "|---|---|"]
        for name in entry.command.list_commands(ctx):
            sub = _resolve(entry.command, ctx, name)
            lines.append(f"| [`{name}`](#{entry.anchor}-{name}) | {_cell(sub.get_short_help_str(120))} |")
    elif _params(entry.command):
        lines += ["| argument / option | help |", "|---|---|"]
        for param in _params(entry.command):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            names, help_cell = record
            if not any(o.startswith("-") for o in param.opts):  # an argument: its name as in the usage
                names = names.split()[0].upper()
            lines.append(f"| `{_cell(names)}` | {_cell(help_cell)} |")
    lines.append("")
    return "\n".join(lines)


def cli_reference() -> str:
    """The whole CLI reference: the root's commands, then every command's section."""
    from typer._click import Context

    root = root_command()
    ctx = Context(root, info_name="bindscope")
    lines = [
        "Every command, argument and option below is generated from the `bindscope` app when the site is built;",
        "`bindscope COMMAND --help` prints the same. Analysis commands are generated from their settings classes:",
        "every field is an option, and `--set KEY=VALUE` / `--settings FILE.yaml` take the same fields.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for name in root.list_commands(ctx):
        sub = _resolve(root, ctx, name)
        lines.append(f"| [`{name}`](#bindscope-{name}) | {_cell(sub.get_short_help_str(120))} |")
    lines.append("")
    lines += [command_section(entry) for entry in walk(root)]
    return "\n".join(lines)
