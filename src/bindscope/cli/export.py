"""``bindscope export``: a leaderboard of runs, one table as CSV and Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bindscope.cli.app import app
from bindscope.cli.common import WaitOpt, parse_list, warn


@app.command()
def export(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run folders of bindscope run.", show_default=False)],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            metavar="STEM",
            help="The files' path without suffix: writes STEM.csv and STEM.md (the formats --format names).",
        ),
    ],
    formats: Annotated[str, typer.Option("--format", help="What to write, comma-separated: csv, md.")] = "csv,md",
    overwrite: Annotated[bool, typer.Option(help="Replace existing files.")] = False,
    wait: WaitOpt = False,
) -> None:
    """One leaderboard table of runs: a row per run and embedding folder, a value and a verdict per card column; a
    warning for each way the runs are not like for like (as compare)."""
    from bindscope.pipeline.combine.leaderboard import export_runs

    chosen = parse_list(formats, str, "--format", "csv,md") or ()
    written, warnings = export_runs(run_dirs, out, formats=chosen, overwrite=overwrite)
    warn(warnings)
    typer.echo("wrote " + ", ".join(str(p) for p in written))
