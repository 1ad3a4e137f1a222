"""Golden results of every registered analysis on small planted inputs, and the command that rewrites them.

Each analysis runs once, through the public API only (``bindscope.analyses.run_analysis`` on in-memory
:class:`~bindscope.analyses.AnalysisInputs`), on a tiny planted dataset: the 144 two-object scenes of a
4 x 3 concept space (size, ordinal, and shape), 16-dimensional planted embeddings with a ``+rand``
control, frozen probes from a ``probe`` run, a single-object bank, a second (text) modality with its
single-object captions, and uni-modal probe accuracies. Every analysis gets the inputs it needs and
uses (``get_analysis(name).needs | .uses``), and short settings (plain dicts, :data:`SETTINGS`).

A case records what the result folder holds: the analysis's numbers of ``summary.json`` (the summary
minus the common header) and every table (``results.parquet`` and each further ``*.parquet``), rows
sorted (a table of over :data:`MAX_CELLS` cells as a digest), as JSON under
``tests/regression/golden/<analysis>.json``. Values that describe the
invocation rather than the computation (wall time, paths, reuse counts) are left out (:data:`VOLATILE`).
``tests/regression/test_golden.py`` runs the cases afresh and compares them with the goldens.

The cases run in a process of their own with the CPU kernels pinned (:data:`PINNED_KERNELS`: torch, MKL and
OpenBLAS on their AVX2 paths), so that an x86-64 machine with AVX-512 computes the bits one without it does:
a short fit carries the last-bit differences of other kernels far enough to move a near-tie scene across a
probe's boundary (one decompose accuracy moved by one scene in 174 on an AVX-512 machine).

Rewrite the goldens (only after a change that is meant to change the numbers; say why in the commit)::

    python tests/helpers/golden_cases.py --regen                    # every analysis
    python tests/helpers/golden_cases.py --regen probe geometry     # some of them
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bindscope import Dataset, SceneSet, build_dataset
from bindscope.analyses import AnalysisInputs, get_analysis, list_analyses, load_frozen_probes, run_analysis
from bindscope.data.presets import preset_from_dict
from bindscope.space.planted import planted_embeddings

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "regression" / "golden"
#: The kernels every case runs on (read when torch, MKL and OpenBLAS load: set before the process starts).
PINNED_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "OPENBLAS_CORETYPE": "Haswell"}
REGEN = "python tests/helpers/golden_cases.py --regen"

#: The planted dataset: 4 sizes (ordinal) x 3 shapes = 12 objects, every ordered pair of them (144 scenes).
PRESET: dict[str, Any] = {
    "name": "golden",
    "concepts": {
        "size": {"values": ["small", "medium", "large", "huge"], "ordinal": True},
        "shape": ["cube", "sphere", "cylinder"],
    },
    "objects_per_scene": 2,
    "noun": "shape",
}
DIM = 16
NOISE = 0.1
#: The run whose fitted probes (seed 0) are the frozen probes of the analyses that use probes.
FROZEN_PROBES: dict[str, Any] = {"seeds": [0], "steps": 200, "max_iter": 50, "optimizer": "fast"}
#: Uni-modal probe accuracies (what ``load_inputs(unimodal=...)`` reads from ``probe`` results).
UNIMODAL: dict[str, dict[str, Any]] = {
    "image": {
        "object_acc": {"mean": 0.9, "std": 0.05, "n_seeds": 2},
        "concept_acc": {"mean": 0.95, "std": 0.01, "n_seeds": 2},
    },
    "text": {
        "object_acc": {"mean": 0.6, "std": 0.1, "n_seeds": 2},
        "concept_acc": {"mean": 0.8, "std": 0.02, "n_seeds": 2},
    },
}
#: Short settings per analysis, as plain dicts (``get_analysis(name).Settings(**SETTINGS[name])``).
SETTINGS: dict[str, dict[str, Any]] = {
    # the reference (Adam) schedule: L-BFGS fits of the permuted-labels control flip a few test scenes when torch
    # runs other SIMD kernels (measured with ATEN_CPU_CAPABILITY=default); decompose and the frozen probes
    # cover the ``fast`` optimiser (the paper's trajectory: L-BFGS, then the reference schedule for separable
    # probes), named since the default became ``regularised``
    "probe": {"seeds": [0, 1], "optimizer": "reference", "steps": 200},
    "decompose": {"seeds": [0], "steps": 200, "max_iter": 50, "optimizer": "fast"},
    "complexity": {
        "approximators": ["additive", "mlp"],
        "hidden": [8],
        "fractions": [0.5, 0.8],
        "seeds": [0],
        "budget": {"name": "cpu", "sweeps": 20, "epochs": 20, "eval_every": 5, "starts": 2, "start_sweeps": 2},
        "description_length": False,
    },
    "intervene": {"k": [0.0, 1.0]},
    "crossmodal": {"fractions": [0.6], "seeds": [0]},
    "geometry": {"fractions": [0.5], "seeds": [0], "labelled": [2, 4]},
}
#: Tables of more cells than this are kept as a digest (row count, a hash of the exact cells, sums of the
#: measured numbers), which keeps each golden file small; the others row by row.
MAX_CELLS = 6_000
#: Keys (in the summary's numbers, at any depth) and table columns that describe the invocation, not
#: the computation: wall time, reuse of earlier work, where things were written.
VOLATILE = re.compile(r"(seconds|_s$|^time|_time|timing|^fits$|rows_reused|reused|path|folder|created|version)")


@dataclass(frozen=True)
class World:
    """The planted inputs every case draws from."""

    scenes: SceneSet
    noun: str
    kinds: dict[str, Any]  # input kind -> value (image modality)
    text_singles: np.ndarray  # the second modality's single-object captions, one row per object


# -- inputs -------------------------------------------------------------------------------------------------
def _vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    return rng.normal(0.0, 1.0 / np.sqrt(DIM), (count, DIM))


def positional_objects(scenes: SceneSet, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Scene embeddings that sum per-slot object vectors, and the single-object bank (rows object-major:
    row ``o * S + s`` is object ``o`` alone at slot ``s``), both with noise.

    An object's vector is partly the sum of its concepts' vectors and partly its own (``v[o] = sum_c E_c[o_c]
    + 0.7 R[o]``), shifted a little per slot (``T_s[o] = v[o] + 0.3 W_s[o]``): every analysis then reads
    graded numbers, not only zeros and ones.
    """
    rng = np.random.default_rng(seed)
    space, k = scenes.space, scenes.max_objects
    values = space.all_objects()
    v = 0.7 * _vectors(rng, space.num_objects)
    for c, size in enumerate(space.sizes):
        v += _vectors(rng, size)[values[:, c]]
    tables = [v + 0.3 * _vectors(rng, space.num_objects) for _ in range(k)]
    ids = scenes.object_ids()
    y = sum(tables[s][ids[:, s]] for s in range(k)) + NOISE * _vectors(rng, len(scenes))
    singles = np.stack(tables, axis=1).reshape(space.num_objects * k, DIM)
    singles = singles + NOISE * _vectors(rng, len(singles))
    return np.asarray(y, np.float32), singles.astype(np.float32)


