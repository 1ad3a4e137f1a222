"""The complexity analysis in words: the verdict's reading, why a family can memorise or is left open, the notes
and headline table the terminal shows, and the command-line flags they point to (the science modules hold
none)."""

from __future__ import annotations

from bindscope.analyses.base import Rows
from bindscope.analyses.complexity.card import MIN_CASES
from bindscope.analyses.complexity.curves import COVERED_AT, FITS_AT, GENERALISES_AT
from bindscope.analyses.complexity.families import Family, Memorises
from bindscope.analyses.complexity.reuse import FITS
from bindscope.analyses.complexity.summary import (
    ComplexitySummary,
    Curve,
    FittedIn,
    Generalisation,
    VerdictNumbers,
)
from bindscope.analyses.complexity.verdict import FitsDisagree, Open, Verdict, finding_of
from bindscope.estimators.metrics import format_spread

#: Every output of a sweep that selected checkpoints on test accuracy says so.
OPTIMISTIC = (
    "optimistic: checkpoints were selected on test_only object accuracy (--selection test, the research code's "
    "choice); the test accuracies, AUC and f* overstate generalisation"
)


# -- reasons ------------------------------------------------------------------------------------------------
def describe_fits(fits: dict[str, list[float]]) -> str:
    """``{approximator: fractions}`` as one line: ``mult at f = 0.2, 0.6; mlp(1024) at f = 0.1``."""
    return "; ".join(f"{k} at f = {', '.join(f'{f:g}' for f in v)}" for k, v in fits.items())


def capacity_reason(why: Memorises) -> str:
    """Why a family can memorise, e.g. ``table width 24 >= 24 objects: it can give every object any vector``."""
    one = why.holds.removesuffix("s")
    return f"table width {why.width} >= {why.count} {why.holds}: it can give every {one} any vector"


def open_reason(why: Open) -> str:
    """Why the data leave a family's predictions for unseen objects open."""
    if isinstance(why, Memorises):
        return f"its {capacity_reason(why)}"
    return f"two equally good fits from different initialisations disagree on unseen objects ({_gaps(why)})"


def _gaps(why: FitsDisagree) -> str:
    return ", ".join(f"{gap:.2f} of the test variance at f = {f:g}" for f, gap in why.disagreement.items())


# -- the verdict ----------------------------------------------------------------------------------------------
def reading(verdict: Verdict, protocol: str) -> str:
    """The verdict in one sentence; with unconverged fits it starts ``unreliable:`` and says which flag to raise
    under ``protocol`` (the budget's)."""
    caveat = "" if verdict.reliable else _unreliable(verdict.unconverged, protocol)
    said = _generalises(verdict) if verdict.finding == "generalises" else _no_family(verdict, protocol)
    return f"{caveat}: {said}" if caveat else said


def raise_budget(protocol: str) -> str:
    """What to raise when no family fits its training scenes, under ``protocol`` (the budget's)."""
    if protocol == "paper":
        return (
            "more --epochs, or the exact protocol (--protocol exact); in a run config, "
            "`budget: {name: paper, epochs: 8000}`"
        )
    return (
        "more --epochs or a wider --hidden for the MLP, more --sweeps or a wider --width for the table families, "
        "or the uncapped budget (--budget full); in a run config, `budget: full` or "
        "`budget: {name: cpu, epochs: 2000}`"
    )


def _unreliable(unconverged: dict[str, list[float]], protocol: str) -> str:
    more = (
        "more --sweeps (table families) or --epochs (mlp)"
        if protocol == "exact"
        else "more --epochs, or the exact protocol (--protocol exact)"
    )
    fits = describe_fits(unconverged)
    return f"unreliable: fits did not converge ({fits}); rerun with {more} before reading this verdict"


def _generalises(verdict: Verdict) -> str:
    best = verdict.simplest
    assert best is not None and verdict.f_star is not None  # a family generalises
    said = f"{best} generalises to scenes of unseen objects from a fraction of {verdict.f_star:g} of the objects"
    if best in verdict.undetermined:
        said += (
            f" (but {open_reason(verdict.undetermined[best])}: this f* reflects the optimiser, not the family's form)"
        )
    return said


