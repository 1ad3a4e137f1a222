"""The reading matrix (docs/method/verdicts.md): every planted family through every analysis, each card column's
verdict equal to the one the method page writes, and a bag of concepts never reading ``binds``.

The page's table is the expectation: ``python scripts/docs/reading_matrix.py`` wrote it from a run, and this test
runs it again, one (family, analysis) pair per test, so that a change in any verdict fails here by name. The
probe-fitting analyses (probe, decompose) are the slow half: they run in test_reading_matrix_probes.py, on the
other xdist worker."""

from __future__ import annotations

from pathlib import Path

import pytest
import reading_matrix as rm

from bindscope.analyses import get_analysis, list_analyses
from matrix_cells import BAGS, EXPECTED, LIMIT, SLOW, check_cell


def test_the_page_holds_a_verdict_for_every_family_and_column() -> None:
    assert set(EXPECTED) == set(rm.families())
    columns = {c.key for name in list_analyses() for c in get_analysis(name).columns if c.family is None}
    for family, row in EXPECTED.items():
        assert set(row) == columns, (family, columns ^ set(row))
    for bag in BAGS:  # the rule the whole card rests on
        assert all(answer != "binds" for answer, _ in EXPECTED[bag].values())
    assert any(answer == "binds" for row in EXPECTED.values() for answer, _ in row.values())


@LIMIT
@pytest.mark.parametrize("analysis", [a for a in sorted(list_analyses()) if a not in SLOW])
@pytest.mark.parametrize("family", list(rm.families()))
def test_each_verdict_is_the_one_the_method_page_writes(family: str, analysis: str, tmp_path: Path) -> None:
    check_cell(family, analysis, tmp_path / "cell")
