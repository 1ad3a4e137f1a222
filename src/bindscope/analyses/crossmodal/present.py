"""The words of ``crossmodal``: the terminal's table and the readings after it, from the typed summary."""

from __future__ import annotations

from bindscope.analyses.base import Rows
from bindscope.analyses.crossmodal.scoring import FAMILY_METRICS, SWAP_METRICS
from bindscope.analyses.crossmodal.summary import CrossmodalSummary
from bindscope.estimators.intervals import rate
from bindscope.estimators.metrics import Spread, format_spread

HEADLINE_METRICS = (
    *SWAP_METRICS,
    "image_to_text_strict@1",
    "image_to_text_concept@1",
    "text_to_image_strict@1",
    "text_to_image_concept@1",
)
HEADER = ("test", "raw %", "n", "95% CI", "test_only raw %", "bridged %", "chance %", "bag of concepts %")


def percent(value: Spread | None) -> str:
    return format_spread(value, 1, 100)


def interval(value: Spread | None, cases: int | None) -> tuple[str, str]:
    """A rate's cases and 95% Wilson interval in percent (``-`` where either is missing)."""
    r = rate(value.mean if value is not None else None, cases)
    if r is None:
        return "-", "-"
    return f"{r.n:,}", f"{100 * r.low:.1f}–{100 * r.high:.1f}"


def seeds_of(fractions: dict[str, dict[str, Spread]]) -> int:
    """The most seeds a bridged number was taken over."""
    return max((s.n_seeds for part in fractions.values() for s in part.values()), default=0)


def reference(summary: CrossmodalSummary, variant: str, metric: str) -> str:
    value = summary.references.get(variant, {}).get(metric)
    return "-" if value is None else f"{100 * value:.1f}"


def headline_rows(summary: CrossmodalSummary) -> Rows:
    """Per test: raw (with its cases and 95% Wilson interval), on test_only before and after the bridge (at the
    headline fraction; ± sd over seeds), and the references; then the half-truth rates (with theirs) and the
    uni-modal probes."""
    f = summary.headline_fraction
    at = summary.bridge.fractions.get(f"{f:g}", {}) if f is not None else {}
    seeds = seeds_of(at)
    where = ", ".join(([f"f={f:g}"] if f is not None else []) + ([f"± sd over {seeds} seeds"] if seeds > 1 else []))
    sd = f" (± sd over {seeds} seeds)" if seeds > 1 else ""
    rows: Rows = [(*HEADER[:4], HEADER[4] + (f" ({where})" if where else ""), HEADER[5] + sd, *HEADER[6:])]
    for metric in headline_metrics(summary):
        value = summary.raw.get(metric)
        rows.append(
            (
                metric,
                percent(value),
                *interval(value, summary.raw_cases.get(metric)),
                percent(at.get("raw", {}).get(metric)),
                percent(at.get("bridged", {}).get(metric)),
                reference(summary, "chance", metric),
                reference(summary, "bag_of_concepts", metric),
            )
        )
    return rows + half_truth_rows(summary) + unimodal_rows(summary)


def headline_metrics(summary: CrossmodalSummary) -> tuple[str, ...]:
    """The terminal's tests: the swaps, a relation or count space's family swap (where scored), retrieval."""
    scored = {*summary.raw, *summary.references.get("chance", {})}
    family = tuple(m for m in FAMILY_METRICS.values() if m in scored)
    return (*SWAP_METRICS, *family, *HEADLINE_METRICS[len(SWAP_METRICS) :])


def half_truth_rows(summary: CrossmodalSummary) -> Rows:
    """Terminal rows of the half-truth rates: pooled, and per scene where it differs."""
    rows: Rows = []
    per_scene = summary.half_truths_per_scene or {}
    pairs, images = summary.half_truths_cases or {}, summary.half_truths_per_scene_cases or {}
    for kind, value in (summary.half_truths or {}).items():
        chance = "50.0" if kind != "full_beats_short" else "-"
        both = kind in summary.half_truths_differ
        label = f"half-truth {kind}" + (" pooled" if both else "")
        rows.append((label, percent(value), *interval(value, pairs.get(kind)), "", "", chance, ""))
        if both:
            scene = per_scene.get(kind)
            rows.append(
                (f"half-truth {kind} per scene", percent(scene), *interval(scene, images.get(kind)), "", "", chance, "")
            )
    return rows


