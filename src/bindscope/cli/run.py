"""``bindscope run`` and ``bindscope report``: a config to a run folder with its HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from bindscope.cli.app import app
from bindscope.cli.common import (
    AddressOpt,
    ExecutorOpt,
    MemoryOpt,
    Modality,
    QuietOpt,
    WaitOpt,
    parse_list,
    progress_bar,
    quiet_model_libraries,
    warn,
)
from bindscope.core.errors import BindscopeError


@app.command("run")
def run_command(
    config: Annotated[
        Optional[str],
        typer.Argument(
            help="A run config (YAML), or a shipped one by name (demo, demo-quick); `bindscope demo --print-config` "
            "prints the demo's. Leave it out to give the run on the command line (--model, --embeddings).",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="The run folder (resumed when it holds this run).")
    ] = None,
    model: Annotated[
        Optional[list[str]],
        typer.Option(
            "--model",
            "-m",
            help="Without a config: a model spec to run (repeat for several; NAME=SPEC names its folders), e.g. "
            "st:all-MiniLM-L6-v2, hf:openai/clip-vit-base-patch32; `bindscope models` lists examples.",
            show_default=False,
        ),
    ] = None,
    dataset: Annotated[
        Optional[list[str]],
        typer.Option(
            "--dataset",
            help="With --model: a preset (or preset YAML) to embed, repeat for several; default text and clevr "
            "for a text model, clevr for an image-text one.",
            show_default=False,
        ),
    ] = None,
    analyses: Annotated[
        Optional[str],
        typer.Option(
            help="With --model: the analyses to run, comma-separated (default: every one that applies).",
            show_default=False,
        ),
    ] = None,
    embeddings: Annotated[
        Optional[list[str]],
        typer.Option(
            "--embeddings",
            help="An embedding folder made elsewhere (`bindscope embeddings import`), analysed like a model's; "
            "repeat for several (an image and a text folder of one name get the cross-modal tests).",
            show_default=False,
        ),
    ] = None,
    quick: Annotated[
        bool,
        typer.Option(help="With --model: a first look (one seed, 1,000 text scenes, fast solvers, a short sweep)."),
    ] = False,
    modality: Annotated[
        Optional[Modality], typer.Option(help="With --model: embed only this modality with every model.")
    ] = None,
    max_scenes: Annotated[
        Optional[str],
        typer.Option(
            help="With --model: subsample a larger preset to this many scenes (default 5,000, 1,000 with "
            "--quick); `all` keeps every scene.",
            show_default=False,
        ),
    ] = None,
    name: Annotated[
        Optional[str], typer.Option(help="With --model: the run's name (default: from the models' names).")
    ] = None,
    print_config: Annotated[
        bool, typer.Option("--print-config", help="Print the resolved run config (YAML); run nothing.")
    ] = False,
    device: Annotated[Optional[str], typer.Option(help="Torch device for every step, instead of the config's.")] = None,
    no_cache: Annotated[
        bool,
        typer.Option("--no-cache", help="Embed without the shared embedding cache (neither reuse nor add to it)."),
    ] = False,
    quiet: QuietOpt = False,
    wait: WaitOpt = False,
    executor: ExecutorOpt = None,
    address: AddressOpt = None,
    memory: MemoryOpt = None,
) -> None:
    """Datasets -> embeddings -> every analysis that applies -> report.html, reusing finished steps. Give a run
    config, or the run itself: `bindscope run --model st:all-MiniLM-L6-v2 --out runs/minilm`."""
    one_line = {
        "--model": model,
        "--dataset": dataset,
        "--analyses": analyses,
        "--embeddings": embeddings,
        "--quick": quick or None,
        "--modality": modality,
        "--max-scenes": max_scenes,
        "--name": name,
    }
    settings = resolved_config(config, {k: v for k, v in one_line.items() if v}, device)
    if print_config:
        typer.echo(settings.to_yaml(), nl=False)
        return
    if out is None:
        raise BindscopeError("--out is missing: name the run folder, e.g. --out runs/my-run")
    from bindscope.embeddings.cache import cache_off

    quiet_model_libraries()
    with cache_off(no_cache):
        run_and_answer(settings, out, quiet)


def resolved_config(config: str | None, one_line: dict[str, Any], device: str | None) -> Any:
    """The run config of a YAML file or shipped name, or the one the command-line options describe."""
    from bindscope.pipeline.config import load_config
    from bindscope.pipeline.oneline import one_line_config

    if config is not None:
        if one_line:
            raise BindscopeError(
                f"{', '.join(one_line)} describe a run without a config, and {config} is one; give the config alone "
                "(edit it to change the run), or leave it out"
            )
        return load_config(config, device=device)
    if not one_line.get("--model") and not one_line.get("--embeddings"):
        raise BindscopeError(
            "give a run config (bindscope run CONFIG.yaml --out DIR) or a model (bindscope run --model SPEC --out "
            "DIR); `bindscope demo --print-config` prints an example config, `bindscope models` lists specs"
        )
    if not one_line.get("--model"):
        for option in ("--dataset", "--modality", "--max-scenes"):
            if option in one_line:
                raise BindscopeError(f"{option} chooses what the --model runs embed; give --model SPEC too")
    modality = one_line.get("--modality")
    return one_line_config(
        one_line.get("--model") or [],
        one_line.get("--dataset"),
        parse_list(one_line.get("--analyses"), str, "--analyses", "probe,decompose"),
        [str(Path(e).absolute()) for e in one_line.get("--embeddings") or []],  # the run may start elsewhere
        quick=bool(one_line.get("--quick")),
        name=one_line.get("--name"),
        device=device,
        modality=modality.value if modality is not None else None,
        max_scenes=scene_cap(one_line.get("--max-scenes")),
    )


def scene_cap(text: str | None) -> int | None:
    """``--max-scenes``: a number, ``all`` (None: every scene), or unset (-1: the default)."""
    if text is None:
        return -1
    if text == "all":
        return None
    try:
        return int(text)
    except ValueError:
        raise BindscopeError(f"--max-scenes takes a number of scenes or all, got {text!r}") from None


def run_and_answer(settings: Any, out: Path, quiet: bool) -> None:
    """Run a config into ``out``, then print the plain-language answers and where the report is."""
    from bindscope.pipeline.run import run_pipeline
    from bindscope.pipeline.steps import time_table

    def bars(name: str) -> Any:
        return progress_bar(name, "step", quiet)

    state = run_pipeline(settings, out, say=typer.echo, progress=None if quiet else bars)
    answers(out)
    typer.echo("\ntime per step:")
    for line in time_table(state.log.to_list()):
        typer.echo(f"  {line}")
    typer.echo(f"\nreport: {out / 'report.html'}" if settings.report else f"\nwrote {out}")
    for line in skip_lines(state.log.skips()):
        typer.echo(line)


def skip_lines(skips: list[Any]) -> list[str]:
    """The run's last lines: how many analyses it skipped, then each with its reason and fix."""
    if not skips:
        return ["skipped: none (every analysis ran)"]
    counted = f"skipped: {len(skips)} analys{'i' if len(skips) == 1 else 'e'}s (status complete_with_skips)"
    return [counted, *(f"  {s.line()}" for s in skips)]


def answers(out: Path) -> None:
    """The report card's plain-language readings, per embedding folder."""
    from bindscope.pipeline.report import run_card

    for row in run_card(out):
        typer.echo(f"\n{row.dataset} / {row.label}:")
        for line in row.readings:
            typer.echo(f"  {line}")


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run folder of bindscope run.", show_default=False)],
    wait: WaitOpt = False,
) -> None:
    """Write (again) the self-contained HTML report of a run folder."""
    from bindscope.pipeline.report import write_report

    typer.echo(f"wrote {write_report(run_dir)}")


@app.command()
def compare(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run folders of bindscope run.", show_default=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder; must be new or empty.")],
    overwrite: Annotated[bool, typer.Option(help="Replace an existing output folder.")] = False,
    wait: WaitOpt = False,
) -> None:
    """Several runs side by side: merged tables, the report cards as one table, a figure per headline metric;
    a warning for each way the runs are not like for like (datasets, scene counts, seeds, solver)."""
    import json

    from bindscope.pipeline.combine.runs import WARNINGS, compare_runs

    done = compare_runs(run_dirs, out, overwrite=overwrite)
    warn(json.loads((done / WARNINGS).read_text()))
    typer.echo(f"wrote {done / 'compare.html'}")
