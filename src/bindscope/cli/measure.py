"""``bindscope analyses``: the registered analyses (each has its generated command, :mod:`bindscope.cli.group`)."""

from __future__ import annotations

from bindscope.cli.app import app
from bindscope.cli.common import print_table


@app.command("analyses")
def list_analyses_command() -> None:
    """List the registered analyses, what they take and what they answer."""
    from bindscope.analyses import get_analysis, list_analyses

    rows = [("analysis", "needs", "uses if present", "answers")]
    for name in list_analyses():
        a = get_analysis(name)
        rows.append((name, ", ".join(sorted(a.needs)), ", ".join(sorted(a.uses)) or "-", a.title))
    print_table(rows)
