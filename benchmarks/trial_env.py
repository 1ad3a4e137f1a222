"""What the hostile trials (``trial_*.py``) share: a command's outcome and the environment of a sandbox.

Trial scripts are run by path, so this folder is on ``sys.path``::

    from trial_env import Done, sandbox_env
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Done:
    """A finished ``bindscope`` command: its arguments, exit status and output."""

    args: list[str]
    status: int
    stdout: str
    stderr: str


def sandbox_env(root: Path) -> dict[str, str]:
    """The environment of commands run in ``root``: HOME, every cache and TMPDIR inside it (created), offline,
    one thread, no colour, wide, no progress lines, and none of the caller's ``BINDSCOPE_*`` settings."""
    home = root / "home"
    caches = {
        "HOME": home,
        "XDG_CACHE_HOME": home / ".cache",
        "HF_HOME": home / ".cache" / "huggingface",
        "TORCH_HOME": home / ".cache" / "torch",
        "MPLCONFIGDIR": home / ".config" / "matplotlib",
        "TMPDIR": root / "tmp",
    }
    for path in caches.values():
        path.mkdir(parents=True, exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("BINDSCOPE_")}
    return {
        **base,
        **{k: str(v) for k, v in caches.items()},
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "TERM": "dumb",
        "BINDSCOPE_PROGRESS_SECONDS": "86400",
    }
