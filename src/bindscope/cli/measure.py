"""The analysis commands (probe, decompose, complexity, analyses): options -> settings -> the registry."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from bindscope.cli.app import app
from bindscope.cli.common import (
    AddressOpt,
    DeviceOpt,
    ExecutorOpt,
    MemoryOpt,
    ObjectOrderChoice,
    OutDir,
    OverwriteOpt,
    QuietOpt,
    SeedsOpt,
    WaitOpt,
    given,
    parse_fractions,
    parse_list,
    parse_seeds,
    print_table,
    progress_bar,
    warn,
)

if TYPE_CHECKING:
    from bindscope.analyses.inputs import Inputs


class ProbeOptimizer(str, Enum):
    fast = "fast"
    reference = "reference"
    lbfgs = "lbfgs"


class BudgetName(str, Enum):
    auto = "auto"
    cpu = "cpu"
    full = "full"
    paper = "paper"


class Protocol(str, Enum):
    exact = "exact"
    paper = "paper"


class Origin(str, Enum):
    """Whose choice: bindscope's or the published research code's (``--parity``, ``--split-source``)."""

    bindscope = "bindscope"
    paper = "paper"


class R2Centre(str, Enum):
    scenes = "scenes"
    group = "group"


class ProbeScenes(str, Enum):
    exclude = "exclude"
    keep = "keep"


class LrDecay(str, Enum):
    cosine = "cosine"
    constant = "constant"


class Selection(str, Enum):
    validation = "validation"
    test = "test"


class SceneChoice(str, Enum):
    full = "full"
    all = "all"


class ResidualMean(str, Enum):
    keep = "keep"
    remove = "remove"


EmbDir = Annotated[Path, typer.Argument(help="An embedding folder (embeddings.npy + manifest.json).")]
DatasetOpt = Annotated[
    Optional[Path], typer.Option(help="The dataset folder, if not where the embedding manifest says.")
]
AttributeOpt = Annotated[
    Optional[str],
    typer.Option(help="The attribute concept (default: the concept that is not the noun, in a 2-concept space)."),
]
NounOpt = Annotated[Optional[str], typer.Option(help="The noun concept (default: the dataset's noun).")]
ControlOpt = Annotated[
    Optional[Path],
    typer.Option(
        help="Embeddings of the same model with random weights (+rand). Default: a sibling folder whose "
        "model_spec is this one's plus +rand."
    ),
]
OptimizerOpt = Annotated[
    Optional[ProbeOptimizer],
    typer.Option(
        help="fast (default): L-BFGS, following the reference trajectory where the training set is separable; "
        "reference: the paper's Adam (lr 1e-2, cosine, --steps); lbfgs: L-BFGS only."
    ),
]
TrainFractionOpt = Annotated[Optional[float], typer.Option(help="Scene-level train fraction of the probes (0.4).")]
CenterOpt = Annotated[Optional[bool], typer.Option("--center/--no-center", help="Centre on the training mean.")]
NormalizeOpt = Annotated[
    Optional[bool], typer.Option("--normalize/--no-normalize", help="L2-normalise each embedding (before centring).")
]
ParityOpt = Annotated[
    Optional[Origin],
    typer.Option(
        help="paper: every choice of the published research code that this command has, for the options not "
        "given (docs/method.md §10); bindscope (default): bindscope's defaults."
    ),
]
ScenesOpt = Annotated[
    Optional[SceneChoice],
    typer.Option(
        help="full (default, as the research code): only scenes holding all K objects (text: the 160,000 pairs); "
        "all: every scene, single objects included."
    ),
]
SplitSourceOpt = Annotated[
    Optional[Origin],
    typer.Option(
        help="Where the scene split's permutation comes from: bindscope (numpy, default) or paper "
        "(torch.randperm as the research code; seed 0 selects its scenes exactly)."
    ),
]
StepsOpt = Annotated[Optional[int], typer.Option(help="Adam steps of the reference schedule (10,000).")]
MaxIterOpt = Annotated[Optional[int], typer.Option(help="L-BFGS iterations at most (500).")]
ExactBudgetOpt = Annotated[
    Optional[float],
    typer.Option(
        help="fast: most seconds to spend following the reference trajectory for probes whose training set is "
        "separable (900; beyond it they keep L-BFGS and a warning)."
    ),
]


def report(name: str, inputs: Inputs, out: Path, settings: Any, overwrite: bool, quiet: bool) -> None:
    """Run an analysis through the registry, then print its headline, notes, warnings and folder."""
    from bindscope.analyses import get_analysis, run_analysis

    analysis = get_analysis(name)
    with progress_bar(name, "step", quiet) as advance:
        result = run_analysis(name, inputs, out, settings, overwrite=overwrite, progress=advance)
    print_table(analysis.headline(result.view))
    for line in analysis.notes(result.view):
        typer.echo(line)
    warn(result.header.warnings)
    typer.echo(f"\nseeds {', '.join(map(str, result.header.seeds))}; wrote {out}")


def probe_options(**options: Any) -> dict[str, Any]:
    """The probe settings the user gave, as settings fields (choices as their values)."""
    seeds = options.pop("seeds")
    choices = {k: v.value if isinstance(v, Enum) else v for k, v in options.items()}
    return given(seeds=parse_seeds(seeds), exact_budget_s=choices.pop("exact_budget"), **choices)


@app.command()
def probe(
    emb_dir: EmbDir,
    out: OutDir,
    dataset: DatasetOpt = None,
    control: ControlOpt = None,
    parity: ParityOpt = None,
    scenes: ScenesOpt = None,
    split_source: SplitSourceOpt = None,
    optimizer: OptimizerOpt = None,
    seeds: SeedsOpt = None,
    train_fraction: TrainFractionOpt = None,
    center: CenterOpt = None,
    normalize: NormalizeOpt = None,
    steps: StepsOpt = None,
    max_iter: MaxIterOpt = None,
    exact_budget: ExactBudgetOpt = None,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
    wait: WaitOpt = False,
    executor: ExecutorOpt = None,
    address: AddressOpt = None,
    memory: MemoryOpt = None,
) -> None:
    """Is object information recoverable? Concept and object probes with set-separation accuracy."""
    from bindscope.analyses import ProbeSettings, load_inputs

    settings = ProbeSettings(
        device=device,
        **probe_options(
            parity=parity,
            scenes=scenes,
            split_source=split_source,
            optimizer=optimizer,
            seeds=seeds,
            train_fraction=train_fraction,
            center=center,
            normalize=normalize,
            steps=steps,
            max_iter=max_iter,
            exact_budget=exact_budget,
        ),
    )
    report("probe", load_inputs("probe", emb_dir, dataset=dataset, control=control), out, settings, overwrite, quiet)


@app.command()
def decompose(
    emb_dir: EmbDir,
    out: OutDir,
    dataset: DatasetOpt = None,
    control: ControlOpt = None,
    test_fraction: Annotated[
        Optional[float], typer.Option(help="Held-out share of scenes for R² (0.2; the paper: 0.01).")
    ] = None,
    residual_mean: Annotated[
        Optional[ResidualMean],
        typer.Option(
            help="keep (default, as the research code): a subtraction residual keeps the mean embedding; "
            "remove: the intercept is subtracted too (residual mean 0)."
        ),
    ] = None,
    parity: ParityOpt = None,
    scenes: ScenesOpt = None,
    split_source: SplitSourceOpt = None,
    optimizer: OptimizerOpt = None,
    seeds: SeedsOpt = None,
    train_fraction: TrainFractionOpt = None,
    center: CenterOpt = None,
    normalize: NormalizeOpt = None,
    steps: StepsOpt = None,
    max_iter: MaxIterOpt = None,
    exact_budget: ExactBudgetOpt = None,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
    wait: WaitOpt = False,
) -> None:
    """Is a scene a sum of its parts? Additive R² and probes after subtracting each model."""
    from bindscope.analyses import DecomposeSettings, load_inputs

    settings = DecomposeSettings(
        device=device,
        **given(test_fraction=test_fraction, residual_mean=residual_mean.value if residual_mean else None),
        **probe_options(
            parity=parity,
            scenes=scenes,
            split_source=split_source,
            optimizer=optimizer,
            seeds=seeds,
            train_fraction=train_fraction,
            center=center,
            normalize=normalize,
            steps=steps,
            max_iter=max_iter,
            exact_budget=exact_budget,
        ),
    )
    report(
        "decompose",
        load_inputs("decompose", emb_dir, dataset=dataset, control=control),
        out,
        settings,
        overwrite,
        quiet,
    )


@app.command()
def complexity(
    emb_dir: EmbDir,
    out: OutDir,
    probes: Annotated[
        Optional[Path],
        typer.Option(
            help="Frozen probes: a probe folder or a `bindscope probe` output folder. "
            "Default: fit them here (scene split 0.4, --probe-seed)."
        ),
    ] = None,
    probe_seed: Annotated[Optional[int], typer.Option(help="Which seed's probes to use (or to fit); 0.")] = None,
    approximators: Annotated[
        Optional[str],
        typer.Option(
            help="Families to fit, comma-separated: additive, mult, mult_within_object, sum_mult, mlp, mlp(H). "
            "Default: all five."
        ),
    ] = None,
    hidden: Annotated[Optional[str], typer.Option(help="MLP hidden widths for `mlp`, comma-separated (1024).")] = None,
    fractions: Annotated[
        Optional[str],
        typer.Option(help="Fractions of objects seen in training, comma-separated (0.1,0.2,...,0.9)."),
    ] = None,
    seeds: SeedsOpt = None,
    budget: Annotated[
        BudgetName,
        typer.Option(
            help="cpu: the exact protocol, capped to finish in minutes on 2 cores (512 training scenes per fit, "
            "the embeddings' leading principal subspace, 4 starts of 5 ALS sweeps, 600 MLP epochs, L-BFGS probes; "
            "see README). full: the exact protocol on "
            "every scene. paper: the paper's Adam, 4,000 epochs on every scene (docs/method.md §6; for a GPU). "
            "auto: full on CUDA, cpu otherwise; the output says which and why."
        ),
    ] = BudgetName.auto,
    parity: Annotated[
        Optional[Origin],
        typer.Option(
            help="paper: the research code's choices where not given: the paper budget (Adam at a constant lr 1e-2, "
            "4,000 epochs, raw targets, every scene; for a GPU), R² around the mean of all scenes, the random "
            "object order and scored probe-training scenes. "
            "Checkpoints are still selected on validation (see --selection)."
        ),
    ] = None,
    r2_centre: Annotated[
        Optional[R2Centre],
        typer.Option(
            help="R²'s SST around the mean of all the sweep's scenes (scenes, default, as the research code) "
            "or around the scored group's own mean (group)."
        ),
    ] = None,
    object_order: Annotated[
        Optional[ObjectOrderChoice],
        typer.Option(
            help="Which objects are seen first: a seeded order that covers every concept value first (covering, "
            "default: every test scene is then a new combination of seen values), or a plain permutation "
            "(random, the research code: at low fractions some test scenes hold values never fitted)."
        ),
    ] = None,
    probe_scenes: Annotated[
        Optional[ProbeScenes],
        typer.Option(
            help="The scenes the probes were fitted on (known when they are fitted here or recorded in their "
            "probe.json): left out of the scored "
            "test_only and mixed groups (exclude, default: probes read their own training scenes' noise, which no "
            "prediction can) or scored (keep, the research code)."
        ),
    ] = None,
    lr_decay: Annotated[
        Optional[LrDecay],
        typer.Option(
            help="Adam's learning rate: cosine to 0 (the exact protocol's MLP) or constant (the paper protocol, "
            "as the research code runs it)."
        ),
    ] = None,
    selection: Annotated[
        Optional[Selection],
        typer.Option(
            help="Checkpoints of the lowest validation MSE (validation, default) or, only to reproduce the "
            "research code's numbers, of the highest test_only object accuracy (test: optimistic, marked so in "
            "every output; needs --protocol paper)."
        ),
    ] = None,
    protocol: Annotated[
        Optional[Protocol],
        typer.Option(
            help="exact: alternating exact least squares for the table families, Adam on standardised targets "
            "for the MLP (the budgets' default). paper: full-batch Adam for every family (docs/method.md §6)."
        ),
    ] = None,
    sweeps: Annotated[
        Optional[int], typer.Option(help="Override: ALS sweeps at most per fit (exact protocol).")
    ] = None,
    epochs: Annotated[
        Optional[int], typer.Option(help="Override: full-batch Adam epochs at most (the MLP; all under paper).")
    ] = None,
    eval_every: Annotated[Optional[int], typer.Option(help="Override: epochs between validation checks.")] = None,
    patience: Annotated[
        Optional[int],
        typer.Option(help="Override: checks without validation improvement before a model stops (0: never)."),
    ] = None,
    max_train_scenes: Annotated[
        Optional[int], typer.Option(help="Override: cap on training scenes per fit (0: no cap).")
    ] = None,
    max_eval_scenes: Annotated[
        Optional[int], typer.Option(help="Override: cap on scored scenes per group (0: no cap).")
    ] = None,
    max_target_dims: Annotated[
        Optional[int],
        typer.Option(
            help="Override: fit in the embeddings' leading principal subspace of at most this many dimensions "
            "(the cpu budget: 128; 0: the embeddings as they are)."
        ),
    ] = None,
    lr: Annotated[Optional[float], typer.Option(help="Peak Adam learning rate (1e-2; cosine decay to 0).")] = None,
    standardize: Annotated[
        Optional[bool],
        typer.Option(
            "--standardize/--no-standardize",
            help="Adam fits each model to its standardised training targets (mean 0, variance 1), folded back "
            "into its output layer (on in the exact protocol, off under paper).",
        ),
    ] = None,
    width: Annotated[
        Optional[int], typer.Option(help="Width of the concept tables (default: the embedding width).")
    ] = None,
    validation: Annotated[
        Optional[float],
        typer.Option(help="Share of the train_only scenes held out for selection and early stopping (0.1)."),
    ] = None,
    description_length: Annotated[
        Optional[bool],
        typer.Option(
            "--description-length/--no-description-length",
            help="Also compute the prequential description length of each family (on by default).",
        ),
    ] = None,
    second_fit: Annotated[
        Optional[bool],
        typer.Option(
            "--second-fit/--no-second-fit",
            help="Refit the exact product families from other initialisations and measure how far the two "
            "disagree on unseen objects: the verdict discounts families the data do not determine (on by default).",
        ),
    ] = None,
    dataset: DatasetOpt = None,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
    wait: WaitOpt = False,
    executor: ExecutorOpt = None,
    address: AddressOpt = None,
    memory: MemoryOpt = None,
) -> None:
    """How complex is the binding function? Approximators fitted on seen objects, scored on unseen ones."""
    from bindscope.analyses import ComplexitySettings, load_inputs, resolve_budget

    paper_budget = parity == Origin.paper and budget == BudgetName.auto and protocol is None
    chosen = resolve_budget(
        "paper" if paper_budget else budget.value,
        device,
        protocol=protocol.value if protocol is not None else None,
        sweeps=sweeps,
        epochs=epochs,
        eval_every=eval_every,
        patience=patience,
        max_train_scenes=max_train_scenes,
        max_eval_scenes=max_eval_scenes,
        max_target_dims=max_target_dims,
        standardize=standardize,
    )
    if lr_decay is not None:
        chosen = chosen.replace(decay=lr_decay.value)
    settings = ComplexitySettings(
        budget=chosen,
        device=device,
        **given(
            parity=parity.value if parity else None,
            r2_centre=r2_centre.value if r2_centre else None,
            object_order=object_order.value if object_order else None,
            probe_scenes=probe_scenes.value if probe_scenes else None,
            selection=selection.value if selection else None,
            approximators=parse_list(approximators, str, "--approximators", "additive,mult_within_object"),
            hidden=parse_list(hidden, int, "--hidden", "128,1024"),
            fractions=parse_fractions(fractions),
            seeds=parse_seeds(seeds),
            lr=lr,
            width=width,
            validation_fraction=validation,
            description_length=description_length,
            second_fit=second_fit,
            probe_seed=probe_seed,
        ),
    )
    inputs = load_inputs("complexity", emb_dir, dataset=dataset, probes=probes, settings=settings)
    report("complexity", inputs, out, settings, overwrite, quiet)


@app.command("analyses")
def list_analyses_command() -> None:
    """List the registered analyses, what they take and what they answer."""
    from bindscope.analyses import get_analysis, list_analyses

    rows = [("analysis", "needs", "uses if present", "answers")]
    for name in list_analyses():
        a = get_analysis(name)
        rows.append((name, ", ".join(sorted(a.needs)), ", ".join(sorted(a.uses)) or "-", a.title))
    print_table(rows)


class EditChoice(str, Enum):
    attribute = "attribute"
    noun = "noun"
    both = "both"


@app.command()
def intervene(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="An embedding folder (embeddings.npy + manifest.json); with --table, the intervene result "
            "folders to tabulate.",
            show_default=False,
            metavar="PATH",
        ),
    ],
    out: OutDir,
    table: Annotated[
        bool,
        typer.Option(
            "--table",
            help="Write the paper's table (table.md, table.tex: dataset x model x shared/different x bank x "
            "probe/retrieval at k = 1) from the result folders given, instead of running edits.",
        ),
    ] = False,
    edit: Annotated[
        Optional[EditChoice],
        typer.Option(help="Which concept to edit: attribute (default, as the paper), noun, or both."),
    ] = None,
    banks: Annotated[
        Optional[str],
        typer.Option(help="Object-vector banks, comma-separated: obj-avg, pos-avg, single (default: all three)."),
    ] = None,
    k: Annotated[
        Optional[str],
        typer.Option(
            "--k",
            help="Edit strengths, comma-separated (default 1, as the paper); e.g. 0,0.5,1,1.5,2 sweeps them and "
            "plots the curve.",
        ),
    ] = None,
    seeds: Annotated[
        Optional[str], typer.Option(help="Seeds of the target draw, comma-separated (default 42, as the paper).")
    ] = None,
    attribute: AttributeOpt = None,
    noun: NounOpt = None,
    singles: Annotated[
        Optional[Path],
        typer.Option(
            help="The single-object bank: the folder of `bindscope embed --single-objects` for this model. "
            "Default: a sibling folder of the embeddings holding it; without one the single bank is reported "
            "absent."
        ),
    ] = None,
    probes: Annotated[
        Optional[Path],
        typer.Option(
            help="Frozen concept probes: a probe folder or a `bindscope probe` output folder. "
            "Default: fit them here (scene split 0.4, --probe-seed)."
        ),
    ] = None,
    probe_seed: Annotated[Optional[int], typer.Option(help="Which seed's probes to use (or to fit); 0.")] = None,
    cases: Annotated[
        bool, typer.Option("--cases/--no-cases", help="Write every edit's outcome to cases.parquet (on by default).")
    ] = True,
    dataset: DatasetOpt = None,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
    wait: WaitOpt = False,
) -> None:
    """Can one object in a scene embedding be edited? Vector-arithmetic edits, scored by retrieval and probes."""
    if table:
        from bindscope.pipeline.combine.intervene import write_tables

        written = write_tables(paths, out, overwrite=overwrite)
        for path in written:
            typer.echo(f"wrote {path}")
        return
    from bindscope.analyses import InterveneSettings, load_inputs
    from bindscope.core.errors import BindscopeError

    if len(paths) != 1:
        raise BindscopeError(
            f"give one embedding folder (got {len(paths)} paths); to tabulate result folders, add --table"
        )
    settings = InterveneSettings(
        device=device,
        cases=cases,
        **given(
            edit=edit.value if edit else None,
            banks=parse_list(banks, str, "--banks", "obj-avg,pos-avg,single"),
            k=parse_list(k, float, "--k", "0,0.5,1,1.5,2"),
            seeds=parse_seeds(seeds),
            attribute=attribute,
            noun=noun,
            probe_seed=probe_seed,
        ),
    )
    inputs = load_inputs("intervene", paths[0], probes=probes, singles=singles, dataset=dataset, settings=settings)
    report("intervene", inputs, out, settings, overwrite, quiet)