def _no_family(verdict: Verdict, protocol: str = "exact") -> str:
    """No family generalises: high complexity only from converged, decisive evidence, which must include the
    sweep's largest fraction (failing from fewer objects is allowed to any family: f* may lie anywhere up to it),
    and from a family that fits the scenes it was fitted on there (else the budget to raise, under ``protocol``)."""
    top, too_few = verdict.largest, verdict.too_few
    enough = " on enough scenes" if too_few else ""
    said = (
        f"no family reaches {GENERALISES_AT:.0%} of in-distribution accuracy on scenes of unseen objects{enough} "
        f"at any fraction up to {top:g}"
    )
    if too_few:
        named = ", ".join(f"{label} at f = {f:g}" for label, f in too_few.items())
        said += f" ({named} crosses it on too few scenes, or the larger fractions fall back below it)"
    if verdict.finding == "unreliable":
        return said
    if verdict.finding == "no_fit":
        return (
            f"cannot tell: {said}, and no family fits even the scenes it was fitted on at f = {top:g} (its "
            f"predictions of them reach less than {FITS_AT:.0%} of the probes' accuracy on their true embeddings): "
            f"a failure on unseen objects then says nothing about the binding function; raise the budget "
            f"({raise_budget(protocol)})"
        )
    if verdict.finding == "not_decisive":
        decisive = verdict.decisive or []
        where = f"only at f = {', '.join(f'{f:g}' for f in decisive)}" if decisive else "at no fraction"
        return (
            f"cannot tell: {said}, but the evidence is decisive {where}, not at {top:g}: a decisive fraction "
            f"needs {COVERED_AT:.0%} of its test scenes to hold only concept values seen in training, in numbers "
            "enough to tell a failure from chance (see coverage); use more --seeds or a larger concept space"
        )
    if verdict.fitting:
        said += f" ({_fitting_words(verdict.fitting)})"
    if verdict.finding == "open_families":  # a family the data leave open says nothing by failing
        why = "; ".join(f"{label}: {open_reason(reason)}" for label, reason in verdict.undetermined.items())
        return (
            f"{said}: high complexity for the other families, but not for {', '.join(verdict.undetermined)}, whose "
            f"predictions for unseen objects the data do not determine at this size ({why})"
        )
    return f"{said}: a high-complexity binding function"


def _fitting_words(fitting: list[str] | None) -> str:
    """The families fitting their training scenes, in words."""
    named = ", ".join(fitting or [])
    if len(fitting or []) == 1:
        return f"{named} fits the scenes it was fitted on"
    return f"{named} fit the scenes they were fitted on"


# -- notes ----------------------------------------------------------------------------------------------------
def probe_scenes_note(unscored: int | None, probe_scenes: str) -> str:
    """Whether the probes' training scenes were scored (``probe_scenes``: the setting), in one line."""
    if unscored is not None:
        return f"the {unscored:,} scenes the probes were fitted on are not scored in test_only, mixed or train_only"
    if probe_scenes == "keep":
        return "scored (--probe-scenes keep, the research code): the in-distribution line includes the probes' own"
    return (
        "scored: the frozen probes record no training split, so the in-distribution line may include scenes they "
        "fitted (use probes from `bindscope probe`, or fit them here, to leave them out)"
    )


def generalisation_note(read: Generalisation) -> str:
    """What the card's column read, in one line."""
    if read.fraction is None or read.family is None:
        most = "none at any fraction" if not read.scenes else f"at most {read.scenes:.1f} per seed at any fraction"
        return (
            f"the binding column is not measured: no fraction whose test scenes hold fitted values only scores "
            f"{MIN_CASES} test_only scenes needing binding (with swaps of unseen objects) on every seed ({most}); "
            "a larger concept space, or fractions where fewer objects are seen, give more"
        )
    scenes = "" if read.scenes is None else f" ({read.scenes:.0f} scenes needing binding per seed)"
    said = f"binding on unseen objects read for {read.family} at f = {read.fraction:g}{scenes}"
    if read.fitting:
        return f"{said}; {_fitting_words(read.fitting)} there"
    return f"{said}; no family fits its training scenes there: undetermined (raise the budget)"


