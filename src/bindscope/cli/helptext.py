"""The help as a reader wants it: value names (``--out FOLDER``, ``--seed N``), not Python types, and each
command's one-line summary as one line.

typer shows a parameter without a metavar by its Python type (``<path>``, ``<int>``, ``<bool>``);
:func:`polish_help` gives every parameter of a command tree a name that says what to write instead,
unless the parameter names its own. Choices keep their list of values (``<image|text>``). A command's summary
in its group's list is the first paragraph of its help with the source's line breaks removed.
"""

from __future__ import annotations

import inspect
from typing import Any

#: Path parameters that take a file; every other path is a folder.
FILE_PARAMS = frozenset({"array", "csv", "settings_file", "singles", "config", "checkpoint"})

#: Number parameters whose unit says more than N or X.
NUMBER_NAMES = {"memory": "GB", "exact_budget_s": "SECONDS", "lr": "RATE"}

#: Text parameters named by their kind rather than by their own name.
TEXT_NAMES = {
    "model": "SPEC",
    "model_spec": "SPEC",
    "spec": "SPEC",
    "set_": "KEY=VALUE",
    "seeds": "SEEDS",
    "install_completion": "[SHELL]",
    "show_completion": "[SHELL]",
}


def _bare_name(param: Any) -> str:
    """The parameter's name without the generated commands' ``opt_`` prefix and sub-setting path."""
    name = str(param.name)
    name = name.removeprefix("opt_")
    return name.rsplit("__", 1)[-1]


def value_name(param: Any) -> str | None:
    """What to write for ``param``'s value: ``FOLDER``, ``FILE``, ``N``, ``SPEC``...; ``""`` for a flag (it takes
    none); None for a choice (its values are listed)."""
    if getattr(param, "is_flag", False):
        return ""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None and descriptor.is_choice:
        return None
    kind = param.bare_type() if hasattr(param, "bare_type") else "str"
    name = _bare_name(param)
    if "Path" in kind:
        return "FILE" if name in FILE_PARAMS else "FOLDER"
    if kind in ("int", "float"):
        if name in NUMBER_NAMES:
            return NUMBER_NAMES[name]
        if "fraction" in name:
            return "FRACTION"
        return "N" if kind == "int" else "X"
    return TEXT_NAMES.get(name, name.upper().rstrip("_"))


def _name_argument(param: Any) -> None:
    """An argument shows its own name (``DATASET``) and, in the type column, what it takes (``FOLDER``)."""
    kind = value_name(param)
    if param.metavar is None:
        param.metavar = _bare_name(param).upper()
    if kind is not None:
        many = "..." if param.nargs != 1 else ""
        param.display_type_rich = lambda ctx: kind + many  # typer shows an argument's Python type otherwise


def name_params(command: Any) -> None:
    """Name the values of ``command``'s own parameters, its ``--help`` included (in place)."""
    command.get_help_option(command.context_class(command))  # made (and kept) on first use: name it too
    for param in [*getattr(command, "params", []), getattr(command, "_help_option", None)]:
        if param is None:
            continue
        if param.param_type_name == "argument":
            _name_argument(param)
        elif param.metavar is None:
            name = value_name(param)
            if name is not None:
                param.metavar = name


def summarise(command: Any) -> None:
    """The command's summary line in its group's list: its help's first paragraph, on one line."""
    if getattr(command, "short_help", None) is None and getattr(command, "help", None):
        first = inspect.cleandoc(command.help).split("\n\n", 1)[0]
        command.short_help = " ".join(first.split())


def polish_help(command: Any, _seen: set[int] | None = None) -> Any:
    """Value names and one-line summaries for ``command`` and its subcommands (in place); returns ``command``."""
    seen = set() if _seen is None else _seen
    if command is None or id(command) in seen:
        return command
    seen.add(id(command))
    name_params(command)
    summarise(command)
    for sub in getattr(command, "commands", {}).values():
        polish_help(sub, seen)
    return command