def unimodal_rows(summary: CrossmodalSummary) -> Rows:
    """The object probe accuracy of each modality alone, beside its chance."""
    rows: Rows = []
    for modality, acc in (summary.unimodal or {}).items():
        chance = acc.get("chance")
        rows.append(
            (
                f"{modality} object probe (uni-modal)",
                percent(acc.get("object_acc")),
                "",
                "",
                "",
                "",
                "-" if chance is None else f"{100 * chance:.1f}",
                "",
            )
        )
    return rows


def notes_lines(summary: CrossmodalSummary) -> list[str]:
    """The readings: what was scored, the swaps skipped, the bridge, the half-truths, the paper's contrast."""
    c = summary.concepts
    scope = "a seeded subsample of " if summary.subsampled else ""
    lines = [f"attribute = {c.attribute}, noun = {c.noun}; {scope}{summary.scenes:,} 2-object scenes"]
    lines += sampled_retrieval_lines(summary) + family_lines(summary)
    for swap, reasons in summary.skipped.items():
        if reasons:
            lines.append(f"{swap} swap skipped: " + ", ".join(f"{r} {n:,}" for r, n in reasons.items()))
    if summary.bridge.kind != "none":
        lines.append(
            f"bridge: {summary.bridge.kind} text -> image, fitted on train_only scenes and scored on "
            "test_only (objects unseen by the bridge)"
        )
    lines.append(half_truth_line(summary))
    return lines + contrast_lines(summary)


def sampled_retrieval_lines(summary: CrossmodalSummary) -> list[str]:
    """Where retrieval was estimated from a sample of queries (``--retrieval-queries``): how many asked, and that
    its rows' n and 95% interval are the sample's."""
    asked = summary.raw_cases.get("image_to_text_strict@1")
    if asked is None or asked >= summary.scenes:
        return []
    return [
        f"retrieval: estimated from {asked:,} seeded queries of the {summary.scenes:,} scenes per scoring, each ranked "
        "against every caption (image); its n and 95% CI are the sample's "
        f"(standard error at most {100 * 0.5 / asked**0.5:.1f} points)"
    ]


#: What each family swap exchanges, in words.
FAMILY_WORDS = {
    "swap_relation": "relation swap: subject and object exchanged, the relation kept",
    "swap_count": "count swap: the two objects' counts exchanged",
}


def family_lines(summary: CrossmodalSummary) -> list[str]:
    """What a relation or count space's family swap exchanges, and whether the bridge scored it on unseen
    objects."""
    lines = []
    for metric in headline_metrics(summary):
        if metric not in FAMILY_WORDS:
            continue
        bridged = any(metric in part.get("bridged", {}) for part in summary.bridge.fractions.values())
        where = "; bridged on test_only too" if bridged else ""
        lines.append(f"{FAMILY_WORDS[metric]} (chance and a bag of concepts 50%: a swap keeps the bag){where}")
    return lines


def half_truth_line(summary: CrossmodalSummary) -> str:
    """Whether half-truths were scored and whether their two rates differ."""
    if summary.half_truths is None:
        return f"half-truths: absent, {summary.half_truths_absent}"
    if summary.half_truths_differ:
        return (
            "half-truth rates pooled over pairs and per scene (the mean of each image's rate) differ for "
            + ", ".join(summary.half_truths_differ)
        )
    return "half-truth rates: pooled over pairs and per scene (the mean of each image's rate) are equal"


def contrast_lines(summary: CrossmodalSummary) -> list[str]:
    """The paper's contrast in words: object information per modality against the cross-modal swap test."""
    unimodal = summary.unimodal
    swap = summary.raw.get("swap_attribute")
    if not unimodal:
        return ["uni-modal probes: not given (--probes-image / --probes-text: `bindscope probe` result folders)"]
    parts = [f"{m} object probe {percent(a.get('object_acc'))}%" for m, a in unimodal.items()]
    return [f"uni-modal vs cross-modal: {', '.join(parts)}; cross-modal attribute-swap accuracy {percent(swap)}%"]