def text_embeddings(scenes: SceneSet) -> np.ndarray:
    """The second (text) modality: per-slot concept vectors summed, with noise. Its single-object captions are
    the same function of each object alone (the same seed draws the same concept tables)."""
    return planted_embeddings(scenes, "concept_additive", dim=DIM, noise=NOISE, seed=2)


def frozen_probes(y: np.ndarray, dataset: Dataset, work: Path) -> Any:
    """Probes fitted by a ``probe`` run (:data:`FROZEN_PROBES`) and read back as ``--probes`` reads them."""
    settings = get_analysis("probe").Settings(**FROZEN_PROBES)
    inputs = AnalysisInputs(y, dataset.scenes, noun=dataset.preset.noun)
    run_analysis("probe", inputs, work / "frozen-probes", settings)
    probes, _ = load_frozen_probes(work / "frozen-probes", dataset, seed=0)
    return probes


def build_world(work: Path) -> World:
    """Every planted input, built in ``work`` (a scratch folder: the dataset and the frozen probes' run)."""
    dataset = build_dataset(preset_from_dict(PRESET), work / "dataset", images=False)
    scenes = dataset.scenes
    y, singles = positional_objects(scenes)
    kinds = {
        "embeddings": y,
        "control": planted_embeddings(scenes, "random", dim=DIM, seed=1),
        "probes": frozen_probes(y, dataset, work),
        "singles": singles,
        "other": text_embeddings(scenes),
        "unimodal": UNIMODAL,
    }
    text_singles = text_embeddings(SceneSet.singles(scenes.space, scenes.max_objects))
    return World(scenes, dataset.preset.noun, kinds, text_singles)


