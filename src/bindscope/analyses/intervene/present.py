"""``intervene`` in words: the headline table at the table's k and the notes (what was edited, absent banks,
skipped cases, a missing shared/different split)."""

from __future__ import annotations

from bindscope.analyses.base import Rows
from bindscope.analyses.intervene.outcomes import ALL, METRICS, NO_VECTOR
from bindscope.analyses.intervene.summary import InterveneSummary, at_k
from bindscope.analyses.intervene.variants import BAG, UNEDITED
from bindscope.estimators.metrics import format_spread


def headline_rows(summary: InterveneSummary) -> Rows:
    """Per edit and variant: retrieval and probe accuracy per group at the table's k, and the cases."""
    k = summary.table_k
    groups = [g for g in summary.groups if g != ALL] or [ALL]
    rows: Rows = [("edit", "variant", *(f"{g} {m} % (k={k:g})" for g in groups for m in METRICS), "cases")]
    available = [b for b, v in summary.banks.items() if v.available]
    for edit in summary.edits:
        for variant in [UNEDITED, *available, BAG]:
            cells, cases = [], 0
            for g in groups:
                part = at_k(summary, edit, variant, g, k)
                cases += part.cases if part else 0
                cells += [format_spread(getattr(part, m) if part else None, 1, 100) for m in METRICS]
            rows.append((edit, variant, *cells, f"{cases:,}"))
    return rows


def skip_lines(summary: InterveneSummary) -> list[str]:
    """The cases each edit skipped (for every variant) and those a variant lacked a bank vector for."""
    lines = []
    for edit, per in summary.skipped.items():
        reasons = per.get(UNEDITED, {})
        if reasons:
            lines.append(f"{edit} cases skipped: " + ", ".join(f"{r} {n:,}" for r, n in reasons.items()))
        for variant, why in per.items():
            if why.get(NO_VECTOR):
                lines.append(f"{edit} cases skipped by {variant}: {NO_VECTOR} {why[NO_VECTOR]:,}")
    return lines


def note_lines(summary: InterveneSummary) -> list[str]:
    """What was edited (and at which k), absent banks, the single bank's form, skipped cases, and a missing
    shared/different split."""
    c = summary.concepts
    lines = [
        f"edited: {', '.join(summary.edits)} (attribute = {c.attribute}, noun = {c.noun}); k = "
        + ", ".join(f"{k:g}" for k in summary.k)
    ]
    lines += [f"bank {name}: absent, {bank.why}" for name, bank in summary.banks.items() if not bank.available]
    singles = summary.singles
    if singles:
        lines.append(
            f"single bank: {singles.get('positions', 1)} position(s) per object, "
            f"captions {singles.get('captions') or '-'}"
        )
    lines += skip_lines(summary)
    if summary.groups == [ALL]:
        lines.append("no shared/different split: every scene's two objects differ in the edited concept (overall only)")
    return lines
