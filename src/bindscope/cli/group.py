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

from bindscope.cli.helptext import name_params, polish_help

#: The shipped analyses and their titles, in the order the help lists them (a test keeps them the registry's).
BUILTIN = {
    "probe": "Is object information recoverable? Concept and object probes with chance and controls.",
    "decompose": "Is a scene a sum of its parts? Additive R² and probes after subtracting each model.",
    "intervene": "Can one object in a scene embedding be edited? Vector-arithmetic edits, scored by retrieval and "
    "probes.",
    "complexity": "How complex is the binding function? Approximators fitted on seen objects, scored on unseen ones.",
    "crossmodal": "Does image-text similarity see the binding? Swap tests, retrieval, a linear bridge, half-truths.",
    "geometry": "What shape do object embeddings have? Factorization, orthogonality, rank, linear heads, rank "
    "axes, MDS.",
}
REGISTRY = "bindscope.analyses.registry"

#: The help's command panels in the order of the workflow, each with its commands in order; the analysis
#: commands (the shipped ones in the paper's order, then any registered beside them) join "analyses".
ANALYSES_PANEL = "3. Analyses (one question each)"
PANELS: dict[str, tuple[str, ...]] = {
    "Everything in one command": ("demo", "run", "report", "compare", "export"),
    "1. Datasets": ("dataset", "presets"),
    "2. Models and embeddings": ("models", "embed", "embeddings", "cache"),
    ANALYSES_PANEL: ("analyses",),
    "4. Controlled models trained from scratch": ("scratch",),
}


def analysis_titles(load: bool = False) -> dict[str, str]:
    """The analysis commands and their help lines: the registry's, where it is imported (or ``load``), else
    :data:`BUILTIN`."""
    if REGISTRY not in sys.modules and not load:
        return dict(BUILTIN)
    from bindscope.analyses import get_analysis, list_analyses

    names = [n for n in BUILTIN if n in list_analyses()] + [n for n in list_analyses() if n not in BUILTIN]
    return {n: get_analysis(n).title for n in names}


class Commands(TyperGroup):
    """bindscope's commands, then the analyses' (listed by name and title; each built when it is invoked), every
    value named in the help (:mod:`bindscope.cli.helptext`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        polish_help(self)
        for panel, names in PANELS.items():
            for name in names:
                command: Any = self.commands.get(name)
                if command is not None:
                    command.rich_help_panel = panel

    def get_params(self, ctx: Any) -> list[Any]:
        name_params(self)  # typer adds the completion options after the group is made
        return super().get_params(ctx)

    def list_commands(self, ctx: Any) -> list[str]:
        own = super().list_commands(ctx)
        analyses = list(analysis_titles())
        names = [*own, *(n for n in analyses if n not in own)]
        return sorted(names, key=lambda n: workflow_position(n, own, analyses))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        titles = analysis_titles()
        if cmd_name not in titles and REGISTRY not in sys.modules:
            titles = analysis_titles(load=True)  # an analysis registered beside the shipped ones
        if cmd_name not in titles:
            return None
        return TyperCommand(cmd_name, help=titles[cmd_name], rich_help_panel=ANALYSES_PANEL)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None and name not in self.commands:
            from bindscope.cli.generate import analysis_command

            command = polish_help(analysis_command(name))
            command.rich_help_panel = ANALYSES_PANEL
        return name, command, rest


def workflow_position(name: str, own: list[str], analyses: list[str]) -> tuple[int, int]:
    """Where a command comes in the help: its panel's place in :data:`PANELS`, then its place in the panel (an
    analysis command: its place in ``analyses``, the registry's order, before ``analyses`` the command); a command
    in no panel comes last."""
    panels = list(PANELS)
    for place, names in enumerate(PANELS.values()):
        if name in names:
            return place, len(analyses) + names.index(name)
    if name not in own:
        return panels.index(ANALYSES_PANEL), analyses.index(name)
    return len(panels), own.index(name)
