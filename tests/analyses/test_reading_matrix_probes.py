"""The reading matrix's probe-fitting half (docs/method/verdicts.md): probe and decompose, each family's verdicts
equal to the method page's (test_reading_matrix.py holds the rest, on the other xdist worker)."""

from __future__ import annotations

from pathlib import Path

import pytest
import reading_matrix as rm

from matrix_cells import LIMIT, SLOW, check_cell


@LIMIT
@pytest.mark.parametrize("analysis", SLOW)
@pytest.mark.parametrize("family", list(rm.families()))
def test_each_probe_verdict_is_the_one_the_method_page_writes(family: str, analysis: str, tmp_path: Path) -> None:
    check_cell(family, analysis, tmp_path / "cell")
