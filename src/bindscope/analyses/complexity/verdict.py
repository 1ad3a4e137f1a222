"""The complexity verdict (docs/method/06-complexity.md) as data: the simplest family that generalises and from what
coverage, whether the fits it rests on converged, whether any family fits even the scenes it was fitted on, where
the evidence is decisive, and which families' predictions for unseen objects the data leave open.
:mod:`~bindscope.analyses.complexity.present` says it in words. It describes the sweep; the card's typed verdict
is :mod:`~bindscope.analyses.complexity.card`'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from bindscope.analyses.complexity.families import Family, Memorises

#: A family's two fits leave its unseen-object predictions open at a fraction where at least this share of
#: its seeds' pairs do (:func:`~bindscope.analyses.complexity.score.two_fits_undetermined`).
UNDETERMINED_SEEDS = 0.5


@dataclass(frozen=True)
class FitsDisagree:
    """Two equally good fits from different initialisations disagree on unseen objects: per fraction where
    most seeds' pairs did, their mean disagreement as a share of the test variance."""

    disagreement: dict[float, float]


#: Why a family's predictions for unseen objects are not fixed by its form and the data: it can memorise, or
#: two equally good fits of it disagree.
Open = Memorises | FitsDisagree

#: What the verdict finds: a family ``generalises`` (from ``f_star``); else no family does, and that says
#: nothing because fits it rests on did not converge (``unreliable``), no family fits even the scenes it was fitted
#: on at the largest fraction (``no_fit``: the budget, not the binding function, is what failed) or the largest
#: fraction's evidence is not decisive (``not_decisive``), or it says high complexity for every family but those the
#: data leave open (``open_families``), or for every family (``high_complexity``).
Finding = Literal["generalises", "unreliable", "no_fit", "not_decisive", "open_families", "high_complexity"]


@dataclass(frozen=True)
class Verdict:
    """The simplest family that generalises (reaches f*), and how far the evidence carries.

    Attributes
    ----------
    simplest, f_star
        The label of the simplest generalising family and its f* (None, None: no family generalises).
    generalising
        Every generalising family's label, simplest first.
    unconverged
        The fits the verdict rests on that did not converge: per family, the fractions.
    decisive
        The fractions whose evidence is decisive (None: the table has no coverage rows).
    undetermined
        The families whose predictions for unseen objects the data leave open, and why.
    too_few
        Families whose accuracy crosses the line without the evidence for an f*: the fraction where it first does.
    largest
        The sweep's largest fraction.
    fitting
        The families that fit their training scenes at the largest fraction
        (:func:`~bindscope.analyses.complexity.curves.fitting`); None: not known (every family is taken to fit).
    """

    simplest: str | None
    f_star: float | None
    generalising: list[str]
    unconverged: dict[str, list[float]]
    decisive: list[float] | None
    undetermined: dict[str, Open]
    too_few: dict[str, float]
    largest: float
    fitting: list[str] | None = None

    @property
    def reliable(self) -> bool:
        """Whether every fit the verdict rests on converged."""
        return not self.unconverged

    @property
    def finding(self) -> Finding:
        """What the verdict finds (see :data:`Finding`)."""
        fits = self.fitting is None or bool(self.fitting)
        return finding_of(self.simplest, self.reliable, self.decisive, self.largest, bool(self.undetermined), fits)


def finding_of(
    simplest: str | None,
    reliable: bool,
    decisive: list[float] | None,
    largest: float | None,
    open_families: bool,
    fits: bool = True,
) -> Finding:
    """What a verdict finds (see :data:`Finding`) from its parts, as :class:`Verdict` holds them or a summary
    records them (``largest`` None: no fraction is known, so the evidence is not judged by it; a summary's
    fractions went through text, so ``largest`` is looked for in ``decisive`` to within 1e-9; ``fits``: whether
    some family fits its training scenes at the largest fraction)."""
    if simplest is not None:
        return "generalises"
    if not reliable:
        return "unreliable"
    if not fits:
        return "no_fit"
    if largest is not None and decisive is not None and not any(abs(f - largest) < 1e-9 for f in decisive):
        return "not_decisive"
    return "open_families" if open_families else "high_complexity"


