"""Scoring a sweep's models: their predicted embeddings decoded by the frozen probes per scene group (the
train_only group: the scenes each was fitted on), the test_only scenes that need binding told apart from their
binding swaps (:mod:`.swaps`), the references (the probes on the true embeddings, chance), value coverage,
prequential code lengths, and what two fits from different initialisations say about unseen objects; every
number a tidy row, a rate with the cases it is a share of (``n_cases``)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from bindscope.analyses.complexity.families import Family, Layout, Params
from bindscope.analyses.complexity.fitters.adam import Selector
from bindscope.analyses.complexity.fitters.stack import SceneIndex, StackFit, predict_stack
from bindscope.analyses.complexity.plan import Plan
from bindscope.analyses.complexity.reads import OBJECT, Reads, probe_reads
from bindscope.analyses.complexity.swaps import Swaps, swap_chance, told_apart, unseen_pairs
from bindscope.core.tidy import result_row
from bindscope.estimators.additive import r2_score
from bindscope.estimators.metrics import accuracy_metrics
from bindscope.estimators.probes import ProbeSet, chance_accuracy, set_separation_correct

#: Two fits from different initialisations leave a family's unseen-object predictions open where they fit the
#: seen scenes equally well (validation MSEs within TIED_WITHIN of the validation targets' variance) and both
#: well (training R² at least FITS_TRAINING_AT; else the form is ruled out anyway) but disagree on covered
#: test_only scenes by more than DETERMINED_BELOW of their variance. Fits not tied are a local minimum and a
#: better one: no evidence either way.
DETERMINED_BELOW = 0.1
FITS_TRAINING_AT = 0.9
TIED_WITHIN = 0.005
#: The scored test_only scenes that need binding, told apart from their binding swaps of unseen objects only
#: (:func:`.swaps.told_apart`), the same read with each scene's and its swap's embeddings exchanged (the control),
#: and how many scenes were scored (variant ``scenes``); all in group :data:`UNSEEN`, the test_only group.
UNSEEN, SWAP, EXCHANGED, SWAP_SCENES = "test_only", "swap_acc", "swap_acc_exchanged", "binding_scenes"
#: The metrics that are rates: a share of the scored scenes of their row (``n_cases``); others have none.
RATES = ("object_acc", "concept_acc", SWAP, EXCHANGED, "covered_share")


@dataclass(frozen=True)
class Truth:
    """What predictions are scored against: the embeddings ``y``, the probes' soft ``targets`` and the frozen
    ``probes``; ``centre``, where given, the mean R²'s SST is taken around (else each group's own); ``swaps``,
    the binding swaps among the scenes (None: the scenes needing binding are not scored)."""

    y: np.ndarray
    targets: dict[str, np.ndarray]
    probes: ProbeSet
    centre: np.ndarray | None = None
    swaps: Swaps | None = None

    def read(self, pred: np.ndarray, scenes: np.ndarray, keep: np.ndarray | None = None) -> Reads:
        """The probes' read of predictions ``pred`` of the ``scenes`` (:func:`.reads.probe_reads`; the object
        logits of the rows ``keep`` marks)."""
        return probe_reads(self.probes, pred, scenes, self.targets, keep)

    def of(self, pred: np.ndarray, idx: np.ndarray, correct: dict[str, np.ndarray]) -> dict[str, float]:
        """:func:`score` of predictions ``pred`` for the scenes ``idx``, read right where ``correct`` (per probe)."""
        return metrics(correct, pred, self.y[idx], self.centre)

    def binding(self, plan: Plan) -> tuple[np.ndarray, np.ndarray]:
        """The pairs a model of ``plan`` is scored on: each scored test_only scene that needs binding with each of
        its swaps of unseen objects only; and the sorted scenes whose embeddings telling them apart takes."""
        if self.swaps is None:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        present = self.targets["object"] > 0
        pos = unseen_pairs(self.swaps, self.swaps.scored(plan.groups[UNSEEN]), present, plan.test_objects)
        return pos, np.union1d(self.swaps.scene[pos], self.swaps.swap[pos])

    def told_apart(self, pos: np.ndarray, lookup: np.ndarray, logits: np.ndarray) -> dict[str, float]:
        """The share of the scenes of the pairs ``pos`` told apart from their swaps by embeddings of the scenes
        ``lookup`` (the object probe's ``logits`` on them), and the same with each scene's and its swap's
        embeddings exchanged."""
        assert self.swaps is not None  # only called with pairs from :meth:`binding`
        present = self.targets["object"] > 0
        return {
            SWAP: float(told_apart(self.swaps, pos, lookup, logits, present).mean()),
            EXCHANGED: float(told_apart(self.swaps, pos, lookup, logits, present, exchanged=True).mean()),
        }

    def scenes_of(self, pos: np.ndarray) -> int:
        """How many scenes the pairs ``pos`` score."""
        return 0 if self.swaps is None else len(np.unique(self.swaps.scene[pos]))


def score(
    pred: np.ndarray,
    y: np.ndarray,
    targets: dict[str, np.ndarray],
    probes: ProbeSet,
    centre: np.ndarray | None = None,
) -> dict[str, float]:
    """Accuracies of ``pred`` under the frozen probes, and R^2 (SST around ``centre``, by default
    the scored scenes' own mean) and MSE against ``y``."""
    logits = probes.decision_function(pred)
    return metrics({n: set_separation_correct(logits[n], t) for n, t in targets.items()}, pred, y, centre)


def metrics(correct: dict[str, np.ndarray], pred: np.ndarray, y: np.ndarray, centre: np.ndarray | None) -> dict:
    """Accuracies of predictions read right where ``correct`` (per probe), and their R^2 and MSE against ``y``."""
    out = accuracy_metrics({n: c.mean() for n, c in correct.items()})
    out["r2"] = r2_score(y, pred, centre)
    out["mse"] = float(np.mean((np.asarray(y, np.float64) - pred) ** 2))
    return out


def metric_rows(
    approximator: str, plan: Plan, group: str, checkpoint: str, metrics: dict[str, float], cases: int | None = None
) -> Iterator[dict]:
    """One tidy row per metric of one model (``variant``: the approximator's label or a reference); a rate
    (:data:`RATES`) carries ``cases``, the scenes it is a share of."""
    for metric, value in metrics.items():
        yield {
            **result_row("complexity", approximator, group, metric, plan.seed, value),
            "fraction": plan.fraction,
            "checkpoint": checkpoint,
            "n_cases": cases if is_rate(metric) else None,
        }


def is_rate(metric: str) -> bool:
    """Whether a metric is a share of its row's scored scenes (:data:`RATES`, and each concept's accuracy)."""
    return metric in RATES or metric.startswith("concept_acc.")


# -- coverage -----------------------------------------------------------------------------------------------
def covered_share(values: np.ndarray, fitted: np.ndarray, scored: np.ndarray) -> float:
    """Share of the ``scored`` scenes that are :func:`covered` (NaN for none)."""
    return float(covered(values, fitted, scored).mean()) if len(scored) else float("nan")


def covered(values: np.ndarray, fitted: np.ndarray, scored: np.ndarray) -> np.ndarray:
    """Per ``scored`` scene: whether its every (slot, concept, value) occurs in the ``fitted`` ones.

    A table family has trained the rows of those values only: a scene holding any other value
    reads at least one row that never left its initialisation, so no table family can predict it.

    Parameters
    ----------
    values
        ``[N, K, C]`` concept values per slot (``PAD`` where a slot is empty).
    fitted, scored
        Row indices into ``values``.
    """
    top = int(values.max()) + 2  # PAD (-1) maps to 0, always "trained"
    shifted = values + 1
    trained = np.zeros((values.shape[1], values.shape[2], top), dtype=bool)
    trained[:, :, 0] = True
    k, c = np.meshgrid(np.arange(values.shape[1]), np.arange(values.shape[2]), indexing="ij")
    trained[k[None], c[None], shifted[fitted]] = True
    return trained[k[None], c[None], shifted[scored]].all(axis=(1, 2))


# -- references -----------------------------------------------------------------------------------------------
def reference_rows(plans: list[Plan], truth: Truth, values: np.ndarray) -> list[dict]:
    """Per model and group: the probes on the true embeddings ("embeddings"), chance, group sizes and
    the share of scenes whose concept values were all fitted (``covered_share``)."""
    rows: list[dict] = []
    scored = np.unique(np.concatenate([np.zeros(0, np.int64), *(i for p in plans for i in p.groups.values())]))
    on_truth = truth.read(truth.y[scored], scored)  # every scene once, however many groups score it
    for plan in plans:
        for group, idx in plan.groups.items():
            sizes: dict[str, float] = {"group_scenes": plan.group_sizes[group], "scored_scenes": len(idx)}
            if len(idx):
                sizes["covered_share"] = covered_share(values, plan.train, idx)
            rows += metric_rows("scenes", plan, group, "", sizes, len(idx))
            if not len(idx):  # e.g. no test_only scene at this fraction: nothing to score
                continue
            read = on_truth.at(np.searchsorted(scored, idx))
            accuracy = accuracy_metrics({n: c.mean() for n, c in read.items()})
            rows += metric_rows("embeddings", plan, group, "", accuracy, len(idx))
            t = {n: v[idx] for n, v in truth.targets.items()}
            chance = accuracy_metrics({n: chance_accuracy(v) for n, v in t.items()})
            rows += metric_rows("chance", plan, group, "", chance)
        rows += binding_reference_rows(plan, truth)
        rows += metric_rows("scenes", plan, "train_only", "", {"fitted_scenes": len(plan.train)})
    return rows


def binding_reference_rows(plan: Plan, truth: Truth) -> list[dict]:
    """The test_only scenes that need binding (with swaps of unseen objects): how many are scored, the share the
    true embeddings tell apart from their swaps (the in-distribution line of :data:`SWAP`), and chance."""
    pos, lookup = truth.binding(plan)
    scenes = truth.scenes_of(pos)
    rows = list(metric_rows("scenes", plan, UNSEEN, "", {SWAP_SCENES: scenes}))
    if not scenes:
        return rows
    assert truth.swaps is not None  # pairs to score come from swaps
    logits = truth.read(truth.y[lookup], lookup, np.ones(len(lookup), dtype=bool)).logits
    rows += metric_rows("embeddings", plan, UNSEEN, "", truth.told_apart(pos, lookup, logits), scenes)
    chance = swap_chance(truth.swaps, pos, truth.targets["object"] > 0)
    return rows + list(metric_rows("chance", plan, UNSEEN, "", {SWAP: chance}))


def block_bits(mse: float, scenes: int, dim: int) -> float:
    """Bits to send ``scenes`` x ``dim`` values under a Gaussian with the block's own MSE (+ its variance)."""
    if scenes == 0:
        return 0.0
    return scenes * dim / 2 * math.log2(2 * math.pi * math.e * max(mse, 1e-300)) + 0.5 * math.log2(scenes * dim)


def _block_rows(approximator: str, plan: Plan, mse: float, dim: int, checkpoint: str = "") -> Iterator[dict]:
    """The prequential code of a model's next block, predicted with MSE ``mse``."""
    code = {"block_mse": mse, "block_scenes": plan.block_size, "code_bits": block_bits(mse, plan.block_size, dim)}
    return metric_rows(approximator, plan, "next_block", checkpoint, code)


def baseline_block_rows(plans: list[Plan], y: np.ndarray) -> list[dict]:
    """Prequential code of the next block with no model: the mean of the scenes seen so far."""
    rows: list[dict] = []
    for plan in plans:
        if not len(plan.block):
            continue
        seen = np.concatenate([plan.groups["validation"], plan.train])
        mse = float(np.mean((y[plan.block].astype(np.float64) - y[seen].mean(axis=0)) ** 2))
        rows += _block_rows("mean", plan, mse, y.shape[1])
    return rows


# -- fitted models --------------------------------------------------------------------------------------------
def family_rows(
    family: Family,
    layout: Layout,
    data: SceneIndex,
    plans: list[Plan],
    members: list[int],
    fit: StackFit,
    truth: Truth,
    description_length: bool,
) -> list[dict]:
    """A stack's rows: per model its selected and final checkpoints scored per group, the selected one's
    test_only scenes that need binding (told apart from their swaps) and next block (with
    ``description_length``), and its fit (epochs, convergence)."""
    models = [plans[i] for i in members]
    binding = [truth.binding(p) for p in models]
    wanted = scored_scenes(models, binding)
    rows: list[dict] = []
    for checkpoint, params in (("selected", fit.selected), ("final", fit.final)):
        preds = predict_stack(family, params, layout, data, wanted)
        rows += prediction_rows(family.label, models, binding, wanted, preds, checkpoint, truth, description_length)
    for j, plan in enumerate(models):
        rows += metric_rows(family.label, plan, "train_only", "", _fit_metrics(fit, j))
    return rows


def scored_scenes(models: list[Plan], binding: list[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
    """Per model, the sorted scenes its predictions are scored on: its groups, next block and binding scenes
    (``binding``: its :meth:`Truth.binding`)."""
    return [np.unique(np.concatenate([*p.groups.values(), p.block, b[1]])) for p, b in zip(models, binding)]


def prediction_rows(
    label: str,
    models: list[Plan],
    binding: list[tuple[np.ndarray, np.ndarray]],
    wanted: list[np.ndarray],
    preds: list[np.ndarray],
    checkpoint: str,
    truth: Truth,
    description_length: bool,
) -> list[dict]:
    """The rows of one checkpoint of a stack's models (``preds[j]``: model j's predictions of the scenes
    ``wanted[j]``, :func:`scored_scenes`; ``binding[j]``: its :meth:`Truth.binding`): per group, the probes'
    accuracies, R² and MSE; at the selected checkpoint the test_only scenes that need binding told apart from
    their swaps, and the next block's code (with ``description_length``). Each model's scenes are read by
    every probe at once (:meth:`Truth.read`)."""
    rows: list[dict] = []
    for plan, (pos, needed), lookup, pred in zip(models, binding, wanted, preds):
        told = checkpoint == "selected" and len(pos) > 0
        read = truth.read(pred, lookup, np.isin(lookup, needed) if told else None)  # groups and swaps at once
        for group, idx in plan.groups.items():
            if len(idx):
                at = np.searchsorted(lookup, idx)
                rows += metric_rows(label, plan, group, checkpoint, truth.of(pred[at], idx, read.at(at)), len(idx))
        if told:
            apart = truth.told_apart(pos, needed, read.logits)
            rows += metric_rows(label, plan, UNSEEN, checkpoint, apart, truth.scenes_of(pos))
        if description_length and checkpoint == "selected" and len(plan.block):
            err = pred[np.searchsorted(lookup, plan.block)] - truth.y[plan.block]
            mse = float(np.mean(err.astype(np.float64) ** 2))
            rows += _block_rows(label, plan, mse, truth.y.shape[1], checkpoint)
    return rows


def _fit_metrics(fit: StackFit, j: int) -> dict[str, float]:
    """How model ``j`` of a stack was fitted."""
    return {
        "epochs_run": fit.epochs_run[j],
        "best_epoch": fit.best_epoch[j],
        "best_val_mse": fit.best_val_mse[j],
        "stopped_early": float(fit.stopped_early[j]),
        "unfinished_r2": float(fit.unfinished_r2[j]),
        "converged": float(fit.converged[j]),
    }


def second_fit_rows(
    family: Family,
    layout: Layout,
    data: SceneIndex,
    members: list[Plan],
    kept: StackFit,
    other: StackFit,
    y: np.ndarray,
    centre: np.ndarray | None,
    values: np.ndarray,
) -> list[dict]:
    """Per model, what two fits from different initialisations say about unseen objects.

    ``second_fit_disagreement``: the squared distance of their predictions on the covered
    test_only scenes (see :func:`covered`; elsewhere tables keep their random initialisation) over
    the targets' sum of squares around ``centre``. ``second_fit_train_r2``: the other fit's training
    R². ``second_fit_val_gap``: how much higher its validation MSE is than the kept one's, over the
    validation targets' mean square around ``centre`` (else the training mean): an R² gap.
    ``second_fit_undetermined``: 1 where :func:`two_fits_undetermined`.
    """
    train = [p.train for p in members]
    test = [p.groups["test_only"][covered(values, p.train, p.groups["test_only"])] for p in members]
    ours, theirs = (predict_stack(family, f.selected, layout, data, test) for f in (kept, other))
    fits = {"kept": kept, "other": other}
    fitted = {name: predict_stack(family, f.selected, layout, data, train) for name, f in fits.items()}
    rows: list[dict] = []
    for j, plan in enumerate(members):
        if not len(test[j]):
            continue
        truth = y[test[j]].astype(np.float64)
        sst = float(((truth - (truth.mean(axis=0) if centre is None else centre)) ** 2).sum())
        gap = float(((ours[j].astype(np.float64) - theirs[j]) ** 2).sum()) / max(sst, 1e-300)
        train_r2 = {name: r2_score(y[train[j]], pred[j]) for name, pred in fitted.items()}
        held = y[plan.groups["validation"]].astype(np.float64)
        scale = float(((held - (y[train[j]].mean(axis=0) if centre is None else centre)) ** 2).mean())
        val_gap = float(other.best_val_mse[j] - kept.best_val_mse[j]) / max(scale, 1e-300)
        undetermined = two_fits_undetermined(val_gap, gap, list(train_r2.values()))
        metrics = {
            "second_fit_disagreement": gap,
            "second_fit_train_r2": train_r2["other"],
            "second_fit_val_gap": val_gap,
            "second_fit_undetermined": float(undetermined),
        }
        rows += metric_rows(family.label, plan, "test_only", "", metrics)
    return rows


def two_fits_undetermined(val_gap: float, disagreement: float, train_r2: list[float]) -> bool:
    """Whether two fits leave a family's unseen-object predictions open: they tie on validation
    (``val_gap`` at most :data:`TIED_WITHIN`), both fit their training scenes (R² at least
    :data:`FITS_TRAINING_AT`) and disagree on test scenes by more than :data:`DETERMINED_BELOW`."""
    return val_gap <= TIED_WITHIN and disagreement > DETERMINED_BELOW and min(train_r2) >= FITS_TRAINING_AT


def test_accuracy_selector(
    family: Family, layout: Layout, data: SceneIndex, members: list[Plan], targets: np.ndarray, probes: ProbeSet
) -> Selector:
    """``1 -`` test_only object accuracy of each model's predictions under the frozen probes (the
    research code's checkpoint choice: optimistic)."""
    test = [p.groups["test_only"] for p in members]

    def select(params: Params, models: np.ndarray) -> np.ndarray:
        preds = predict_stack(family, params, layout, data, [test[m] for m in models])
        reads = [probe_reads(probes, pred, test[m], {OBJECT: targets}) for pred, m in zip(preds, models)]
        acc = [r.correct[OBJECT].mean() for r in reads]
        return 1.0 - np.asarray(acc, dtype=np.float64)

    return select