def inputs_for(name: str, world: World) -> AnalysisInputs:
    """The inputs ``name`` needs and uses. Beside a second modality (``other``), ``singles`` is that
    modality's single-object captions (crossmodal's half-truths); otherwise the image bank (one row per
    object and slot)."""
    analysis = get_analysis(name)
    kinds = sorted(analysis.needs | analysis.uses)
    missing = [k for k in kinds if k not in world.kinds]
    if missing:
        raise KeyError(f"golden_cases has no planted input of kind {missing}; add one to build_world")
    given = {k: world.kinds[k] for k in kinds if k != "embeddings"}
    if "other" in given and "singles" in given:
        given["singles"] = world.text_singles
    return AnalysisInputs(world.kinds["embeddings"], world.scenes, noun=world.noun, **given)


def settings_for(name: str) -> Any:
    """``name``'s settings from :data:`SETTINGS`."""
    if name not in SETTINGS:
        raise KeyError(f"golden_cases has no settings for {name!r}; add them to SETTINGS and run {REGEN} {name}")
    return get_analysis(name).Settings(**SETTINGS[name])


# -- recording ----------------------------------------------------------------------------------------------
def plain(value: Any) -> Any:
    """``value`` as JSON: numpy scalars as Python numbers, non-finite floats as strings, tuples as lists."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [plain(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else str(float(value))  # 'nan', 'inf', '-inf'
    if value is None or isinstance(value, str):
        return value
    if value is pd.NA or value is pd.NaT:
        return None
    return str(value)


def without_volatile(value: Any) -> Any:
    """``value`` without the keys :data:`VOLATILE` matches, at any depth."""
    if isinstance(value, dict):
        return {k: without_volatile(v) for k, v in value.items() if not VOLATILE.search(k)}
    if isinstance(value, list):
        return [without_volatile(v) for v in value]
    return value


def _sort_key(record: dict[str, Any], order: list[str]) -> tuple:
    """The cells of ``record`` in ``order``, comparable across types (missing, then text, then numbers)."""

    def cell(v: Any) -> tuple:
        if v is None:
            return (0, 0.0, "")
        if isinstance(v, str):
            return (1, 0.0, v)
        return (2, float(v), "")

    return tuple(cell(record[c]) for c in order)


def table_records(table: pd.DataFrame) -> dict[str, Any]:
    """A table as its columns and its rows (records), sorted deterministically, volatile columns dropped;
    a table of more than :data:`MAX_CELLS` cells as a digest (:func:`digest`)."""
    table = table[[c for c in table.columns if not VOLATILE.search(str(c))]]
    columns = [str(c) for c in table.columns]
    rows = [dict(zip(columns, plain(list(r)))) for r in table.itertuples(index=False, name=None)]
    # identifier-like columns (text, whole numbers, flags) first, then measured numbers
    measured = [c for c in columns if any(isinstance(r[c], float) for r in rows)]
    order = sorted(columns, key=lambda c: c in measured)
    rows.sort(key=lambda r: _sort_key(r, order))
    if len(rows) * len(columns) > MAX_CELLS:
        return {"columns": columns, "digest": digest(rows, columns, measured)}
    return {"columns": columns, "rows": rows}


def digest(rows: list[dict[str, Any]], columns: list[str], measured: list[str]) -> dict[str, Any]:
    """What stands for a large table: its row count; a hash of its exact cells (every column but the
    measured numbers, rows sorted), so that the same rows with the same labels, counts and flags match
    exactly; and per measured column the count of missing cells, the sum, the extremes and a sum weighted
    by row position (1..n), which moves when values trade rows."""
    exact = [[r[c] for c in columns if c not in measured] for r in rows]
    out: dict[str, Any] = {"rows": len(rows), "exact_sha256": hashlib.sha256(json.dumps(exact).encode()).hexdigest()}
    for c in measured:
        cells = [r[c] for r in rows]
        x = np.array([v if isinstance(v, (int, float)) else np.nan for v in cells], dtype=np.float64)
        finite = np.isfinite(x)
        w = np.arange(1, len(x) + 1, dtype=np.float64)
        out[c] = plain(
            {
                "non_finite": int((~finite).sum()),
                "sum": float(x[finite].sum()),
                "min": float(x[finite].min()) if finite.any() else None,
                "max": float(x[finite].max()) if finite.any() else None,
                "weighted_sum": float((w[finite] * x[finite]).sum()),
            }
        )
    return out


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """One torch thread, as the test suite runs (tests/conftest.py): the same reductions in the same order."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_case(name: str, world: World, out: Path) -> dict[str, Any]:
    """Run ``name`` on its planted inputs into ``out`` (new) and record its numbers and tables."""
    settings, inputs = settings_for(name), inputs_for(name, world)
    with one_torch_thread():
        result = run_analysis(name, inputs, out, settings)
    tables = {"results": table_records(result.table)}
    for path in sorted(out.glob("*.parquet")):
        if path.stem != "results":
            tables[path.stem] = table_records(result.read_table(path.stem))
    return {
        "analysis": name,
        "regen": REGEN,
        "inputs": sorted(inputs.present()),
        "settings": plain(SETTINGS[name]),
        "numbers": without_volatile(plain(result.numbers)),
        "tables": tables,
    }


