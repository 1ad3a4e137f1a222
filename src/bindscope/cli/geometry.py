"""``bindscope geometry``: the shape of object embeddings, for one folder or several side by side (§8)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from bindscope.cli.app import app
from bindscope.cli.common import (
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
from bindscope.cli.measure import AttributeOpt, DatasetOpt, NounOpt


def parse_names(text: str | None, option: str, example: str) -> tuple[str, ...] | None:
    return parse_list(text, str.strip, option, example)


@app.command()
def geometry(
    emb_dirs: Annotated[
        list[Path],
        typer.Argument(
            help="Embedding folders: scene embeddings (their single-object bank is found beside them) or "
            "single-object folders (`bindscope embed --single-objects`). Several folders (models or layers) are "
            "also compared: factorization R² against linear-head generalisation.",
            show_default=False,
            metavar="EMB...",
        ),
    ],
    out: OutDir,
    fractions: Annotated[
        Optional[str],
        typer.Option(help="Object-level fractions seen by the held-out fits and heads (0.1,0.2,...,0.9)."),
    ] = None,
    seeds: SeedsOpt = None,
    ordinal: Annotated[
        Optional[str],
        typer.Option(
            help="Concepts to treat as ordinal (values in the space's order), comma-separated, besides those the "
            "dataset marks; they get rank axes."
        ),
    ] = None,
    labelled: Annotated[
        Optional[str],
        typer.Option(help="Labelled objects per rank axis, comma-separated (2,8,32; all of them are always added)."),
    ] = None,
    whitening_ridge: Annotated[
        Optional[float], typer.Option(help="Whitening: ridge added to the covariance, times its mean eigenvalue (0.1).")
    ] = None,
    head_c: Annotated[Optional[float], typer.Option(help="Linear heads: inverse L2 strength C (10).")] = None,
    rank_tolerance: Annotated[
        Optional[float], typer.Option(help="Numerical rank: singular values above this times the largest (1e-6).")
    ] = None,
    attribute: AttributeOpt = None,
    noun: NounOpt = None,
    quad: Annotated[
        Optional[str],
        typer.Option(
            help="The MDS quadruple: attribute i, noun j, attribute k, noun l as value names, e.g. "
            "red,cube,blue,sphere (default: the first two values of each)."
        ),
    ] = None,
    mds: Annotated[bool, typer.Option("--mds/--no-mds", help="Draw the MDS picture (on by default).")] = True,
    singles: Annotated[
        Optional[Path],
        typer.Option(help="The single-object bank of the (one) folder, if not beside it."),
    ] = None,
    labels: Annotated[
        Optional[str], typer.Option(help="Names of the folders' results, comma-separated (default: folder names).")
    ] = None,
    dataset: DatasetOpt = None,
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
    wait: WaitOpt = False,
) -> None:
    """What shape do object embeddings have? Factorization, orthogonality, rank, linear heads, rank axes, MDS."""
    from bindscope.analyses import GeometrySettings, get_analysis
    from bindscope.pipeline.combine.geometry import run_geometry

    settings = GeometrySettings(
        mds=mds,
        **given(
            fractions=parse_fractions(fractions),
            seeds=parse_seeds(seeds),
            ordinal=parse_names(ordinal, "--ordinal", "size,age"),
            labelled=parse_list(labelled, int, "--labelled", "2,8,32"),
            whitening_ridge=whitening_ridge,
            head_c=head_c,
            rank_tolerance=rank_tolerance,
            attribute=attribute,
            noun=noun,
            quad=parse_names(quad, "--quad", "red,cube,blue,sphere"),
        ),
    )
    with progress_bar("geometry", "step", quiet) as advance:
        run = run_geometry(
            emb_dirs,
            out,
            settings,
            singles=singles,
            dataset=dataset,
            labels=parse_names(labels, "--labels", "clip,siglip"),
            overwrite=overwrite,
            progress=advance,
        )
    analysis = get_analysis("geometry")
    for label, result in run.results.items():
        if len(run.results) > 1:
            typer.echo(f"\n== {label}  ({result.path})")
        print_table(analysis.headline(result.view))
        for line in analysis.notes(result.view):
            typer.echo(line)
        warn(result.header.warnings)
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
