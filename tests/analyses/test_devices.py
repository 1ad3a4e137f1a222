"""On a CUDA device, every analysis with a ``device`` setting computes what it computes on the CPU.

The cases are the golden ones (tests/helpers/golden_cases.py: the 144 scenes of a 4 x 3 planted space, short
settings), run once with ``device="cpu"`` and once with ``device="cuda"``; the results tables must agree: labels,
counts and fractions exactly, values within a tolerance (float64 throughout in ``geometry``; float32 fits
elsewhere, whose last bits differ between kernels, and a rate may move by one of its cases near a tie).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bindscope.analyses import get_analysis, run_analysis
from golden_cases import SETTINGS, VOLATILE, World, build_world, inputs_for

#: Per analysis: the relative and absolute tolerance of a value (besides one case of a rate).
TOLERANCE = {
    "geometry": (1e-9, 1e-9),
    "complexity": (1e-3, 1e-4),
    "probe": (1e-3, 1e-4),
    "crossmodal": (1e-3, 1e-4),
    "intervene": (1e-3, 1e-4),
}

#: Columns derived from the value (judged with it).
INTERVAL = ("ci_low", "ci_high")
#: How a fit ran (epochs, its checkpoint, convergence): float32 kernels may move a plateau's check by one, which
#: the scores judge (left out).
TRAJECTORY = ("epochs_run", "best_epoch", "best_val_mse", "stopped_early", "unfinished_r2", "converged")

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return build_world(tmp_path_factory.mktemp("devices"))


def results_on(name: str, world: World, device: str, out: Path) -> pd.DataFrame:
    """``name``'s golden case run on ``device``: its results table, rows of invocation and trajectory metrics left
    out."""
    settings = get_analysis(name).Settings(**SETTINGS[name], device=device)
    table = run_analysis(name, inputs_for(name, world), out, settings).table
    table = table[[c for c in table.columns if not VOLATILE.search(str(c))]]
    volatile = np.array([bool(VOLATILE.search(str(m))) or m in TRAJECTORY for m in table["metric"]], dtype=bool)
    return table[~volatile].reset_index(drop=True)


def disagreements(cpu: pd.DataFrame, other: pd.DataFrame, rtol: float, atol: float) -> list[str]:
    """Where ``other`` differs from ``cpu``: a label or count at all; a number (fraction, chance ...) beyond ``rtol``
    / ``atol``; a value beyond them and, for a rate (``n_cases``), by more than one of its cases. The confidence
    interval of a value is judged with it (left out)."""
    if list(cpu.columns) != list(other.columns) or len(cpu) != len(other):
        return [f"tables differ in shape: {cpu.shape} {list(cpu.columns)} vs {other.shape} {list(other.columns)}"]
    labels = [c for c in cpu.columns if c not in ("value", *INTERVAL)]
    same = np.all([same_cells(cpu[c], other[c], rtol, atol) for c in labels], axis=0)
    found = [f"row {i}: {dict(cpu.loc[i, labels])} vs {dict(other.loc[i, labels])}" for i in np.flatnonzero(~same)]
    a, b = cpu["value"].to_numpy(np.float64), other["value"].to_numpy(np.float64)
    allowed = atol + rtol * np.abs(a)
    if "n_cases" in cpu.columns:
        cases = pd.to_numeric(cpu["n_cases"], errors="coerce").to_numpy(np.float64)
        one_case = 1.0 / np.where(cases > 0, cases, np.inf) + 1e-9
        allowed = np.maximum(allowed, np.where(cases > 0, one_case, 0.0))
    off = ~((np.abs(a - b) <= allowed) | (np.isnan(a) & np.isnan(b)))
    found += [f"{dict(cpu.loc[i, labels])}: cpu {a[i]!r}, cuda {b[i]!r}" for i in np.flatnonzero(off)]
    return found


def same_cells(x: pd.Series, y: pd.Series, rtol: float, atol: float) -> np.ndarray:
    """Per row: floats within ``rtol`` / ``atol`` (missing on both sides alike), anything else equal."""
    if pd.api.types.is_float_dtype(x):
        a, b = x.to_numpy(np.float64), y.to_numpy(np.float64)
        return np.isclose(a, b, rtol=rtol, atol=atol) | (np.isnan(a) & np.isnan(b))
    return np.array([(pd.isna(p) and pd.isna(q)) or p == q for p, q in zip(x.astype(object), y.astype(object))])


@cuda
@pytest.mark.parametrize("name", sorted(TOLERANCE))
def test_cuda_computes_what_the_cpu_computes(name: str, world: World, tmp_path: Path) -> None:
    cpu = results_on(name, world, "cpu", tmp_path / "cpu")
    gpu = results_on(name, world, "cuda", tmp_path / "cuda")
    found = disagreements(cpu, gpu, *TOLERANCE[name])
    assert not found, f"{name} on cuda differs from the cpu in {len(found)} place(s):\n  " + "\n  ".join(found[:20])


def test_the_comparison_finds_a_moved_value_and_tolerates_one_case_of_a_rate() -> None:
    table = pd.DataFrame({"metric": ["r2", "acc"], "value": [0.5, 0.5], "n_cases": pd.array([pd.NA, 10], "Int64")})
    moved = table.assign(value=[0.5 + 1e-3, 0.6])
    assert not disagreements(table, moved, 1e-2, 0.0)  # r2 within 1%; acc one case of 10 away
    assert len(disagreements(table, moved, 1e-4, 0.0)) == 1  # r2 beyond it
    assert len(disagreements(table, table.assign(value=[0.5, 0.75]), 1e-2, 0.0)) == 1  # acc 2.5 cases away
    assert disagreements(table, table.assign(metric=["r2", "other"]), 1e-2, 0.0)  # a label differs