# -- goldens ------------------------------------------------------------------------------------------------
def golden_path(name: str) -> Path:
    return GOLDEN_DIR / f"{name}.json"


def dumps(value: Any, indent: int = 0) -> str:
    """JSON with sorted keys, one table row per line: small, and a changed value shows as a one-line diff."""
    pad = " " * (indent + 1)
    if isinstance(value, dict) and value:
        items = [f"{pad}{json.dumps(k)}: {_dumps_item(k, v, indent + 1)}" for k, v in sorted(value.items())]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    return json.dumps(value)


def _dumps_item(key: str, value: Any, indent: int) -> str:
    if key == "rows" and isinstance(value, list) and value:
        pad = " " * (indent + 1)
        return "[\n" + ",\n".join(pad + json.dumps(r) for r in value) + "\n" + " " * indent + "]"
    return dumps(value, indent)


def load_golden(name: str) -> dict[str, Any]:
    return json.loads(golden_path(name).read_text())


def write_cases(names: list[str], folder: Path) -> list[Path]:
    """Run the cases of ``names`` and write each record to ``folder/<name>.json``; returns the files written."""
    written = []
    with tempfile.TemporaryDirectory(prefix="bindscope-golden-") as tmp:
        world = build_world(Path(tmp) / "world")
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            record = run_case(name, world, Path(tmp) / name)
            text = dumps(record) + "\n"
            if json.loads(text) != record:
                raise RuntimeError(f"internal: the record of {name} does not read back as written")
            (folder / f"{name}.json").write_text(text)
            written.append(folder / f"{name}.json")
    return written


def kernels_pinned() -> bool:
    """Whether this process started with :data:`PINNED_KERNELS` set."""
    return all(os.environ.get(k) == v for k, v in PINNED_KERNELS.items())


def run_pinned(args: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    """This script with ``args`` in a new process on the pinned kernels."""
    env = {**os.environ, **PINNED_KERNELS}
    script = [sys.executable, str(Path(__file__).resolve()), *args]
    return subprocess.run(script, env=env, capture_output=True, text=True, timeout=timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--regen", action="store_true", help="rewrite the golden files")
    parser.add_argument("--fresh", type=Path, help="write fresh records to this folder instead (the test's run)")
    parser.add_argument("analyses", nargs="*", help="the analyses to run (default: every registered one)")
    args = parser.parse_args(argv)
    if not args.regen and args.fresh is None:
        parser.print_help()
        return 2
    unknown = sorted(set(args.analyses) - set(list_analyses()))
    if unknown:
        parser.error(f"unknown analyses {unknown}; choose from {', '.join(list_analyses())}")
    if not kernels_pinned():  # start again on the pinned kernels: they are read when the libraries load
        done = run_pinned(sys.argv[1:] if argv is None else argv, timeout=3600)
        print(done.stdout, end="")
        print(done.stderr, end="", file=sys.stderr)
        return done.returncode
    for path in write_cases(args.analyses or list_analyses(), args.fresh or GOLDEN_DIR):
        print(f"wrote {path} ({path.stat().st_size / 1024:.1f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
