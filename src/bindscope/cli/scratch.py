"""Controlled models trained from scratch: configs, train, sweep, export."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from bindscope.cli.app import scratch_app
from bindscope.cli.common import (
    DeviceOpt,
    OutDir,
    OverwriteOpt,
    QuietOpt,
    SeedsOpt,
    given,
    parse_fractions,
    parse_seeds,
    print_table,
)

ConfigOpt = Annotated[str, typer.Option("--config", "-c", help="A built-in config (cpu-small, paper) or a YAML file.")]


@scratch_app.command("configs")
def scratch_configs() -> None:
    """List the built-in training configs and their settings."""
    from bindscope.scratch.config import BUILTIN, load_config

    keys = ("max_objects", "d_model", "layers", "heads", "ff", "d_out", "steps", "batch_size", "lr", "fraction")
    rows: list[tuple[str, ...]] = [("config", "objects", *keys)]
    for name in BUILTIN:
        cfg = load_config(name)
        rows.append((name, f"{cfg.preset().space.num_objects}", *(f"{getattr(cfg, k):g}" for k in keys)))
    print_table(rows)


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
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Train a scene and a query encoder from scratch (docs/method.md §9); an interrupted run resumes."""
    from bindscope.scratch.config import load_config
    from bindscope.scratch.train import train_model

    cfg = load_config(config, fraction=fraction, seed=seed, steps=steps, batch_size=batch_size)
    result = train_model(cfg, out, device=device, overwrite=overwrite, progress=not quiet)
    s = result.summary
    if result.status == "existing":
        typer.echo(f"{out} already holds this model; nothing to do")
    sel = s["selected"]
    typer.echo(
        f"config {s['config']}, fraction {s['fraction']:g} ({s['objects']['fit']} objects trained on, "
        f"{s['objects']['validation']} validation, {s['objects']['test']} held out), seed {s['seed']}"
    )
    rows = [("objects", "object acc %", "concept acc %")]
    for split, label in (("train", "trained on"), ("validation", "validation"), ("test", "held out")):
        if f"{split}_object_acc" in sel:
            rows.append((label, f"{100 * sel[f'{split}_object_acc']:.1f}", f"{100 * sel[f'{split}_concept_acc']:.1f}"))
    print_table(rows)
    typer.echo(
        f"selected step {s['selected_step']} ({s['selected_on']}); chance {100 * s['chance_test_object_acc']:.2f} %; "
        f"{s['steps']:,} steps in {s['seconds']:.0f} s"
    )
    typer.echo(f"\nwrote {out}; use it as the model spec scratch:{out}")


@scratch_app.command("sweep")
def scratch_sweep(
    out: OutDir,
    config: ConfigOpt = "cpu-small",
    fractions: Annotated[str, typer.Option(help="Train fractions (coverage), comma-separated.")] = "0.2,0.4,0.6,0.8",
    seeds: SeedsOpt = None,
    steps: Annotated[Optional[int], typer.Option(help="Training steps per run; default: the config's.")] = None,
    workers: Annotated[
        int, typer.Option(help="Runs trained at once in worker processes (the CPU threads are split between them).")
    ] = 1,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Held-out-object accuracy against coverage: one model per fraction and seed; finished runs are kept."""
    from bindscope.scratch.config import load_config
    from bindscope.scratch.sweep import SweepSettings, sweep

    cfg = load_config(config, steps=steps)
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
    rows = [("fraction", "held-out object acc %", "std", "min", "max", "trained-on object acc %")]
    for f, entry in s["per_fraction"].items():
        h, t = entry["test_object_acc"], entry["train_object_acc"]
        std = "-" if h["std"] is None else f"{100 * h['std']:.1f}"
        rows.append(
            (
                f,
                f"{100 * h['mean']:.1f}",
                std,
                f"{100 * h['min']:.1f}",
                f"{100 * h['max']:.1f}",
                f"{100 * t['mean']:.1f}",
            )
        )
    print_table(rows)
    typer.echo(f"chance {100 * s['chance_object_acc']:.2f} %")
    typer.echo(f"\nseeds {', '.join(map(str, s['seeds']))}; wrote {out}")


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
) -> None:
    """Embed every ordered object pair with the scene encoder and write the query probes: inputs for every analysis."""
    from bindscope.scratch.export import export_model

    r = export_model(model, out, layer=layer, control=control, device=device, overwrite=overwrite, progress=not quiet)
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
