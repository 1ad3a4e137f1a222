"""One command per registered analysis, generated from what it declares.

``bindscope NAME EMB_DIR --out DIR``: the folders it takes (its ``needs`` / ``uses``: ``--control``,
``--probes``, ``--singles``, ``--probes-image/--probes-text``, a second folder by position), an option per
settings field (:mod:`bindscope.cli.fields`), ``--settings FILE.yaml`` and ``--set KEY=VALUE``
(:mod:`bindscope.cli.overrides`), and the common ``--overwrite --quiet --wait``. Settings come from the file,
then ``--set``, then the options given, validated by the one function a run config's section goes through
(:func:`bindscope.pipeline.config.analysis_settings`). What a shipped command adds is declared in
:mod:`bindscope.cli.hooks`.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from bindscope.cli.common import AddressOpt, DatasetOpt, ExecutorOpt, MemoryOpt, OutDir, OverwriteOpt, QuietOpt, WaitOpt
from bindscope.cli.fields import FieldOption, settings_options
from bindscope.cli.hooks import EMB_HELP, Hooks, Positional, Values, hooks_of, option
from bindscope.cli.overrides import merge, nest, parse_set, read_settings_file
from bindscope.core.errors import BindscopeError

#: The options of the inputs an analysis may take (its ``needs`` / ``uses``), by input kind: parameter, help.
INPUT_OPTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "control": (
        (
            "control",
            "Embeddings of the same model with random weights (+rand). Default: a sibling folder whose model_spec "
            "is this one's plus +rand.",
        ),
    ),
    "probes": (("probes", "Frozen probes: a probe folder or a `bindscope probe` output folder."),),
    "singles": (
        (
            "singles",
            "The single-object bank: the folder of `bindscope embed --single-objects` for this model "
            "(default: a sibling folder of the embeddings holding it).",
        ),
    ),
    "unimodal": tuple(
        (
            f"probes_{m}",
            f"A `bindscope probe` output folder of the {m} embeddings: its object probe accuracy is shown beside the "
            "cross-modal tests (the paper's uni-modal vs cross-modal contrast).",
        )
        for m in ("image", "text")
    ),
}
SET_OPT = Annotated[
    Optional[list[str]],
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="A setting, as in a run config's analyses section: VALUE is YAML (0.5, true, [0, 1]; lists also "
        "comma-separated), KEY.SUB reaches a nested setting (budget.epochs=100). Repeatable; options given win.",
    ),
]
SETTINGS_OPT = Annotated[
    Optional[Path],
    typer.Option(
        "--settings",
        metavar="FILE.yaml",
        help="A YAML mapping of this analysis's settings (a run config's analyses.NAME section); --set and the "
        "options given win.",
    ),
]
ALLOW_OPT = Annotated[
    bool,
    typer.Option(
        "--allow-different-models",
        help="Compare embeddings of two different models (refused by default: cross-modal similarity is meant "
        "within one joint model).",
    ),
]
#: Parameters every generated command has, besides its folders and settings.
COMMON = {
    "out": option("out", OutDir, inspect.Parameter.empty),
    "dataset": option("dataset", DatasetOpt),
    "set_": option("set_", SET_OPT),
    "settings_file": option("settings_file", SETTINGS_OPT),
    "overwrite": option("overwrite", OverwriteOpt, False),
    "quiet": option("quiet", QuietOpt, False),
    "wait": option("wait", WaitOpt, False),
}
DISTRIBUTED = (option("executor", ExecutorOpt), option("address", AddressOpt), option("memory", MemoryOpt))


def analysis_command(name: str) -> Any:
    """The command of registered analysis ``name`` (a click command, as typer builds it)."""
    from bindscope.analyses import get_analysis

    analysis = get_analysis(name)
    hooks = hooks_of(name)
    options = settings_options(analysis.Settings, hooks.choices, hooks.defaults)
    folders = positionals(analysis, hooks)
    params = command_params(analysis, hooks, folders, options)
    check_flags(name, params, options)

    def command(ctx: typer.Context, **values: Any) -> None:
        run_command(name, hooks, options, ctx, {**values, "folders": folders})

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    single.command(name, help=analysis.title)(command)
    return typer.main.get_command(single)


def command_params(
    analysis: Any, hooks: Hooks, folders: tuple[Positional, ...], options: list[FieldOption]
) -> list[inspect.Parameter]:
    """The command's parameters: context, folders by position, --out, the inputs, the settings, the rest."""
    takes = analysis.needs | analysis.uses
    inputs = [
        option(param, Annotated[Optional[Path], typer.Option(help=hooks.input_help.get(param, text))])
        for kind, entries in INPUT_OPTIONS.items()
        if kind in takes
        for param, text in entries
    ]
    if "other" in takes:
        inputs.append(option("allow_different_models", ALLOW_OPT, False))
    return [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
        *[positional(p) for p in folders],
        COMMON["out"],
        COMMON["dataset"],
        *inputs,
        *[option(o.param, o.annotation, o.default) for o in options],
        *hooks.extras,
        COMMON["set_"],
        COMMON["settings_file"],
        COMMON["overwrite"],
        COMMON["quiet"],
        COMMON["wait"],
        *(DISTRIBUTED if hooks.distributed else ()),
    ]


