"""The JSON Schema of every registered analysis's ``summary.json``, one file per analysis and format version:
``docs/reference/schemas/<analysis>.v<version>.json`` (:func:`bindscope.analyses.results.summary_schema`).

``python scripts/docs/summary_schemas.py`` writes them; ``--check`` writes nothing and exits 1 when a file is
missing or differs from the code (``tests/docs/test_schemas.py`` checks the same). A schema of an older format
version stays beside the new one: it describes the folders that version wrote.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "reference" / "schemas"


def schema_files() -> dict[str, str]:
    """Each current schema's file name and text (JSON, indented, ending in a newline)."""
    from bindscope.analyses import list_analyses
    from bindscope.analyses.results import schema_name, summary_schema

    return {schema_name(a): json.dumps(summary_schema(a), indent=2, ensure_ascii=False) + "\n" for a in list_analyses()}


def stale(folder: Path = SCHEMAS) -> list[str]:
    """The schema files that are missing from ``folder`` or differ from the code."""
    return [
        name
        for name, text in schema_files().items()
        if not (folder / name).is_file() or (folder / name).read_text() != text
    ]


def write(folder: Path = SCHEMAS) -> list[Path]:
    """Write every current schema into ``folder``; returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in schema_files().items():
        (folder / name).write_text(text)
        written.append(folder / name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is stale")
    args = parser.parse_args(argv)
    if args.check:
        names = stale()
        for name in names:
            print(f"stale: docs/reference/schemas/{name}; run python scripts/docs/summary_schemas.py")
        return 1 if names else 0
    for path in write():
        print(f"wrote {path.relative_to(SCHEMAS.parents[2])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
