"""What the commands share: option types declared once, list parsing, tables, progress, warnings."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer

from bindscope.core.errors import BindscopeError

T = TypeVar("T")


class ObjectOrderChoice(str, Enum):
    """How object splits order the objects (``bindscope.space.splits.OBJECT_ORDERS``)."""

    covering = "covering"
    random = "random"
    closed = "closed"


class Modality(str, Enum):
    image = "image"
    text = "text"


# -- lists: one convention everywhere, comma-separated values ------------------------------------------
def parse_list(text: str | None, convert: Callable[[str], T], option: str, example: str) -> tuple[T, ...] | None:
    """``"a,b,c"`` as a tuple of converted values (None when the option was not given)."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not parts or any(not p for p in parts):
        raise BindscopeError(f"{option} takes comma-separated values without empty items, e.g. {example}; got {text!r}")
    try:
        return tuple(convert(p) for p in parts)
    except ValueError:
        raise BindscopeError(f"{option} takes comma-separated values, e.g. {example}; got {text!r}") from None


def parse_seeds(text: str | None) -> tuple[int, ...] | None:
    """``--seeds 0,1,2``: seed ids."""
    return parse_list(text, int, "--seeds", "0,1,2")


def parse_fractions(text: str | None) -> tuple[float, ...] | None:
    """``--fractions 0.2,0.4``."""
    return parse_list(text, float, "--fractions", "0.2,0.4,0.6,0.8")


def given(**values: Any) -> dict[str, Any]:
    """The options the user gave (not None): the rest keep the settings' defaults."""
    return {k: v for k, v in values.items() if v is not None}


# -- options shared by several commands -----------------------------------------------------------------
OutDir = Annotated[Path, typer.Option("--out", "-o", help="Output folder; must be new or empty.")]
DatasetOpt = Annotated[
    Optional[Path], typer.Option(help="The dataset folder, if not where the embedding manifest says.")
]
SeedsOpt = Annotated[
    Optional[str], typer.Option(help="Seed ids, comma-separated (splits and initialisations); default 0,1,2.")
]
DeviceOpt = Annotated[str, typer.Option(help="Torch device: cpu, cuda, cuda:1 ...")]
OverwriteOpt = Annotated[bool, typer.Option(help="Replace an existing output folder.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]


def _wait_for_locks(value: bool) -> bool:
    from bindscope.core.locks import wait_for_locks

    wait_for_locks(value)
    return value


WaitOpt = Annotated[
    bool,
    typer.Option(
        "--wait",
        callback=_wait_for_locks,
        help="If another bindscope process is writing the same output, wait for it instead of failing.",
    ),
]


def _executor(value: Optional[ExecutorName]) -> Optional[ExecutorName]:
    if value is not None:
        from bindscope.core.executors import choose_executor

        choose_executor(name=value.value)
    return value


def _address(value: Optional[str]) -> Optional[str]:
    if value is not None:
        from bindscope.core.executors import choose_executor, chosen_executor

        choose_executor(address=value)
        chosen_executor()  # --executor is read first (eager): refuse an address for the local executor now
    return value


def _memory(value: Optional[float]) -> Optional[float]:
    if value is not None:
        from bindscope.core.executors import choose_executor, chosen_executor

        if value <= 0:
            raise BindscopeError(f"--memory must be positive (GB per unit of work), got {value:g}")
        choose_executor(memory_gb=value)
        chosen_executor()
    return value


class ExecutorName(str, Enum):
    local = "local"
    ray = "ray"


ExecutorOpt = Annotated[
    Optional[ExecutorName],
    typer.Option(
        "--executor",
        callback=_executor,
        is_eager=True,
        help="Where units of work run: local (this machine, the default) or ray (a Ray cluster; see --address).",
    ),
]
MemoryOpt = Annotated[
    Optional[float],
    typer.Option(
        "--memory",
        callback=_memory,
        help="With --executor ray: GB of memory each unit of work reserves (Ray schedules by it).",
    ),
]
AddressOpt = Annotated[
    Optional[str],
    typer.Option(
        "--address",
        callback=_address,
        help="With --executor ray: the cluster (auto, HOST:PORT or ray://HOST:PORT); none starts Ray on this machine.",
    ),
]


# -- output -------------------------------------------------------------------------------------------------
def print_table(rows: Sequence[Sequence[str]]) -> None:
    """Columns padded to their widest cell."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def warn(warnings: list[str]) -> None:
    """Warnings on stderr, one line each."""
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)


@contextmanager
def progress_bar(description: str, unit: str, quiet: bool) -> Iterator[Callable[[int, int], None]]:
    """A ``progress(done, total)`` callback showing progress on stderr (:func:`bindscope.core.progress.progress_bar`:
    a bar in a terminal, a line every half minute in a log; nothing under ``--quiet``)."""
    from bindscope.core.progress import progress_callback

    with progress_callback(description, unit, enabled=not quiet) as advance:
        yield advance


def quiet_model_libraries() -> None:
    """No per-file progress bars from transformers / huggingface_hub while models load (ours show the work): the
    library's switch (:func:`bindscope.embeddings.encoders.quiet.quiet_model_libraries`), on for the whole command,
    and for the processes it starts."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from bindscope.embeddings.encoders.quiet import quiet_for_process

    quiet_for_process()
