"""Controlled models trained from scratch: configs, train, sweep, export, complexity against coverage."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from bindscope.cli.app import scratch_app
from bindscope.cli.common import (
    AddressOpt,
    DeviceOpt,
    ExecutorOpt,
    MemoryOpt,
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
)

ConfigOpt = Annotated[
    str,
    typer.Option(
        "--config",
        "-c",
        help="A built-in config (cpu-small, paper; image-text: clip-tiny, clip-small) or a YAML file.",
    ),
]


class Towers(str, Enum):
    """Image-text towers (``towers``)."""

    pooled = "pooled"
    slot = "slot"


class Batches(str, Enum):
    """How image-text batches are drawn (``batches``)."""

    swap_free = "swap-free"
    natural = "natural"


class HardNegatives(str, Enum):
    """Hard negative captions of image-text training (``hard_negatives``)."""

    none = "none"
    attribute = "attribute"
    noun = "noun"
    both = "both"


class Split(str, Enum):
    """How an image-text model's dataset is held out (``split``)."""

    combinations = "combinations"
    objects = "objects"


DatasetOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--dataset",
        "-d",
        help="Image-text configs: the dataset folder to train on (rendered images and captions, e.g. clevr2d).",
    ),
]
TowersOpt = Annotated[
    Optional[Towers], typer.Option(help="Image-text: pooled (CLIP-like, the default) or slot towers.")
]
BatchesOpt = Annotated[
    Optional[Batches],
    typer.Option(help="Image-text: swap-free (no scene with its binding swap in a batch; default) or natural batches."),
]
HardNegativesOpt = Annotated[
    Optional[HardNegatives],
    typer.Option(help="Image-text: swap captions added as hard negatives (none, attribute, noun, both)."),
]
SplitOpt = Annotated[
    Optional[Split],
    typer.Option(help="Image-text: hold out scene groups closed under swaps (combinations) or objects (objects)."),
]
ImageSizeOpt = Annotated[
    Optional[int], typer.Option(help="Image-text: the side the towers read images at (default 32).")
]


def image_text_overrides(
    dataset: Path | None,
    towers: Towers | None,
    batches: Batches | None,
    hard_negatives: HardNegatives | None,
    split: Split | None,
    image_size: int | None,
) -> dict[str, Any]:
    """The image-text options the user gave, as config overrides (None: the config's)."""
    return {
        "dataset": None if dataset is None else str(dataset.resolve()),
        "towers": towers.value if towers else None,
        "batches": batches.value if batches else None,
        "hard_negatives": hard_negatives.value if hard_negatives else None,
        "split": split.value if split else None,
        "image_size": image_size,
    }


def scratch_config(config: str, **overrides: Any) -> Any:
    """A training config with the options given; an option of the other kind of config is refused."""
    from bindscope.core.errors import BindscopeError
    from bindscope.scratch.config import image_text, load_config

    given_keys = {k for k, v in overrides.items() if v is not None}
    image_keys = {"dataset", "towers", "batches", "hard_negatives", "split", "image_size"}
    token_keys = {"final_norm", "init", "queries", "batch_eval", "heldout_negatives", "selection", "parity"}
    wrong = given_keys & (token_keys if image_text(config) else image_keys)
    if wrong:
        kind = "image-text" if image_text(config) else "token-level"
        options = ", ".join("--" + k.replace("_", "-") for k in sorted(wrong))
        verb, them = ("apply", "them") if len(wrong) > 1 else ("applies", "it")
        other = "token-level" if image_text(config) else "image-text"
        raise BindscopeError(
            f"{options} {verb} to {other} configs only, not to the {kind} config {config}; drop {them}"
        )
    return load_config(config, **overrides)


class Init(str, Enum):
    """Encoder initialisation: bindscope's or the research code's (``init``)."""

    bindscope = "bindscope"
    xavier = "xavier"


class Selection(str, Enum):
    """Which weights a run keeps (``selection``)."""

    validation = "validation"
    test = "test"


class Parity(str, Enum):
    """Whose choices fill the fields not given (``parity``)."""

    bindscope = "bindscope"
    paper = "paper"


class Queries(str, Enum):
    """Training queries per batch (``queries``)."""

    all = "all"
    sampled = "sampled"


