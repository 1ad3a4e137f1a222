"""The model libraries' own progress output, off while bindscope loads a model, and restored afterwards.

transformers draws a "Loading weights" bar for every model it loads (local folders included) and
huggingface_hub one bar per downloaded file. bindscope shows its own progress (rows embedded, steps run), so
while it loads a model with progress off (the default of the Python API, and every ``bindscope`` command) those
bars are switched off, through the libraries' own switches, and switched back to what they were when the load
ends: a script's own transformers calls afterwards behave as they did before.

The switches are process-wide, so the blocks count: the libraries are silenced when the first block enters and
restored when the last one leaves (threads loading models at once do not restore each other's settings half way).
A command line process silences them for its whole life with :func:`quiet_for_process`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

#: The libraries whose bars :func:`quiet_model_libraries` switches off by default, in the order they are switched:
#: transformers first, since on its first import it takes the hub's switch as its own starting value.
MODEL_LIBRARIES = ("transformers", "huggingface_hub")

_lock = threading.Lock()
_depth: dict[str, int] = {}
_restore: dict[str, Callable[[], None]] = {}
_process: list[bool] = []  # whether :func:`quiet_for_process` has switched them off (for good)


@contextmanager
def quiet_model_libraries(libraries: Iterable[str] = MODEL_LIBRARIES) -> Iterator[None]:
    """No progress bars from the model libraries in the block; their settings as they were after it.

    Parameters
    ----------
    libraries
        Names among :data:`MODEL_LIBRARIES`; one that is not installed is left alone (nothing is imported for it).

    Examples
    --------
    >>> from bindscope.embeddings.encoders.quiet import quiet_model_libraries
    >>> with quiet_model_libraries():
    ...     pass  # load a model here: no "Loading weights" bar
    """
    entered: list[str] = []
    try:
        for name in installed(libraries):
            _enter(name)
            entered.append(name)
        yield
    finally:
        for name in reversed(entered):
            _leave(name)


def quiet_for_process() -> None:
    """Silence the model libraries for the rest of the process (a ``bindscope`` command: its own bars show the
    work); the same switches as :func:`quiet_model_libraries`, entered once and never left.

    Only the libraries already imported are switched: none is imported for this (transformers alone costs
    hundreds of MB, which a command that loads no model should not pay). A command sets
    ``HF_HUB_DISABLE_PROGRESS_BARS`` before it imports any of them, under which both start with their bars off
    (transformers takes the hub's switch as its own starting value), and every model load is a
    :func:`quiet_model_libraries` block besides."""
    with _lock:
        if _process:
            return
        _process.append(True)
    for name in installed(MODEL_LIBRARIES):
        if name in sys.modules:
            _enter(name)


def installed(libraries: Iterable[str]) -> list[str]:
    """The ones of ``libraries`` this module can switch that are installed (found without importing them)."""
    return [n for n in dict.fromkeys(libraries) if n in _SWITCHES and importlib.util.find_spec(n) is not None]


def _enter(name: str) -> None:
    with _lock:
        if _depth.get(name, 0) == 0:
            _restore[name] = _SWITCHES[name]()
        _depth[name] = _depth.get(name, 0) + 1


def _leave(name: str) -> None:
    with _lock:
        _depth[name] -= 1
        if _depth[name] == 0:
            _restore.pop(name)()


def _hub_off() -> Callable[[], None]:
    """huggingface_hub's bars off; returns what puts its per-group settings back."""
    bars = importlib.import_module("huggingface_hub.utils.tqdm")
    if bars.HF_HUB_DISABLE_PROGRESS_BARS is not None:  # the user's environment decides, and code cannot change it
        return lambda: None
    states = getattr(bars, "progress_bar_states", None)
    saved = dict(states) if states is not None else None
    was_off = bars.are_progress_bars_disabled()
    bars.disable_progress_bars()

    def restore() -> None:
        if states is not None and saved is not None:
            states.clear()
            states.update(saved)
        elif not was_off:
            bars.enable_progress_bars()

    return restore


def _transformers_off() -> Callable[[], None]:
    """transformers' bars (its "Loading weights" bar among them) off; returns what switches them back on."""
    logging = importlib.import_module("transformers.utils.logging")
    was_on = bool(logging.is_progress_bar_enabled())
    hub = sys.modules.get("huggingface_hub.utils.tqdm")
    saved = dict(hub.progress_bar_states) if hub is not None and hasattr(hub, "progress_bar_states") else None
    with warnings.catch_warnings():  # the hub's environment may forbid the change: it keeps its bars as set
        warnings.simplefilter("ignore")
        logging.disable_progress_bar()  # (this switches the hub's bars too: put back below)

    def restore() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if was_on:
                logging.enable_progress_bar()
        if saved is not None and hub is not None:
            hub.progress_bar_states.clear()
            hub.progress_bar_states.update(saved)

    return restore


_SWITCHES: dict[str, Callable[[], Callable[[], None]]] = {
    "huggingface_hub": _hub_off,
    "transformers": _transformers_off,
}

__all__ = ["MODEL_LIBRARIES", "quiet_for_process", "quiet_model_libraries"]
