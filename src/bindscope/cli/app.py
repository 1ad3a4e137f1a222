"""The ``bindscope`` typer application and its command groups (commands register in their modules; the analyses'
commands are generated, :mod:`bindscope.cli.group`)."""

from __future__ import annotations

from typing import Annotated

import typer

from bindscope.cli.group import Commands
from bindscope.core.version import __version__

app = typer.Typer(
    cls=Commands,
    name="bindscope",
    help="Measure how embedding models bind concepts: controlled scenes, probes, decompositions, "
    "binding-function complexity.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
)
dataset_app = typer.Typer(help="Build, inspect and split dataset folders.", no_args_is_help=True)
embeddings_app = typer.Typer(help="Bring in and inspect embedding folders.", no_args_is_help=True)
scratch_app = typer.Typer(
    help="Controlled models trained from scratch: train, sweep coverage, export for the analyses.", no_args_is_help=True
)
app.add_typer(dataset_app, name="dataset")
app.add_typer(embeddings_app, name="embeddings")
app.add_typer(scratch_app, name="scratch")
cache_app = typer.Typer(
    help="The embedding cache shared by every embedding folder: list it, remove entries, show where it is.",
    no_args_is_help=True,
)
app.add_typer(cache_app, name="cache")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"bindscope {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Measure how embedding models bind concepts."""