# research-code parity switches (docs/method/10-differences.md); unset: the config's value
FinalNormOpt = Annotated[
    Optional[bool],
    typer.Option("--final-norm/--no-final-norm", help="A LayerNorm after the last block (the research code: none)."),
]
InitOpt = Annotated[
    Optional[Init],
    typer.Option(help="bindscope: N(0, 0.02^2) token embeddings, PyTorch defaults; xavier: the research code's."),
]
QueriesOpt = Annotated[
    Optional[Queries],
    typer.Option(
        help="all: every concept value and present object plus the swaps; sampled: the research code's per-batch "
        "sample (present values, at most 64 present objects plus the swaps, scenes without a positive left out)."
    ),
]
BatchEvalOpt = Annotated[
    Optional[bool],
    typer.Option(
        "--batch-eval/--no-batch-eval",
        help="Also report the research code's batch-query evaluation (<split>_batch_object_acc ...).",
    ),
]
HeldoutNegativesOpt = Annotated[
    Optional[bool],
    typer.Option(
        "--heldout-negatives/--no-heldout-negatives",
        help="Reproduce the research code's leak: held-out objects may be trained on as swap negatives "
        "(off in every built-in config; only to measure the leak).",
    ),
]


SelectionOpt = Annotated[
    Optional[Selection],
    typer.Option(
        help="validation: keep the weights best on the validation objects; test: the research code's selection on "
        "the test objects (every output marks those numbers optimistic)."
    ),
]
ParityOpt = Annotated[
    Optional[Parity],
    typer.Option(
        help="paper: the research code's choices for every parity switch not given, its mistakes included (selection "
        "on test, held-out negatives, no validation objects); the summary lists which numbers are then not "
        "comparable."
    ),
]


def parity_overrides(
    final_norm: bool | None,
    init: Init | None,
    queries: Queries | None,
    batch_eval: bool | None,
    heldout: bool | None,
    selection: Selection | None = None,
    parity: Parity | None = None,
) -> dict[str, Any]:
    """The research-code parity switches the user gave, as config overrides (None: the config's)."""
    return {
        "final_norm": final_norm,
        "init": init.value if init else None,
        "queries": queries.value if queries else None,
        "batch_eval": batch_eval,
        "heldout_negatives": heldout,
        "selection": selection.value if selection else None,
        "parity": parity.value if parity else None,
    }