def fitted_in_note(fitted_in: FittedIn | None) -> str:
    """Where the models were fitted (the embeddings, or their leading principal subspace), in one line."""
    if fitted_in is None:
        return "fitted in: the embeddings as they are"
    return (
        f"fitted in: the embeddings' leading {fitted_in.dims} of {fitted_in.of} principal components, holding "
        f"{fitted_in.variance_kept:.2%} of the variance; the probes read the embeddings' part inside them at "
        f"{fitted_in.object_acc:.1%} object accuracy (the embeddings: {fitted_in.object_acc_embeddings:.1%}). "
        "Predictions are scored in the full embedding space; --max-target-dims 0 fits the embeddings as they are"
    )


def notes(summary: ComplexitySummary) -> list[str]:
    """The lines after the headline table: the verdict, the budget, where the models were fitted, capacity,
    the probes' scenes and the fits reused."""
    b = summary.budget
    lines = [
        f"verdict: {summary.verdict.reading}",
        *([f"card: {generalisation_note(summary.generalisation)}"] if summary.generalisation is not None else []),
        f"budget: {b.name}, protocol {b.protocol} (sweeps {b.sweeps}, epochs {b.epochs}, "
        f"lr {b.decay}, patience {b.patience}, train scenes <= "
        f"{b.max_train_scenes or 'all'}, scored scenes <= {b.max_eval_scenes or 'all'}, {b.starts} "
        f"starts of {b.start_sweeps} sweeps, {b.probes} probes); "
        f"checkpoints selected on {summary.selection}",
        *([f"budget chosen: {b.reason}"] if b.reason else []),
        fitted_in_note(summary.fitted_in),
        *(f"capacity: {label}'s {why}" for label, why in summary.capacity.items()),
    ]
    if summary.probes is not None:
        lines.append(f"probe scenes: {summary.probes.scored_scenes}")
    if summary.fits is not None:
        lines.append(
            f"fits: {summary.fits.fitted} fitted, {summary.fits.reused} reused from an earlier run into this "
            f"folder (kept in {FITS}/ per family, fraction and seed)"
        )
    return lines


