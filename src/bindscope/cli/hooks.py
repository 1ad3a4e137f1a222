"""What an analysis's command adds to the generated one: small declared hooks, by analysis name.

The command of a registered analysis is generated from its settings and inputs (:mod:`bindscope.cli.generate`);
an analysis without hooks gets the plain form, ``bindscope NAME EMB_DIR --out DIR [options]``. The hooks here
keep the forms the shipped commands have: the folders given by position, complexity's named budget, ``intervene
--table`` and ``geometry EMB...``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Optional

import typer

from bindscope.core.errors import BindscopeError

Values = dict[str, Any]  # the command's parameters by name, as typer gives them


@dataclass(frozen=True)
class Positional:
    """A folder given by position: the embeddings (``kind="embeddings"``) or the second folder (``"other"``)."""

    param: str
    kind: str
    help: str
    metavar: str | None = None
    many: bool = False


@dataclass(frozen=True)
class Hooks:
    """What one analysis's command adds to the generated one.

    ``positionals``: the folders given by position (default: EMB_DIR, and OTHER_DIR where the analysis takes a
    second folder). ``distributed``: ``--executor/--address/--memory``. ``input_help``: the help of an input
    option (``singles``, ``probes`` ...) where not the generic one. ``choices`` / ``defaults``: a (dotted) key's
    option as a choice, and its shown default. ``extras``: further parameters. ``normalise``: each source of
    settings (file, ``--set``, options) before they are merged; ``prepare``: the merged settings before they are
    validated. ``before``: runs first, with the parameters; True when it did the command's work. ``run``: instead of
    reading the inputs and running the analysis into ``--out``.
    """

    positionals: tuple[Positional, ...] = ()
    distributed: bool = False
    input_help: Mapping[str, str] = field(default_factory=dict)
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    extras: tuple[inspect.Parameter, ...] = ()
    normalise: Callable[[Values], Values] = lambda data: data
    prepare: Callable[[Values], Values] = lambda data: data
    before: Callable[[Values], bool] | None = None
    run: Callable[[str, Any, Values], None] | None = None


def option(param: str, annotation: Any, default: Any = None) -> inspect.Parameter:
    """A keyword parameter of a generated command."""
    return inspect.Parameter(param, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)


EMB_HELP = "An embedding folder (embeddings.npy + manifest.json)."
PROBES_HELP = (
    "Frozen probes: a probe folder or a `bindscope probe` output folder. "
    "Default: fit them here (scene split 0.4, --probe-seed)."
)


# -- complexity: a budget by name, with overrides ----------------------------------------------------------------
#: ``--budget``: a named budget, or auto (full on CUDA, cpu otherwise).
BUDGET_NAMES = ("auto", "cpu", "full", "paper")


def budget_by_name(data: Values) -> Values:
    """``budget: paper`` (a file, ``--set``) as ``budget: {name: paper}``, so that overrides merge into it."""
    budget = data.get("budget")
    return {**data, "budget": {"name": budget}} if isinstance(budget, str) else data


def paper_budget(data: Values) -> Values:
    """``--parity paper`` chooses the paper budget where neither a budget (other than auto) nor a protocol is given."""
    budget = data.get("budget")
    budget = dict(budget) if isinstance(budget, Mapping) else {}
    if data.get("parity") == "paper" and budget.get("name", "auto") == "auto" and "protocol" not in budget:
        return {**data, "budget": {**budget, "name": "paper"}}
    return data


# -- intervene: --table tabulates result folders -----------------------------------------------------------------
TABLE = option(
    "table",
    Annotated[
        bool,
        typer.Option(
            "--table",
            help="Write the paper's table (table.md, table.tex: dataset x model x shared/different x bank x "
            "probe/retrieval at k = 1) from the result folders given, instead of running edits.",
        ),
    ],
    False,
)


def table_or_one_folder(values: Values) -> bool:
    """``--table``: tabulate the result folders given (done); else there is one embedding folder."""
    paths = values["paths"]
    if values["table"]:
        from bindscope.pipeline.combine.intervene import write_tables

        for path in write_tables(paths, values["out"], overwrite=values["overwrite"]):
            typer.echo(f"wrote {path}")
        return True
    if len(paths) != 1:
        raise BindscopeError(
            f"give one embedding folder (got {len(paths)} paths); to tabulate result folders, add --table"
        )
    return False


# -- geometry: several folders, compared -------------------------------------------------------------------------
LABELS = option(
    "labels",
    Annotated[
        Optional[str], typer.Option(help="Names of the folders' results, comma-separated (default: folder names).")
    ],
)


def run_geometry_command(name: str, settings: Any, values: Values) -> None:
    """Geometry of each folder given and, with several, their comparison (one progress bar)."""
    from bindscope.cli.common import parse_list, progress_bar
    from bindscope.cli.show import show_geometry
    from bindscope.pipeline.combine.geometry import run_geometry

    labels = parse_list(values["labels"], str, "--labels", "clip,siglip")
    with progress_bar(name, "step", values["quiet"]) as advance:
        run = run_geometry(
            values["emb_dirs"],
            values["out"],
            settings,
            singles=values["singles"],
            dataset=values["dataset"],
            labels=labels,
            overwrite=values["overwrite"],
            progress=advance,
        )
    show_geometry(name, run, settings, values["out"])


HOOKS: dict[str, Hooks] = {
    "probe": Hooks(distributed=True),
    "complexity": Hooks(
        distributed=True,
        input_help={"probes": PROBES_HELP},
        choices={"budget.name": BUDGET_NAMES},
        defaults={"budget.name": "auto"},
        normalise=budget_by_name,
        prepare=paper_budget,
    ),
    "intervene": Hooks(
        positionals=(
            Positional(
                "paths",
                "embeddings",
                "An embedding folder (embeddings.npy + manifest.json); with --table, the intervene result folders "
                "to tabulate.",
                "PATH",
                many=True,
            ),
        ),
        input_help={
            "probes": PROBES_HELP.replace("Frozen probes", "Frozen concept probes"),
            "singles": "The single-object bank: the folder of `bindscope embed --single-objects` for this model. "
            "Default: a sibling folder of the embeddings holding it; without one the single bank is reported absent.",
        },
        extras=(TABLE,),
        before=table_or_one_folder,
    ),
    "crossmodal": Hooks(
        positionals=(
            Positional("image_dir", "embeddings", "The image embedding folder.", "IMAGE_DIR"),
            Positional(
                "text_dir",
                "other",
                "The text embedding folder of the same dataset and model (its captions).",
                "TEXT_DIR",
            ),
        ),
        input_help={
            "singles": "The text single-object captions (`bindscope embed --single-objects` on the text modality, "
            "or `bindscope embeddings import --singles`), for half-truths. Default: a sibling folder of TEXT_DIR "
            "holding them; without one, half-truths are absent."
        },
    ),
    "geometry": Hooks(
        positionals=(
            Positional(
                "emb_dirs",
                "embeddings",
                "Embedding folders: scene embeddings (their single-object bank is found beside them) or "
                "single-object folders (`bindscope embed --single-objects`). Several folders (models or layers) are "
                "also compared: factorization R² against linear-head generalisation.",
                "EMB",
                many=True,
            ),
        ),
        input_help={"singles": "The single-object bank of the (one) folder, if not beside it."},
        extras=(LABELS,),
        run=run_geometry_command,
    ),
}


def hooks_of(name: str) -> Hooks:
    """The hooks of analysis ``name`` (none declared: the plain form)."""
    return HOOKS.get(name, Hooks())
