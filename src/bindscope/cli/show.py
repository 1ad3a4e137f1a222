"""What an analysis command prints: the headline table, the notes, the warnings, where it wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from bindscope.cli.common import print_table, progress_bar, warn


def run_and_show(name: str, inputs: Any, out: Path, settings: Any, overwrite: bool, quiet: bool) -> None:
    """Run an analysis through the registry, then print its headline, notes, warnings and folder."""
    from bindscope.analyses import run_analysis

    with progress_bar(name, "step", quiet) as advance:
        result = run_analysis(name, inputs, out, settings, overwrite=overwrite, progress=advance)
    show_result(name, result)
    typer.echo(f"\nseeds {', '.join(map(str, result.header.seeds))}; wrote {out}")


def show_result(name: str, result: Any) -> None:
    """A result's headline table, notes and warnings."""
    from bindscope.analyses import get_analysis
    from bindscope.analyses.card import verdict_lines

    analysis = get_analysis(name)
    print_table(analysis.headline(result.view))
    for line in analysis.notes(result.view):
        typer.echo(line)
    verdicts = result.typed.verdicts if result.typed is not None else {}
    for line in verdict_lines(analysis.columns, verdicts):
        typer.echo(f"verdict: {line}")
    warn(result.header.warnings)


def show_geometry(name: str, run: Any, settings: Any, out: Path) -> None:
    """Each folder's geometry and, with several, their comparison."""
    for label, result in run.results.items():
        if len(run.results) > 1:
            typer.echo(f"\n== {label}  ({result.path})")
        show_result(name, result)
    if run.comparison is not None:
        typer.echo("\n== factorization vs generalisation across folders (linear-head object accuracy)")
        print_table(comparison_rows(run.comparison))
    typer.echo(f"\nseeds {', '.join(map(str, settings.seeds))}; wrote {out}")


def comparison_rows(comparison: dict) -> list[tuple[str, ...]]:
    """Pearson / Spearman of each factorization measure with head accuracy, pooled and per fraction."""
    rows: list[tuple[str, ...]] = [("measure", "fraction", "pearson", "spearman", "points")]
    for measure, node in comparison["correlations"].items():
        for where, c in [("pooled", node["pooled"]), *node["fractions"].items()]:
            rows.append((measure, where, signed(c["pearson"]), signed(c["spearman"]), str(c["n"])))
    return rows


def signed(v: float | None) -> str:
    return "-" if v is None else f"{v:+.3f}"
