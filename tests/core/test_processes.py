"""Worker pools from a plain script: a file saved without an ``if __name__ == "__main__":`` guard runs once,
and its render and unit workers do their work (Python's spawn would otherwise run the script in each)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bindscope.core.processes import main_script_hidden

TILES = """\
name: tiles
concepts:
  color: [red, blue, green]
  shape: [square, triangle, circle]
objects_per_scene: 2
scenes: {mode: enumerate}
caption: {object: "a {color} {shape}"}
noun: shape
modalities: [image, text]
renderer: flat2d
image: {width: 32, height: 32}
"""


def run_script(folder: Path, code: str) -> subprocess.CompletedProcess:
    """``code`` saved as ``folder/script.py`` (no main guard) and run as ``python script.py``."""
    (folder / "script.py").write_text(code)
    return subprocess.run([sys.executable, "script.py"], cwd=folder, capture_output=True, text=True, timeout=120)


def test_a_script_without_a_main_guard_renders_with_worker_processes(tmp_path: Path) -> None:
    (tmp_path / "tiles.yaml").write_text(TILES)
    done = run_script(
        tmp_path,
        "import bindscope as bs\n"
        "ds = bs.build_dataset('tiles.yaml', 'data/tiles', workers=2)\n"
        "print('built', len(ds), sum(1 for _ in (ds.root / 'images').rglob('*.png')))\n",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["built 81 99"]  # the script ran once: no worker ran it again


def test_a_script_without_a_main_guard_runs_units_in_worker_processes(tmp_path: Path) -> None:
    done = run_script(
        tmp_path,
        "import math\n"
        "from bindscope.core.executors import LocalExecutor, Unit\n"
        "units = [Unit(f'k{x}', f'unit {x}', math.hypot, (x,)) for x in (0, 4)]\n"
        "print(sorted(d.result for d in LocalExecutor(workers=2).map(units, 3.0)))\n",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[3.0, 5.0]"]


def test_the_main_module_is_whole_again_after_the_workers_start() -> None:
    main = sys.modules["__main__"]
    before = (getattr(main, "__file__", None), main.__spec__)
    with main_script_hidden():
        assert main.__spec__ is None and not hasattr(main, "__file__")
    assert (getattr(main, "__file__", None), main.__spec__) == before
