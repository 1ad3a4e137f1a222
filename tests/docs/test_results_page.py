"""docs/reference/results.md agrees with the code: the JSON Schemas it links are the ones the code generates, the
columns of every results table and the values of ``control`` it lists are the ones the code writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import summary_schemas

from bindscope.analyses import list_analyses
from bindscope.analyses.results import FORMAT_VERSION, schema_name
from bindscope.core.errors import BindscopeError
from bindscope.core.tidy import COMMON_COLUMNS, CONTROLS, result_row, tidy

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "reference" / "results.md"
GOLDEN = ROOT / "tests" / "regression" / "golden"


def table_keys(heading: str) -> list[str]:
    """The first cell of each row of the page's table whose header row starts with ``heading`` (code spans
    unquoted; a cell naming two, ``a``, ``b``, gives both)."""
    text = PAGE.read_text()
    start = text.index(f"| {heading} |")
    rows = text[start:].split("\n\n", 1)[0].splitlines()[2:]
    return [k for row in rows for k in re.findall(r"`([^`]+)`", row.split("|")[1])]


def test_the_schemas_the_page_links_are_the_codes() -> None:
    assert summary_schemas.stale() == [], "run python scripts/docs/summary_schemas.py"
    linked = re.findall(r"\]\(schemas/([^)]+)\)", PAGE.read_text())
    assert linked == [schema_name(a) for a in list_analyses()]
    for name in linked:
        assert json.loads((summary_schemas.SCHEMAS / name).read_text())["properties"]["format"]["properties"][
            "version"
        ] == {"const": FORMAT_VERSION}


def test_a_stale_schema_file_is_found(tmp_path: Path) -> None:
    summary_schemas.write(tmp_path)
    assert summary_schemas.stale(tmp_path) == []
    probe = tmp_path / schema_name("probe")
    probe.write_text(probe.read_text().replace('"n_seeds"', '"n"'))
    (tmp_path / schema_name("geometry")).unlink()
    assert summary_schemas.stale(tmp_path) == [schema_name("geometry"), schema_name("probe")]


def test_the_columns_the_page_lists_are_every_results_tables() -> None:
    assert table_keys("column") == list(COMMON_COLUMNS)


def test_the_control_values_the_page_lists_are_those_the_code_writes() -> None:
    listed = table_keys("control")
    assert listed == list(CONTROLS)
    # every value the analyses wrote in their golden results (tests/regression checks those against the code)
    written = set()
    for golden in sorted(GOLDEN.glob("*.json")):
        rows = json.loads(golden.read_text())["tables"]["results"]["rows"]
        written |= {r["control"] for r in rows}
    assert written == set(listed)


def test_a_row_of_an_unlisted_control_is_refused() -> None:
    with pytest.raises(BindscopeError, match=r"unknown controls \['shuffled'\]"):
        tidy([result_row("probe", "base", "test", "object_acc", 0, 0.5, control="shuffled")])