def _setting(value: Any) -> str:
    """A config value for the configs table."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


@scratch_app.command("configs")
def scratch_configs() -> None:
    """List the built-in training configs and their settings."""
    from bindscope.embeddings.encoders.scratch.config import ScratchConfig
    from bindscope.scratch.config import BUILTIN, load_config

    keys = (
        "max_objects",
        "d_model",
        "layers",
        "heads",
        "ff",
        "d_out",
        "steps",
        "batch_size",
        "lr",
        "fraction",
        "final_norm",
        "init",
        "queries",
        "batch_eval",
        "heldout_negatives",
        "selection",
    )
    rows: list[tuple[str, ...]] = [("config", "objects", *keys)]
    image_keys = ("towers", "batches", "hard_negatives", "split", "image_size", "d_out", "steps", "batch_size", "lr")
    image_rows: list[tuple[str, ...]] = [("image-text config", *image_keys)]
    for name in BUILTIN:
        cfg = load_config(name)
        if isinstance(cfg, ScratchConfig):
            rows.append((name, f"{cfg.preset().space.num_objects}", *(_setting(getattr(cfg, k)) for k in keys)))
        else:
            image_rows.append((name, *(_setting(getattr(cfg, k)) for k in image_keys)))
    print_table(rows)
    typer.echo("")
    print_table(image_rows)
    typer.echo("image-text configs train on a dataset with rendered images: scratch train -c clip-tiny --dataset DIR")


@scratch_app.command("train")
def scratch_train(
    out: OutDir,
    config: ConfigOpt = "cpu-small",
    fraction: Annotated[
        Optional[float], typer.Option(help="Fraction of the objects to train on (coverage); default: the config's.")
    ] = None,
    seed: Annotated[
        Optional[int],
        typer.Option(help="Seed of the object split, the initialisation and the sampler; default: the config's."),
    ] = None,
    steps: Annotated[Optional[int], typer.Option(help="Training steps; default: the config's.")] = None,
    batch_size: Annotated[Optional[int], typer.Option(help="Scenes per step; default: the config's.")] = None,
    final_norm: FinalNormOpt = None,
    init: InitOpt = None,
    queries: QueriesOpt = None,
    batch_eval: BatchEvalOpt = None,
    heldout_negatives: HeldoutNegativesOpt = None,
    selection: SelectionOpt = None,
    parity: ParityOpt = None,
    dataset: DatasetOpt = None,
    towers: TowersOpt = None,
    batches: BatchesOpt = None,
    hard_negatives: HardNegativesOpt = None,
    split: SplitOpt = None,
    image_size: ImageSizeOpt = None,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
    wait: WaitOpt = False,
) -> None:
    """Train a model from scratch (docs/method/09-scratch.md): a scene and a query encoder (token-level configs), or
    an image and a text tower on a dataset's rendered scenes (image-text configs); an interrupted run resumes."""
    from bindscope.scratch.train import train_model

    cfg = scratch_config(
        config,
        fraction=fraction,
        seed=seed,
        steps=steps,
        batch_size=batch_size,
        **parity_overrides(final_norm, init, queries, batch_eval, heldout_negatives, selection, parity),
        **image_text_overrides(dataset, towers, batches, hard_negatives, split, image_size),
    )
    result = train_model(cfg, out, device=device, overwrite=overwrite, progress=not quiet)
    s = result.summary
    if result.status == "existing":
        typer.echo(f"{out} already holds this model; nothing to do")
    if s.get("kind") == "image-text":
        print_image_text_summary(s, out)
        return
    typer.echo(
        f"config {s['config']}, fraction {s['fraction']:g} ({s['objects']['fit']} objects trained on, "
        f"{s['objects']['validation']} validation, {s['objects']['test']} held out), seed {s['seed']}"
    )
    print_table(accuracy_rows(s["selected"], s.get("floors") or {}))
    typer.echo(f"selected step {s['selected_step']} ({s['selected_on']}); {s['steps']:,} steps in {s['seconds']:.0f} s")
    if s.get("binding"):
        typer.echo(f"held-out objects: {binding_reading(s['binding'])}")
    for reason in s.get("not_comparable") or ():
        typer.echo(f"not comparable with bindscope's defaults: {reason}")
    typer.echo(f"\nwrote {out}; use it as the model spec scratch:{out}")


IMAGE_TEXT_LABELS = {
    "concept_at_1": "concept@1 (image -> caption)",
    "strict_at_1": "strict top-1 (image -> caption)",
    "swap_attribute": "attribute swap",
    "swap_noun": "noun swap",
    "swap_relation": "relation swap",
    "swap_count": "count swap",
    "order_sensitivity": "order sensitivity",
}


def image_text_rows(s: dict[str, Any]) -> list[tuple[str, ...]]:
    """An image-text run's table: per part and metric, the model beside an ideal bag of concepts and chance."""
    rows: list[tuple[str, ...]] = [("scenes", "metric", "model %", "bag of concepts %", "chance %", "cases")]
    for part, label in (("train", "trained on"), ("heldout", "held out")):
        for metric, name in IMAGE_TEXT_LABELS.items():
            key = f"{part}_{metric}"
            if key in s["selected"]:
                floor = s["floors"].get(key, {})
                rows.append(
                    (
                        label,
                        name,
                        _percent(s["selected"][key]),
                        _percent(floor.get("bag")),
                        _percent(floor.get("chance")),
                        str(s["cases"].get(key, "-")),
                    )
                )
    return rows


def print_image_text_summary(s: dict[str, Any], out: Path) -> None:
    """What ``scratch train`` prints for an image-text model."""
    hard = s["hard_negatives_available"]
    typer.echo(
        f"config {s['config']}: {s['towers']} towers, {s['batches']} batches, hard negatives {s['hard_negatives']}"
        + (f" ({', '.join(f'{n:,} {k}' for k, n in hard.items())} training scenes have one)" if hard else "")
    )
    typer.echo(
        f"{s['split']} split at fraction {s['fraction']:g}, seed {s['seed']}: {s['scenes']['train']:,} scenes trained "
        f"on, {s['scenes']['heldout']:,} held out"
    )
    print_table(image_text_rows(s))
    typer.echo(
        "bag of concepts: a model that sees every concept but binds none (swaps 50 %: it ties every swap); order "
        "sensitivity: how often a caption in the other mention order loses to the attribute swap (100 %: a "
        "positional shortcut)"
    )
    typer.echo(f"{s['steps']:,} steps in {s['seconds']:.0f} s ({s['steps_per_second']:.1f} steps/s)")
    typer.echo(f"\nwrote {out}; use it as the model spec scratch:{out} (--modality image or text)")


