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
    QuietOpt,
    WaitOpt,
    progress_bar,
    quiet_model_libraries,
    warn,
)


@app.command("run")
def run_command(
    config: Annotated[
        str,
        typer.Argument(
            help="A run config (YAML), or a shipped one by name (demo, demo-quick); "
            "`bindscope demo --print-config` prints the demo's.",
            show_default=False,
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The run folder (resumed when it holds this run).")],
    device: Annotated[Optional[str], typer.Option(help="Torch device for every step, instead of the config's.")] = None,
    quiet: QuietOpt = False,
    wait: WaitOpt = False,
    executor: ExecutorOpt = None,
    address: AddressOpt = None,
    memory: MemoryOpt = None,
) -> None:
    """Datasets -> embeddings -> every analysis that applies -> report.html, reusing finished steps."""
    from bindscope.pipeline.config import load_config

    quiet_model_libraries()
    run_and_answer(load_config(config, device=device), out, quiet)


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