def decide(
    families: list[Family],
    f_star: Mapping[str, float | None],
    largest: float,
    *,
    f_star_any: Mapping[str, float | None] | None = None,
    unconverged: Mapping[str, list[float]] | None = None,
    undetermined: Mapping[str, Open] | None = None,
    decisive: list[float] | None = None,
    fitting: list[str] | None = None,
) -> Verdict:
    """The verdict from each family's f* (by label; ``f_star_any``: where its accuracy first crosses the line,
    evidence or not) and the sweep's ``largest`` fraction.

    It depends on every fit of the families simpler than the one it names and on that family's fits below its
    f* (all fits when none generalises): if any of those did not converge (``unconverged``), it is unreliable
    and claims no high complexity. A family whose predictions for unseen objects the data do not determine
    (``undetermined``, see :func:`undetermined_families`) is said to be so when named, and its failure is no
    evidence of high complexity; with ``decisive`` fractions given (see
    :func:`~bindscope.analyses.complexity.curves.decisive_fractions`) and not the largest among them, no high
    complexity either; with ``fitting`` given (the families that fit their training scenes at the largest fraction)
    and empty, no high complexity: a family that fits not even the scenes it saw says nothing about unseen ones.
    """
    ranked = sorted(families, key=lambda f: f.simplicity)
    generalising = [f.label for f in ranked if f_star[f.label] is not None]
    best = generalising[0] if generalising else None
    fs = f_star[best] if best is not None else None
    any_crossing = f_star_any or {}
    too_few = {
        f.label: cross for f in families if f_star[f.label] is None and (cross := any_crossing.get(f.label)) is not None
    }
    doubtful = _doubtful(ranked, best, fs, unconverged or {})
    shown = None if fitting is None else [f.label for f in ranked if f.label in fitting]
    return Verdict(best, fs, generalising, doubtful, decisive, dict(undetermined or {}), too_few, largest, shown)


def _doubtful(
    ranked: list[Family], best: str | None, fs: float | None, unconverged: Mapping[str, list[float]]
) -> dict[str, list[float]]:
    """The unconverged fits the verdict rests on: every one of a family simpler than ``best``, and ``best``'s
    below its f* ``fs`` (every family's where none generalises)."""
    doubtful: dict[str, list[float]] = {}
    for family in ranked:
        if family.label == best:
            below = [f for f in unconverged.get(best, []) if fs is not None and f < fs]
            if below:
                doubtful[best] = below
            break
        if unconverged.get(family.label):
            doubtful[family.label] = unconverged[family.label]
    return doubtful


def undetermined_families(
    f_star: Mapping[str, float | None],
    capacity: Mapping[str, Memorises],
    decisive: list[float] | None,
    shares: Mapping[str, Mapping[float, float]],
    disagreement: Mapping[str, Mapping[float, float]],
) -> dict[str, Open]:
    """Why a family's predictions for unseen objects are not fixed by its form and the data.

    Either it can memorise (``capacity``), or at least :data:`UNDETERMINED_SEEDS` of its seeds had two fits
    that tie on validation, both fit their training scenes, and disagree on covered test scenes (``shares``:
    per family and fraction, the share of seeds so; ``disagreement``: their mean disagreement): at its f* if it
    has one; else at any decisive fraction (a failure says nothing where the data left the fit open).
    """
    out: dict[str, Open] = {label: why for label, why in capacity.items() if label in f_star}
    for label, fs in f_star.items():
        mine = shares.get(label, {})
        if label in out or not mine:
            continue
        fallback = decisive if decisive is not None else list(mine)
        wanted = [fs] if fs is not None else fallback
        seen = [f for f in wanted if f in mine and mine[f] >= UNDETERMINED_SEEDS]
        if seen:
            out[label] = FitsDisagree({f: disagreement[label][f] for f in seen})
    return out