def positionals(analysis: Any, hooks: Hooks) -> tuple[Positional, ...]:
    """The folders given by position: the hooks', else EMB_DIR (and OTHER_DIR where the analysis takes one)."""
    if hooks.positionals:
        return hooks.positionals
    other = (Positional("other_dir", "other", "The second embedding folder.", "OTHER_DIR"),)
    return (
        Positional("emb_dir", "embeddings", EMB_HELP),
        *(other if "other" in analysis.needs | analysis.uses else ()),
    )


def positional(folder: Positional) -> inspect.Parameter:
    kind = list[Path] if folder.many else Path
    decl = typer.Argument(help=folder.help, show_default=False, metavar=folder.metavar)
    return inspect.Parameter(folder.param, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[kind, decl])


def check_flags(name: str, params: list[inspect.Parameter], options: list[FieldOption]) -> None:
    """Refuse a settings field whose option another parameter of the command has already."""
    fields = {o.param for o in options}
    taken = {flag for p in params if p.name not in fields for flag in flags_of(p)}
    for o in options:
        if o.option in taken:
            raise BindscopeError(
                f"{name}: setting {o.key} would be the option {o.option}, which the command has already; "
                "give it another name in its settings class's OPTION_NAMES"
            )


def flags_of(param: inspect.Parameter) -> list[str]:
    """The option names a parameter declares (``--out``, ``-o``; ``--x/--no-x`` as both); none for an argument."""
    infos = [a for a in getattr(param.annotation, "__metadata__", ()) if isinstance(a, typer.models.OptionInfo)]
    if not infos:
        return []
    decls = [infos[0].default] if isinstance(infos[0].default, str) else []
    decls += list(infos[0].param_decls or ())
    if not decls:  # typer names it after the parameter
        name = param.name.replace("_", "-")
        decls = [f"--{name}/--no-{name}"]
    return [n.strip() for d in decls for n in d.split("/")]


def run_command(name: str, hooks: Hooks, options: list[FieldOption], ctx: Any, values: Values) -> None:
    """A generated command's work: its hooks, the settings (file < --set < options given), the run."""
    if hooks.before is not None and hooks.before(values):
        return
    explicit: Values = {}
    for o in options:
        if given(ctx, o.param):
            explicit = merge(explicit, nest(o.key, o.convert(values[o.param])))
    settings = resolve_settings(name, hooks, values["settings_file"], values["set_"] or [], explicit)
    (hooks.run or run_default)(name, settings, values)


def given(ctx: Any, param: str) -> bool:
    """Whether the user gave a parameter (not its default)."""
    source = ctx.get_parameter_source(param)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def resolve_settings(name: str, hooks: Hooks, file: Path | None, sets: list[str], explicit: Values) -> Any:
    """The analysis's settings: ``--settings`` file, then each ``--set``, then the options given."""
    from bindscope.analyses import get_analysis
    from bindscope.pipeline.config import analysis_settings

    schema = get_analysis(name).Settings
    sources = [read_settings_file(schema, file, name)] if file is not None else []
    sources += [parse_set(schema, item, name) for item in sets]
    data: Values = {}
    for source in [*sources, explicit]:
        data = merge(data, hooks.normalise(source))
    return analysis_settings(name, hooks.prepare(data))


def run_default(name: str, settings: Any, values: Values) -> None:
    """Read the analysis's inputs from the folders given, run it into ``--out`` and print what it found."""
    from bindscope.analyses import load_inputs
    from bindscope.cli.show import run_and_show

    folders = {p.kind: first(values[p.param]) for p in values["folders"]}
    unimodal = {m: values[f"probes_{m}"] for m in ("image", "text") if values.get(f"probes_{m}") is not None}
    inputs = load_inputs(
        name,
        folders["embeddings"],
        dataset=values["dataset"],
        control=values.get("control"),
        probes=values.get("probes"),
        singles=values.get("singles"),
        other=folders.get("other"),
        unimodal=unimodal or None,
        settings=settings,
        allow_different_models=values.get("allow_different_models", False),
    )
    run_and_show(name, inputs, values["out"], settings, values["overwrite"], values["quiet"])


def first(value: Any) -> Any:
    """A folder given by position (the first, where several may be given)."""
    return value[0] if isinstance(value, list) else value
