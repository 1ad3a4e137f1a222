"""The root command group: bindscope's own commands, and one per registered analysis, built when invoked.

The analysis commands are generated from the registry (:mod:`bindscope.cli.generate`), which imports the
analyses' science: ``bindscope --help`` and the other commands stay fast by listing them from
:data:`BUILTIN` until the registry is imported (then from it: an analysis registered in-process, e.g. by a
test, has its command and its line in the help).
"""

from __future__ import annotations

import sys
from typing import Any

from typer.core import TyperCommand, TyperGroup

#: The shipped analyses and their titles, in the order the help lists them (a test keeps them the registry's).
BUILTIN = {
    "probe": "Is object information recoverable? Concept and object probes with chance and controls.",
    "decompose": "Is a scene a sum of its parts? Additive R² and probes after subtracting each model.",
    "complexity": "How complex is the binding function? Approximators fitted on seen objects, scored on unseen ones.",
    "intervene": "Can one object in a scene embedding be edited? Vector-arithmetic edits, scored by retrieval and "
    "probes.",
    "crossmodal": "Does image-text similarity see the binding? Swap tests, retrieval, a linear bridge, half-truths.",
    "geometry": "What shape do object embeddings have? Factorization, orthogonality, rank, linear heads, rank "
    "axes, MDS.",
}
REGISTRY = "bindscope.analyses.registry"


def analysis_titles(load: bool = False) -> dict[str, str]:
    """The analysis commands and their help lines: the registry's, where it is imported (or ``load``), else
    :data:`BUILTIN`."""
    if REGISTRY not in sys.modules and not load:
        return dict(BUILTIN)
    from bindscope.analyses import get_analysis, list_analyses

    names = [n for n in BUILTIN if n in list_analyses()] + [n for n in list_analyses() if n not in BUILTIN]
    return {n: get_analysis(n).title for n in names}


class Commands(TyperGroup):
    """bindscope's commands, then the analyses' (listed by name and title; each built when it is invoked)."""

    def list_commands(self, ctx: Any) -> list[str]:
        own = super().list_commands(ctx)
        return [*(n for n in analysis_titles() if n not in own), *own]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        titles = analysis_titles()
        if cmd_name not in titles and REGISTRY not in sys.modules:
            titles = analysis_titles(load=True)  # an analysis registered beside the shipped ones
        return TyperCommand(cmd_name, help=titles[cmd_name]) if cmd_name in titles else None

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None and name not in self.commands:
            from bindscope.cli.generate import analysis_command

            command = analysis_command(name)
        return name, command, rest
