"""The ``bindscope`` command: ``main`` runs the typer app with one-line errors and exit statuses."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from bindscope.cli import cache, data, embeddings, export, measure, run, scratch  # noqa: F401 (their commands register on import)
from bindscope.cli.app import app
from bindscope.cli.common import QuietOpt, WaitOpt, quiet_model_libraries
from bindscope.core.errors import BindscopeError, os_error_message


@app.command(
    short_help="The main job on the embedded default model (all-MiniLM-L6-v2, offline): every analysis, "
    "then the report."
)
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Run folder.")] = Path("runs/demo"),
    quick: Annotated[
        bool, typer.Option(help="A smaller run: one seed, a small subsample, a short scratch model, short fits.")
    ] = False,
    print_config: Annotated[
        bool, typer.Option("--print-config", help="Print the demo's run config (YAML) to start from; run nothing.")
    ] = False,
    quiet: QuietOpt = False,
    wait: WaitOpt = False,
) -> None:
    """The main job on the embedded default model (all-MiniLM-L6-v2, offline): `bindscope run` on the shipped
    demo config (text and clevr captions, the +rand control, single-object captions, a controlled model trained
    from scratch; every analysis that applies; the report). Finished steps are reused."""
    from bindscope.cli.run import run_and_answer
    from bindscope.pipeline.demo import demo_config, demo_config_path

    if print_config:
        typer.echo(demo_config_path(quick).read_text(), nl=False)
        return
    quiet_model_libraries()
    run_and_answer(demo_config(quick), out, quiet)


def main(argv: list[str] | None = None) -> None:
    """Entry point. Bad input, usage mistakes included, is one line on stderr.

    Exit status: 0 success, 1 bad input (a :class:`BindscopeError`) or an error of the operating system (a
    write the disk refused: full, read-only; a name too long, a link loop ...), 2 command-line usage,
    130 interrupted (Ctrl-C), 143 terminated (SIGTERM: cleaned up like Ctrl-C).
    """
    interrupted = "interrupted; run the same command again (embed continues where it stopped)"
    signal.signal(signal.SIGTERM, _terminated)
    try:
        status = _run_app(argv)
    except BindscopeError as exc:
        _fail(str(exc), 1)
    except OSError as exc:
        _fail(os_error_message(exc), 1)
    except (typer.Abort, KeyboardInterrupt):
        _fail(interrupted, 130)
    except Terminated:
        _fail("terminated; run the same command again (finished steps are kept)", 143)
    except typer.TyperException as exc:  # click's usage errors (bad option, missing argument)
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError":
            typer.echo(exc.format_message(), err=True)
            sys.exit(0)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        message = " ".join(exc.format_message().split())
        _fail(f"{message}{hint}", getattr(exc, "exit_code", 2))
    if status == 130:  # typer turns Ctrl-C into a silent exit status 130
        _fail(interrupted, 130)
    sys.exit(status if isinstance(status, int) else 0)


def _run_app(argv: list[str] | None) -> object:
    """The typer app; executors it started (a local Ray instance) are shut down afterwards."""
    from bindscope.core.executors import choose_executor, close_executors
    from bindscope.core.locks import new_writer

    new_writer()  # a command of its own: what another command holds is never taken for its own
    choose_executor(name="local", address="", memory_gb=0)  # each invocation starts from the default executor
    try:
        return app(args=argv, standalone_mode=False)
    finally:
        close_executors()


class Terminated(BaseException):
    """SIGTERM, raised where the process is, so that locks and partial files are cleaned up on the way out."""


def _terminated(signum: int, frame: object) -> None:
    raise Terminated()


def _fail(message: str, status: int) -> None:
    flat = " ".join(message.split())  # one line, even where a message quotes a library's multi-line error
    typer.echo(f"error: {flat}", err=True)
    sys.exit(status)
