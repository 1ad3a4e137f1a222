"""The reading matrix's cells as the tests check them (docs/method/verdicts.md, tests/analyses/test_reading_matrix*)."""

from __future__ import annotations

from pathlib import Path

import pytest
import reading_matrix as rm

from bindscope.analyses import get_analysis, run_analysis

EXPECTED = rm.read_table(rm.PAGE.read_text())
BAGS = ("bag of concepts (counts)", "bag of concepts (multi-hot)")


#: The analyses of this file (the probe-fitting half is test_reading_matrix_probes.py).
SLOW = ("decompose", "probe")
LIMIT = pytest.mark.duration_limit(
    60, reason="three seeds of an analysis and of the same analysis on its bag of concepts, the probes cross-validated"
)


def verdicts_of(family: str, analysis: str, folder: Path) -> dict[str, tuple[str, str]]:
    """One (family, analysis) cell of the matrix, run again: ``{column: (answer, reason)}``."""
    scenes = rm.scenes(analysis)
    y = rm.families()[family](scenes)
    result = run_analysis(analysis, rm.inputs_for(analysis, family, y, scenes), folder, rm.settings(analysis))
    return {c: (v.answer, v.reason) for c, v in result.typed.verdicts.items()}


def check_cell(family: str, analysis: str, folder: Path) -> None:
    """The cell's verdicts equal the page's, one per declared column; a bag never reads ``binds``."""
    got = verdicts_of(family, analysis, folder)
    columns = [c.key for c in get_analysis(analysis).columns if c.family is None]  # an attribution space
    assert sorted(got) == sorted(columns)
    assert got == {c: EXPECTED[family][c] for c in columns}
    if family in BAGS:
        assert all(answer != "binds" for answer, _ in got.values())
