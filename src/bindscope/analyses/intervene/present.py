"""``intervene`` in words: the headline table at the table's k and the notes (what was edited, absent banks,
skipped cases, a missing shared/different split)."""

from __future__ import annotations

from bindscope.analyses.base import Rows
from bindscope.analyses.intervene.outcomes import ALL, BOUND, NO_VECTOR
from bindscope.analyses.intervene.summary import InterveneSummary, at_k
from bindscope.analyses.intervene.variants import BAG, UNEDITED
from bindscope.estimators.metrics import format_spread

#: The headline's metrics: the paper's (the research code's hits) beside their bound forms (on the edits that
#: need binding, ties counted wrong), with their names in the header.
SHOWN = {
    "retrieval": "retrieval (paper)",
    BOUND["retrieval"]: "retrieval (binding)",
    "probe": "probe (paper)",
    BOUND["probe"]: "object probe (binding)",
}


def seeds_of(summary: InterveneSummary) -> int:
    """The number of target seeds the spreads are over (the most any number has)."""
    counts = [
        at.retrieval.n_seeds
        for variants in summary.results.values()
        for groups in variants.values()
        for per_k in groups.values()
        for at in per_k.values()
    ]
    return max(counts, default=1)


def headline_rows(summary: InterveneSummary) -> Rows:
    """Per edit and variant: the paper's retrieval and probe accuracy beside their bound forms, per group at the
    table's k (said in the notes), and the cases (all, and those needing binding), over all seeds."""
    k = summary.table_k
    groups = [g for g in summary.groups if g != ALL] or [ALL]
    seeds = seeds_of(summary)
    sd = f" ± sd over {seeds} seeds" if seeds > 1 else ""
    head = [f"{g} {name} %{sd}" for g in groups for name in SHOWN.values()]
    rows: Rows = [("edit", "variant", *head, "cases", "binding cases")]
    available = [b for b, v in summary.banks.items() if v.available]
    for edit in summary.edits:
        for variant in [UNEDITED, *available, BAG]:
            cells, cases, binding = [], 0, 0
            for g in groups:
                part = at_k(summary, edit, variant, g, k)
                cases += part.cases if part else 0
                binding += (part.binding_cases or 0) if part else 0
                cells += [format_spread(getattr(part, m) if part else None, 1, 100) for m in SHOWN]
            rows.append((edit, variant, *cells, f"{cases:,}", f"{binding:,}"))
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


def sample_lines(summary: InterveneSummary) -> list[str]:
    """Per edit kind scored on a sample: the edits sampled out of those planned, and where the intervals are."""
    return [
        f"{edit}: a seeded sample of {s.cases:,} of {s.of:,} edits (over all seeds), stratified by shared value and "
        "binding; each rate's 95% interval is in summary.json (intervals) and on the card"
        for edit, s in (summary.sampled or {}).items()
    ]


def note_lines(summary: InterveneSummary) -> list[str]:
    """What was edited (and at which k), absent banks, the single bank's form, skipped cases, sampled edits, and a
    missing shared/different split."""
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
    lines += sample_lines(summary)
    lines += [
        f"table at k = {summary.table_k:g}; paper: the research code's hits (retrieval: the best match, a tie going "
        "to the lowest row; probe: the concept probes read the expected values)",
        "binding: on the edits whose expected scene has a binding swap among the scenes, ties wrong (retrieval: the "
        "expected scene, in either slot order, strictly above every other scene; object probe: reads the expected "
        "objects and tells the expected scene from its swaps); an ideal bag of concepts scores 0 on both",
    ]
    if summary.groups == [ALL]:
        lines.append("no shared/different split: every scene's two objects differ in the edited concept (overall only)")
    return lines
