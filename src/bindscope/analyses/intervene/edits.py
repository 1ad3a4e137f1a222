"""Which edits an intervention run makes (docs/method/05-interventions.md): targets, sides and expected scenes.

For every 2-object scene whose objects differ in the kept concept (the noun, for attribute edits),
one target value of the edited concept outside the scene's two values is drawn (Python's
``random.Random(seed).sample``, one stream in dataset order: the research code's draw, so its
targets are reproduced exactly). Each scene then gives two cases: the left edit (slot 1 takes the
target) and the right edit (slot 2 does). A case whose edited scene is not in the dataset is skipped
and counted.

Each case also records the order-reversed scene of its expected scene (the same two objects in the other
slots) and whether the edit *needs binding*: whether a scene with the expected scene's concept values bound
the other way (a binding swap, "a blue cube and a red sphere" for "a red cube and a blue sphere") is among the
scenes. An ideal bag of concepts embeds such a scene exactly as the expected one, so it cannot tell them apart.

On a count space a *count* edit changes one object's count (:func:`plan_edits` with the count as the edited
concept, no scene excluded). On a relation space a *relation* edit changes the relation (:func:`plan_relation_edits`):
both objects' places change together, the subject's to a target relation and the object's to its converse,
since one place alone would make a scene that is no relation; each scene gives one case (side ``both``). There
the bag is one of roles (:func:`~bindscope.estimators.floors.role_view`), and a binding swap is a relation
(count) swap.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np

from bindscope.analyses.intervene.chance import case_chances
from bindscope.core.errors import BindscopeError
from bindscope.estimators.floors import role_view
from bindscope.estimators.scene_index import find_scenes, scene_lookup
from bindscope.space.concepts import SceneSet
from bindscope.space.families import CONVERSE, COUNT, PLACE

EDITS = ("attribute", "noun")
#: The edit each family adds: it changes the concept of that name (docs/method/11-relations-counts.md).
FAMILY_EDITS = {"relation": PLACE, "count": COUNT}
#: Which object an edit changes: the first (left), the second (right), or both (a relation edit).
SIDES = ("left", "right", "both")
BOTH = SIDES.index("both")


@dataclass(frozen=True)
class EditPlan:
    """The cases of one edit kind and target seed, sorted by scene then side (left first).

    Scene indices are rows of the 2-object scenes the run uses; objects are object ids of the space.
    ``reversed`` is the row of the expected scene's order-reversed scene (-1: not among the scenes, or the
    expected scene itself); ``binding`` whether the expected scene has a binding swap among the scenes
    (:func:`needs_binding`); ``chance`` each metric's chance per case (:mod:`.chance`). A relation edit (side
    ``both``) changes the second object too: ``second`` holds its source and target objects and values
    (``[4, m]``: source object, target object, source value, target value; None for one-object edits).
    ``population``: the cases planned, where these are a sample of them (:func:`sample_plan`; None: every case).
    """

    edit: str
    concept: str
    seed: int
    scene: np.ndarray
    side: np.ndarray
    source_object: np.ndarray
    target_object: np.ndarray
    source_value: np.ndarray
    target_value: np.ndarray
    expected: np.ndarray
    shared: np.ndarray
    reversed: np.ndarray
    binding: np.ndarray
    chance: dict[str, np.ndarray] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    second: np.ndarray | None = None
    population: int | None = None

    def __len__(self) -> int:
        return int(len(self.scene))

    def subset(self, cases: np.ndarray) -> EditPlan:
        """The plan of the cases ``cases`` (sorted positions: the order by scene is kept); skips stay as counted."""
        per_case = {
            name: getattr(self, name)[cases]
            for name in (
                "scene",
                "side",
                "source_object",
                "target_object",
                "source_value",
                "target_value",
                "expected",
                "shared",
                "reversed",
                "binding",
            )
        }
        chance = {metric: values[cases] for metric, values in self.chance.items()}
        second = None if self.second is None else self.second[:, cases]
        return replace(self, **per_case, chance=chance, second=second)


def sample_plan(plan: EditPlan, cases: int | None) -> EditPlan:
    """A seeded uniform sample of ``cases`` of the plan's cases (the plan itself where ``cases`` is None or not
    below its size), stratified by what its rates are split by: the shared / different value and whether the edit
    needs binding. Each stratum gives its share of ``cases`` (the largest remainders rounded up), drawn without
    replacement with the plan's target seed; ``population`` records the cases planned.

    Examples
    --------
    >>> from bindscope.analyses.intervene.edits import plan_edits, sample_plan
    >>> from bindscope.data.presets import get_preset
    >>> plan = plan_edits(get_preset("clevr").build_scenes(), "color", "shape", 42, "attribute")
    >>> sample = sample_plan(plan, 100)
    >>> len(sample), sample.population, len(plan)
    (100, 768, 768)
    """
    if cases is None or cases >= len(plan):
        return plan
    strata = 2 * plan.shared.astype(np.int64) + plan.binding.astype(np.int64)
    sizes = np.bincount(strata, minlength=4)
    share = cases * sizes / len(plan)
    quota = np.floor(share).astype(np.int64)
    quota[np.argsort(quota - share, kind="stable")[: cases - int(quota.sum())]] += 1
    rng = np.random.default_rng(plan.seed)
    picked = [rng.choice(np.flatnonzero(strata == h), int(quota[h]), replace=False) for h in range(4) if quota[h]]
    return replace(plan.subset(np.sort(np.concatenate(picked))), population=len(plan))


def check_two_object_scenes(scenes: SceneSet) -> None:
    """Refuse scene sets that are not all 2-object scenes."""
    if scenes.max_objects != 2 or len(scenes) == 0 or (scenes.num_objects() != 2).any():
        raise BindscopeError(
            f"interventions edit 2-object scenes; these scenes have up to {scenes.max_objects} objects per scene "
            "(select the scenes holding exactly two objects, or use a 2-object dataset)"
        )


def bag_classes(scenes: SceneSet) -> np.ndarray:
    """Per scene ``[N]``: a class id shared by the scenes with the same concept values (the same count of each
    value of each concept), which an ideal bag of concepts embeds identically (on a relation or count space, the
    same objects and places or counts: the bag of roles)."""
    counts = np.concatenate(role_view(scenes).value_counts(), axis=1)
    return np.unique(counts, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def reversed_rows(scenes: SceneSet, rows: np.ndarray) -> np.ndarray:
    """The row of each 2-object scene's order-reversed scene (-1 where it is not among the scenes or is the
    scene itself: one object twice)."""
    ids = scenes.object_ids()[rows].astype(np.int64)
    found = find_scenes(scene_lookup(scenes), ids[:, 1] * scenes.space.num_objects + ids[:, 0])
    return np.where(found == rows, -1, found)


def needs_binding(classes: np.ndarray, expected: np.ndarray, reversed_: np.ndarray) -> np.ndarray:
    """Per case: does a scene other than the expected one and its reversed order have the expected scene's
    concept values (a binding swap, which a bag of concepts cannot tell from it)?"""
    size = np.bincount(classes, minlength=int(classes.max(initial=-1)) + 1)
    return size[classes[expected]] > 1 + (reversed_ >= 0)


def draw_targets(values: np.ndarray, eligible: np.ndarray, choices: np.ndarray, seed: int) -> np.ndarray:
    """One target value per eligible scene, outside its two values ``values`` ``[N, 2]``; -1 elsewhere.

    The research code's draw: ``random.Random(seed)``, scenes in order; the stream advances only
    for scenes with more than one candidate (``rng.sample(candidates, 1)``).
    """
    rng = random.Random(int(seed))
    pool = [int(c) for c in np.sort(choices)]
    out = np.full(len(values), -1, dtype=np.int64)
    for i in np.flatnonzero(eligible):
        a, b = int(values[i, 0]), int(values[i, 1])
        candidates = [c for c in pool if c != a and c != b]
        if len(candidates) > 1:
            out[i] = rng.sample(candidates, 1)[0]
        elif candidates:
            out[i] = candidates[0]
    return out


def plan_edits(
    scenes: SceneSet, edited: str, kept: str | None, seed: int, edit: str, probed: tuple[str, ...] = ()
) -> EditPlan:
    """The left and right edits of concept ``edited`` in every scene whose ``kept`` values differ.

    Parameters
    ----------
    scenes
        The 2-object scenes (rows are what ``scene`` and ``expected`` index).
    edited, kept
        Concept names: the one edited, and the one whose equal values exclude a scene (the noun,
        for attribute edits; the research code skips scenes whose two nouns are equal); None: none is
        excluded (a count edit).
    seed
        Seed of the target draw.
    edit
        The edit's name in the outputs (``attribute``, ``noun`` or ``count``).
    probed
        The concepts whose probes the paper's probe hit reads (default: ``edited`` and ``kept``).
    """
    check_two_object_scenes(scenes)
    space = scenes.space
    e = space.concept_index(edited)
    values = scenes.scenes.astype(np.int64)
    if kept is None:
        same_kept = np.zeros(len(values), dtype=bool)
    else:
        f = space.concept_index(kept)
        same_kept = values[:, 0, f] == values[:, 1, f]
    targets = draw_targets(values[:, :, e], ~same_kept, np.unique(values[:, :, e]), seed)
    kept_scenes = np.flatnonzero(targets >= 0)
    skipped = Counter(
        {f"same {kept}": 2 * int(same_kept.sum()), "no target value": 2 * int(((targets < 0) & ~same_kept).sum())}
    )

    scene = np.repeat(kept_scenes, 2)
    side = np.tile(np.array([0, 1]), len(kept_scenes))
    edited_values = values[scene].copy()
    source_value = edited_values[np.arange(len(scene)), side, e]
    edited_values[np.arange(len(scene)), side, e] = targets[scene]
    ids = space.object_ids(edited_values)
    expected = find_scenes(scene_lookup(scenes), ids[:, 0] * space.num_objects + ids[:, 1])
    skipped["edited scene not in the dataset"] = int((expected < 0).sum())
    keep = expected >= 0
    expected = expected[keep]
    reversed_ = reversed_rows(scenes, expected)
    classes = bag_classes(scenes)
    source_object = space.object_ids(values[scene])[np.arange(len(scene)), side]
    return EditPlan(
        edit=edit,
        concept=edited,
        seed=int(seed),
        scene=scene[keep],
        side=side[keep],
        source_object=source_object[keep],
        target_object=ids[np.arange(len(scene)), side][keep],
        source_value=source_value[keep],
        target_value=targets[scene][keep],
        expected=expected,
        shared=(values[scene, 0, e] == values[scene, 1, e])[keep],
        reversed=reversed_,
        binding=needs_binding(classes, expected, reversed_),
        chance=case_chances(scenes, expected, reversed_, classes, probed or tuple(c for c in (edited, kept) if c)),
        skipped={k: v for k, v in skipped.items() if v},
    )


def plan_relation_edits(scenes: SceneSet, seed: int, probed: tuple[str, ...] = ()) -> EditPlan:
    """The relation edit of every scene of a relation space: the subject's place becomes a target relation, the
    object's its converse (side ``both``), the target drawn as :func:`draw_targets` draws it from the relations
    the scenes' subjects hold, outside the scene's two places; the expected scene must be among the scenes.

    Parameters
    ----------
    scenes
        The 2-object scenes of a relation space (slot 1 the subject, slot 2 the object).
    seed
        Seed of the target draw.
    probed
        The concepts whose probes the paper's probe hit reads (default: every concept of the space).
    """
    check_two_object_scenes(scenes)
    space = scenes.space
    if PLACE not in space.concepts:
        raise BindscopeError(
            f"a relation edit needs a relation space (relations: in its YAML); this space has "
            f"{', '.join(space.concepts)}: edit the attribute, the noun or both"
        )
    e = space.concept_index(PLACE)
    names = space.values[e]
    converse = np.array([names.index(CONVERSE[v]) if CONVERSE[v] in names else -1 for v in names])
    values = scenes.scenes.astype(np.int64)
    related = converse[values[:, 0, e]] == values[:, 1, e]
    targets = draw_targets(values[:, :, e], related, np.unique(values[related, 0, e]), seed)
    skipped = Counter(
        {"no relation": int((~related).sum()), "no target relation": int(((targets < 0) & related).sum())}
    )
    scene = np.flatnonzero(targets >= 0)
    edited_values = values[scene].copy()
    edited_values[:, 0, e] = targets[scene]
    edited_values[:, 1, e] = converse[targets[scene]]
    ids = space.object_ids(edited_values)
    expected = find_scenes(scene_lookup(scenes), ids[:, 0] * space.num_objects + ids[:, 1])
    skipped["edited scene not in the dataset"] = int((expected < 0).sum())
    keep = expected >= 0
    scene, expected, ids, edited_values = scene[keep], expected[keep], ids[keep], edited_values[keep]
    source_ids = space.object_ids(values[scene])
    reversed_ = reversed_rows(scenes, expected)
    classes = bag_classes(scenes)
    return EditPlan(
        edit="relation",
        concept=PLACE,
        seed=int(seed),
        scene=scene,
        side=np.full(len(scene), BOTH, dtype=np.int64),
        source_object=source_ids[:, 0],
        target_object=ids[:, 0],
        source_value=values[scene, 0, e],
        target_value=edited_values[:, 0, e],
        expected=expected,
        shared=np.zeros(len(scene), dtype=bool),  # the two places of a relation always differ
        reversed=reversed_,
        binding=needs_binding(classes, expected, reversed_),
        chance=case_chances(scenes, expected, reversed_, classes, probed or space.concepts),
        skipped={k: v for k, v in skipped.items() if v},
        second=np.stack([source_ids[:, 1], ids[:, 1], values[scene, 1, e], edited_values[:, 1, e]]),
    )