METRIC_LABELS = {
    "object_acc": "object acc",
    "binding_object_acc": "needing binding",
    "concept_acc": "concept acc",
    "batch_object_acc": "batch-query object acc",
    "batch_concept_acc": "batch-query concept acc",
}
SPLIT_LABELS = (("train", "trained on"), ("validation", "validation"), ("test", "held out"))


def accuracy_rows(selected: dict[str, float], floors: dict[str, dict[str, float]]) -> list[tuple[str, ...]]:
    """The train command's table: per split and metric, the model's accuracy beside an ideal bag of concepts
    and chance on the same scenes and queries."""
    rows: list[tuple[str, ...]] = [("objects", "metric", "model %", "bag of concepts %", "chance %")]
    for split, label in SPLIT_LABELS:
        for metric, name in METRIC_LABELS.items():
            key = f"{split}_{metric}"
            if key in selected:
                floor = floors.get(key, {})
                rows.append(
                    (label, name, _percent(selected[key]), _percent(floor.get("bag")), _percent(floor.get("chance")))
                )
    return rows


def binding_reading(verdict: dict[str, Any]) -> str:
    """The binding verdict in words: the reading and how far the model cleared the bag."""
    from bindscope.estimators.floors import clearance_text

    if verdict.get("clearance_min") is None:
        return str(verdict["reading"])
    return f"{verdict['reading']} ({clearance_text(verdict)})"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


@scratch_app.command("sweep")
def scratch_sweep(
    out: OutDir,
    config: ConfigOpt = "cpu-small",
    fractions: Annotated[str, typer.Option(help="Train fractions (coverage), comma-separated.")] = "0.2,0.4,0.6,0.8",
    seeds: SeedsOpt = None,
    steps: Annotated[Optional[int], typer.Option(help="Training steps per run; default: the config's.")] = None,
    batch_size: Annotated[Optional[int], typer.Option(help="Scenes per step; default: the config's.")] = None,
    final_norm: FinalNormOpt = None,
    init: InitOpt = None,
    queries: QueriesOpt = None,
    batch_eval: BatchEvalOpt = None,
    heldout_negatives: HeldoutNegativesOpt = None,
    selection: SelectionOpt = None,
    parity: ParityOpt = None,
    dataset: DatasetOpt = None,
    towers: TowersOpt = None,
    batches: BatchesOpt = None,
    hard_negatives: HardNegativesOpt = None,
    split: SplitOpt = None,
    image_size: ImageSizeOpt = None,
    workers: Annotated[
        int, typer.Option(help="Runs trained at once in worker processes (the CPU threads are split between them).")
    ] = 1,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
    wait: WaitOpt = False,
    executor: ExecutorOpt = None,
    address: AddressOpt = None,
    memory: MemoryOpt = None,
) -> None:
    """Held-out accuracy against coverage (objects; image-text configs: the attribute swap on held-out scenes): one
    model per fraction and seed; finished runs are kept."""
    from bindscope.core.validation import MAX_WORKERS, check_size
    from bindscope.scratch.sweep import SweepSettings, sweep

    check_size(workers, "--workers", 1, MAX_WORKERS)
    cfg = scratch_config(
        config,
        steps=steps,
        batch_size=batch_size,
        **parity_overrides(final_norm, init, queries, batch_eval, heldout_negatives, selection, parity),
        **image_text_overrides(dataset, towers, batches, hard_negatives, split, image_size),
    )
    settings = SweepSettings(fractions=parse_fractions(fractions) or (), **given(seeds=parse_seeds(seeds)))
    s = sweep(
        cfg,
        settings,
        out,
        device=device,
        workers=workers,
        overwrite=overwrite,
        progress=not quiet and workers == 1,
        say=typer.echo,
    )
    if s.get("kind") == "image-text":
        print_table(image_text_sweep_rows(s["per_fraction"]))
        typer.echo(
            "bag: an ideal bag of concepts ties every swap (50 %); binds: every seed clears it by "
            f"{100 * s['margin']:.0f} points; hard negatives: training scenes with a clean swap caption (mean over "
            f"seeds)\n\nseeds {', '.join(map(str, s['seeds']))}; wrote {out}"
        )
        return
    print_table(sweep_rows(s["per_fraction"]))
    typer.echo(
        f"bag: an ideal bag of concepts on the same scenes (a model that binds nothing scores that), chance "
        f"{100 * s['chance_object_acc']:.2f} %; needing binding: held-out object acc on the scenes a bag cannot "
        f"decide (bag 0 %); binds: every seed clears the bag by {100 * s.get('margin', 0.05):.0f} points"
    )
    for reason in s.get("not_comparable") or ():
        typer.echo(f"not comparable with bindscope's defaults: {reason}")
    typer.echo(f"\nseeds {', '.join(map(str, s['seeds']))}; wrote {out}")