# -- the headline table ---------------------------------------------------------------------------------------
def headline(summary: ComplexitySummary) -> Rows:
    """Per approximator: parameters, AUC (± sd over the seeds), f*, test_only object accuracy at the smallest,
    middle and largest fraction, its object accuracy and R² on the scenes it was fitted on at the largest, the
    share of scenes needing binding told from their swaps at the card's fraction, seconds; then the in-distribution
    lines, chance and the share of test scenes whose values were all fitted."""
    fractions = sorted(summary.in_distribution, key=float)
    shown = sorted({fractions[0], fractions[len(fractions) // 2], fractions[-1]}, key=float)
    top = fractions[-1]
    read = summary.generalisation
    card = None if read is None or read.fraction is None else f"{read.fraction:g}"
    seeds = max((a.auc.n_seeds for a in summary.approximators.values()), default=0)
    rows: Rows = [
        (
            "approximator",
            "params",
            f"AUC (± sd over {seeds} seed{'' if seeds == 1 else 's'})",
            "f*",
            *(f"acc@{f} %" for f in shown),
            f"train acc@{top} %",
            f"train R²@{top}",
            f"binding@{card} % (exchanged)" if card else "binding % (exchanged)",
            "seconds",
        )
    ]
    for label, a in summary.approximators.items():
        rows.append(
            (
                label,
                f"{a.parameters:,}",
                format_spread(a.auc.model_dump()),
                "-" if a.f_star is None else f"{a.f_star:g}",
                *(_percent(a.object_acc, f) for f in shown),
                _percent(a.train_object_acc, top),
                _number(a.train_r2, top),
                "-" if card is None else f"{_percent(a.swap_acc, card)} ({_percent(a.swap_exchanged, card)})",
                f"{a.seconds:.0f}",
            )
        )
    binding = "-" if card is None else _percent(summary.swap_in_distribution, card)
    train = _percent(summary.train_in_distribution, top)
    line = [_percent(summary.in_distribution, f) for f in shown]
    rows.append(("in-distribution", "", "", "", *line, train, "", binding, ""))
    chance = "-" if card is None else _percent(summary.swap_chance, card)
    rows.append(("chance", "", "", "", *(_percent(summary.chance, f) for f in shown), "", "", chance, ""))
    rows.append(("values all fitted", "", "", "", *(_percent(summary.coverage, f) for f in shown), "", "", "", ""))
    return rows


def _percent(curve: Curve, fraction: str) -> str:
    value = curve.get(fraction)
    return "-" if value is None else f"{100 * value.mean:.1f}"


def _number(curve: Curve, fraction: str) -> str:
    value = curve.get(fraction)
    return "-" if value is None else f"{value.mean:.3f}"


def plot_title(title: str, budget: str, selection: str) -> str:
    """The complexity figure's title: the embeddings', the budget and an optimistic selection."""
    out = f"{title}: binding-function complexity ({budget} budget)"
    return out + (", selected on test (optimistic)" if selection == "test" else "")


# -- the report card's cell -----------------------------------------------------------------------------------
#: How complex a binding function is when a family of this kind is the simplest that generalises: the product
#: within an object is as cheap as a sum of objects; products across objects and an MLP are not.
LEVELS = {"additive": "low", "mult_within_object": "low", "mult": "moderate", "sum_mult": "moderate", "mlp": "high"}


def largest_fraction(summary: ComplexitySummary) -> float | None:
    """The largest fraction of objects seen in the sweep (None: no curve recorded)."""
    fractions = [float(f) for a in summary.approximators.values() for f in a.object_acc]
    fractions += [float(f) for f in summary.in_distribution]
    return max(fractions) if fractions else None


def card_words(summary: ComplexitySummary) -> str:
    """The descriptive verdict in a few words: its level, then the family and from what share of the objects seen
    (``low: mult within object generalises from 20% seen``), or what no family does (``high: no family up to 50%
    seen``; ``unknown: ... no family fits its training scenes`` where none fits even the scenes it was fitted on).
    The card's typed verdict is the ``generalises to unseen objects`` column's (:mod:`.card`)."""
    verdict = summary.verdict
    caveat = "" if verdict.reliable else " (unreliable: fits did not converge)"
    if verdict.simplest_generalising is not None and verdict.f_star is not None:
        family = Family.parse(verdict.simplest_generalising)
        named = verdict.simplest_generalising.replace("_", " ")
        return f"{LEVELS[family.name]}: {named} generalises from {verdict.f_star:.0%} seen{caveat}"
    return _no_family_words(verdict, largest_fraction(summary))


def _no_family_words(verdict: VerdictNumbers, largest: float | None) -> str:
    """The card's words when no family generalises, by the verdict's finding (:func:`finding_of`)."""
    said = "no family" + ("" if largest is None else f" up to {largest:.0%} seen")
    fits = verdict.fitting is None or bool(verdict.fitting)
    finding = finding_of(None, verdict.reliable, verdict.decisive_fractions, largest, bool(verdict.undetermined), fits)
    if finding == "unreliable":
        return f"unknown: {said}, but fits did not converge"
    if finding == "no_fit":
        return f"unknown: {said}, and no family fits its training scenes: raise the budget"
    if finding == "not_decisive":
        return f"cannot tell: {said}, evidence not decisive"
    if finding == "open_families":
        return f"high but for {', '.join(verdict.undetermined)} (left open): {said}"
    return f"high: {said}"
