"""mkdocs hooks: pages hold markers that are replaced, at build time, by text generated from the code.

``<!-- generated: cli -->``                    the CLI reference (every command and option)
``<!-- generated: model MODULE:CLASS -->``      a pydantic model's keys, types, defaults, descriptions
``<!-- generated: settings -->``                every registered analysis's settings
``<!-- generated: summaries -->``               every registered analysis's summary.json numbers
``<!-- generated: benchmarks -->``              the benchmark scripts' results (benchmarks/results/*.csv)
``<!-- generated: benchmarks NAME -->``         the table of a result with its own columns (paper_scale, scaling)

An unknown marker stops the build.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

HERE = str(Path(__file__).resolve().parent)

#: a marker stands alone on its line (one quoted in running text or a table is left as it is)
MARKER = re.compile(r"^<!-- generated: ([a-z]+)(?: ([\w.:]+))? -->$", re.M)


def generated(kind: str, argument: str | None) -> str:
    """The text a marker stands for."""
    if HERE not in sys.path:  # the generators beside this file (mkdocs loads hooks by path, not as a package)
        sys.path.insert(0, HERE)
    import benchmark_tables
    import cli_reference
    import schema_reference

    if kind == "cli":
        return cli_reference.cli_reference()
    if kind == "model" and argument:
        return schema_reference.model_tables(schema_reference.load_model(argument))
    if kind == "settings":
        return schema_reference.settings_tables()
    if kind == "summaries":
        return schema_reference.summary_tables()
    if kind == "benchmarks":
        return benchmark_tables.benchmark_tables() if argument is None else benchmark_tables.own_table(argument)
    raise ValueError(f"unknown docs marker 'generated: {kind} {argument or ''}'")


def expand(markdown: str) -> str:
    """``markdown`` with every marker replaced by its generated text."""
    return MARKER.sub(lambda m: generated(m.group(1), m.group(2)), markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return expand(markdown)
