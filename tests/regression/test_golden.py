"""Every analysis's numbers are those of its committed golden (tests/regression/golden/<analysis>.json).

The cases (tiny planted inputs, short settings, run through the public API) live in
tests/helpers/golden_cases.py. After a change that is meant to change the numbers, rewrite the goldens with
``python tests/helpers/golden_cases.py --regen`` and say why in the commit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bindscope.analyses import list_analyses
from golden_cases import REGEN, golden_path, load_golden, run_pinned

# Numbers may differ from the golden by rtol * |golden| + atol. The cases are deterministic (seeded, one torch
# thread, the CPU kernels pinned to their AVX2 paths; two regens write the same bytes), so on one machine any
# tolerance passes; on another,
# float32 and BLAS/SIMD kernels (summation order, FMA) move the last bits of float32 results (~1e-7 relative),
# which short fits can carry a little further. Measured here by switching kernels (ATEN_CPU_CAPABILITY avx512 /
# avx2 / default, OPENBLAS_CORETYPE=Nehalem, MKL_ENABLE_INSTRUCTIONS=SSE4_2): at most 1.5e-7 relative with one
# of them switched; 2.2e-6 on one complexity MLP number (rtol 1e-5 would cover it) with all three. 1e-6 relative
# covers float32 rounding and still catches a refactor that changes a result's arithmetic; atol 1e-9 lets values
# that are 0 up to rounding (singular values ~1e-16) differ.
RTOL = 1e-6
ATOL = 1e-9
MAX_REPORTED = 25


@pytest.fixture(scope="module")
def fresh_cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every case run afresh, in one process of its own on the pinned kernels (golden_cases.PINNED_KERNELS)."""
    folder = tmp_path_factory.mktemp("golden-fresh")
    done = run_pinned(["--fresh", str(folder)])
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


@pytest.mark.parametrize("name", list_analyses())
def test_analysis_matches_its_golden(name: str, fresh_cases: Path) -> None:
    if not golden_path(name).is_file():
        pytest.fail(
            f"{name} has no golden result ({golden_path(name)}); add its case to tests/helpers/golden_cases.py "
            f"(SETTINGS) and run: {REGEN} {name}",
            pytrace=False,
        )
    fresh = json.loads((fresh_cases / f"{name}.json").read_text())
    found = differences(load_golden(name), fresh)
    if found:
        shown = "\n  ".join(found[:MAX_REPORTED])
        more = f"\n  ... and {len(found) - MAX_REPORTED} more" if len(found) > MAX_REPORTED else ""
        pytest.fail(
            f"{name} differs from its golden in {len(found)} place(s) (golden vs fresh; rtol={RTOL}, atol={ATOL}):"
            f"\n  {shown}{more}\nIf the change is intended, run: {REGEN} {name}",
            pytrace=False,
        )


# -- comparison ---------------------------------------------------------------------------------------------
def differences(golden: Any, fresh: Any, path: str = "") -> list[str]:
    """Where ``fresh`` differs from ``golden`` (JSON values): one line per difference, with its path and both
    values. Keys, lengths, text, flags and nulls must match exactly; numbers within :data:`RTOL` / :data:`ATOL`."""
    if isinstance(golden, dict) and isinstance(fresh, dict):
        return _dict_differences(golden, fresh, path)
    if isinstance(golden, list) and isinstance(fresh, list):
        if path.endswith(".rows") and len(golden) != len(fresh):
            return _row_count_differences(golden, fresh, path)
        if len(golden) != len(fresh):
            return [f"{path}: golden has {len(golden)} items, fresh {len(fresh)}: {golden!r} vs {fresh!r}"]
        found = []
        for i, (g, f) in enumerate(zip(golden, fresh)):
            found += differences(g, f, f"{path}[{i}]{_row_label(g) if path.endswith('.rows') else ''}")
        return found
    if _is_number(golden) and _is_number(fresh):
        return (
            [] if _close(golden, fresh) else [f"{path}: golden {golden!r}, fresh {fresh!r}{_relative(golden, fresh)}"]
        )
    if type(golden) is not type(fresh) or golden != fresh:
        return [f"{path}: golden {golden!r}, fresh {fresh!r}"]
    return []


def _dict_differences(golden: dict, fresh: dict, path: str) -> list[str]:
    found = [
        f"{path}.{k}: in the golden ({golden[k]!r:.80}), missing from the fresh run" for k in golden if k not in fresh
    ]
    found += [
        f"{path}.{k}: new in the fresh run ({fresh[k]!r:.80}), not in the golden" for k in fresh if k not in golden
    ]
    for k in golden:
        if k in fresh:
            found += differences(golden[k], fresh[k], f"{path}.{k}" if path else k)
    return found


def _row_count_differences(golden: list, fresh: list, path: str) -> list[str]:
    """Rows only on one side, by their identifying (non-float) cells."""
    ids_golden = {_row_label(r) for r in golden}
    ids_fresh = {_row_label(r) for r in fresh}
    found = [f"{path}: golden has {len(golden)} rows, fresh {len(fresh)}"]
    found += [f"{path}: row only in the golden: {r}" for r in sorted(ids_golden - ids_fresh)[:5]]
    found += [f"{path}: row only in the fresh run: {r}" for r in sorted(ids_fresh - ids_golden)[:5]]
    return found


def _row_label(row: Any) -> str:
    """A table row's identifying cells (text, whole numbers, flags), to name it in a message."""
    if not isinstance(row, dict):
        return ""
    cells = ",".join(f"{k}={v}" for k, v in row.items() if not isinstance(v, float))
    return f"{{{cells}}}"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _close(golden: float, fresh: float) -> bool:
    return math.isclose(fresh, golden, rel_tol=0.0, abs_tol=ATOL + RTOL * abs(golden))


def _relative(golden: float, fresh: float) -> str:
    return f" (relative difference {abs(fresh - golden) / abs(golden):.2e})" if golden else ""