def image_text_sweep_rows(per_fraction: dict[str, dict[str, Any]]) -> list[tuple[str, ...]]:
    """An image-text sweep's table: per fraction, the held-out attribute swap over seeds beside the bag, the
    verdict, the other held-out metrics, the clean hard negatives and the steps."""
    from bindscope.estimators.floors import SHORT_READINGS

    header = ("fraction", "held-out attribute swap %", "std", "min", "max", "bag %", "binds", "noun swap %")
    rows: list[tuple[str, ...]] = [(*header, "concept@1 %", "strict top-1 %", "its bag %", "hard negatives", "steps")]
    for f, entry in per_fraction.items():
        h, floors = entry["heldout_swap_attribute"], entry.get("floors") or {}
        verdict = (entry.get("binding") or {}).get("reading", "-")
        std = "-" if h["std"] is None else f"{100 * h['std']:.1f}"
        rows.append(
            (
                f,
                f"{100 * h['mean']:.1f}",
                std,
                f"{100 * h['min']:.1f}",
                f"{100 * h['max']:.1f}",
                _percent(floors.get("heldout_swap_attribute", {}).get("bag")),
                SHORT_READINGS.get(verdict, verdict),
                _percent(entry.get("heldout_swap_noun", {}).get("mean")),
                _percent(entry.get("heldout_concept_at_1", {}).get("mean")),
                _percent(entry.get("heldout_strict_at_1", {}).get("mean")),
                _percent(floors.get("heldout_strict_at_1", {}).get("bag")),
                f"{entry.get('hard_negatives', 0):,.0f}",
                f"{entry.get('steps', 0):,}",
            )
        )
    return rows


def sweep_rows(per_fraction: dict[str, dict[str, Any]]) -> list[tuple[str, ...]]:
    """The sweep table: per fraction, held-out object accuracy over seeds beside its floors, the binding
    verdict, and the other metrics (batch-query with its bag floor where reported)."""
    from bindscope.estimators.floors import SHORT_READINGS

    batch = any("test_batch_object_acc" in entry for entry in per_fraction.values())
    header = ["fraction", "held-out object acc %", "std", "min", "max", "bag %", "binds", "needing binding %"]
    header += ["trained-on object acc %"] + (["batch-query held-out %", "its bag %"] if batch else [])
    rows: list[tuple[str, ...]] = [tuple(header)]
    for f, entry in per_fraction.items():
        h, floors = entry["test_object_acc"], entry.get("floors") or {}
        std = "-" if h["std"] is None else f"{100 * h['std']:.1f}"
        bag = floors.get("test_object_acc", {}).get("bag", entry.get("test_bag_of_concepts_object_acc", {}).get("mean"))
        verdict = (entry.get("binding") or {}).get("reading", "-")
        row = [f, f"{100 * h['mean']:.1f}", std, f"{100 * h['min']:.1f}", f"{100 * h['max']:.1f}", _percent(bag)]
        row += [SHORT_READINGS.get(verdict, verdict), _percent(entry.get("test_binding_object_acc", {}).get("mean"))]
        row += [_percent(entry.get("train_object_acc", {}).get("mean"))]
        if batch:
            row += [
                _percent(entry.get("test_batch_object_acc", {}).get("mean")),
                _percent(floors.get("test_batch_object_acc", {}).get("bag")),
            ]
        rows.append(tuple(row))
    return rows


@scratch_app.command("export")
def scratch_export(
    model: Annotated[Path, typer.Argument(help="A model folder of `bindscope scratch train`.")],
    out: OutDir,
    layer: Annotated[
        Optional[int],
        typer.Option(
            help="Embed this layer's EOS state (0 = embeddings, -1 = last block) instead of the final embedding."
        ),
    ] = None,
    control: Annotated[bool, typer.Option(help="Also embed the +rand control next to the embeddings.")] = True,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
    wait: WaitOpt = False,
) -> None:
    """Embed every ordered object pair with the scene encoder and write the query probes (an image-text model: its
    dataset's images and captions, with controls and single objects): inputs for every analysis."""
    from bindscope.scratch.export import export_model

    r = export_model(model, out, layer=layer, control=control, device=device, overwrite=overwrite, progress=not quiet)
    if r.probes is None:  # an image-text model
        typer.echo(f"dataset     {r.dataset}\n" + "\n".join(f"embeddings  {f}" for f in r.folders))
        image, text = out / "embeddings" / "image", out / "embeddings" / "text"
        typer.echo(
            f"\nnext: bindscope crossmodal {image} {text} --out RUN/crossmodal; "
            f"bindscope probe {image} --out RUN/probe-image"
        )
        return
    typer.echo(
        f"dataset     {r.dataset}\nembeddings  {r.embeddings}"
        + (f"\ncontrol     {r.control}" if r.control else "")
        + f"\nprobes      {r.probes}"
    )
    typer.echo(
        f"\nnext: bindscope probe {r.embeddings} --out RUN/probe; "
        f"bindscope decompose {r.embeddings} --out RUN/decompose; "
        f"bindscope complexity {r.embeddings} --probes {r.probes} --out RUN/complexity"
    )


@scratch_app.command("complexity")
def scratch_complexity(
    sweep_dir: Annotated[Path, typer.Argument(help="A finished `bindscope scratch sweep` folder.")],
    out: OutDir,
    approximators: Annotated[
        Optional[str],
        typer.Option(help="Families to fit, comma-separated (default: all five, as `bindscope complexity`)."),
    ] = None,
    fractions: Annotated[
        Optional[str],
        typer.Option(help="Complexity fractions of objects seen by the fits, comma-separated (0.1,...,0.9)."),
    ] = None,
    seeds: SeedsOpt = None,
    budget: Annotated[
        str, typer.Option(help="The complexity budget: cpu, full, paper or auto (as `bindscope complexity`).")
    ] = "auto",
    description_length: Annotated[
        Optional[bool],
        typer.Option("--description-length/--no-description-length", help="Also compute description lengths."),
    ] = None,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
    wait: WaitOpt = False,
    executor: ExecutorOpt = None,
    address: AddressOpt = None,
    memory: MemoryOpt = None,
) -> None:
    """The binding function's complexity against coverage: `complexity` on every model of a sweep."""
    from bindscope.analyses import ComplexitySettings, resolve_budget
    from bindscope.scratch.coverage_complexity import complexity_by_coverage

    settings = ComplexitySettings(
        budget=resolve_budget(budget, device),
        device=device,
        **given(
            approximators=parse_list(approximators, str, "--approximators", "additive,mult_within_object"),
            fractions=parse_fractions(fractions),
            seeds=parse_seeds(seeds),
            description_length=description_length,
        ),
    )
    s = complexity_by_coverage(
        sweep_dir, out, settings, device=device, overwrite=overwrite, say=None if quiet else typer.echo
    )
    families = s["families"]
    rows = [("fraction", "coverage %", "in-distribution %") + tuple(f"AUC {f}" for f in families)]
    for f, entry in s["per_fraction"].items():
        line = entry["in_distribution"]["mean"]
        rows.append(
            (f, f"{100 * entry['coverage']:.0f}", _percent(line))
            + tuple(f"{entry[label]['auc']['mean']:.3f}" for label in families)
        )
    print_table(rows)
    typer.echo(f"\nwrote {out}")
