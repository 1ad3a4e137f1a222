"""Scenes looked up by their objects, and the attribute / noun roles of a space's concepts.

Shared by the analyses that pair a scene with another one (interventions, swaps, half-truths).
"""

from __future__ import annotations

import numpy as np

from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import SceneSet
from bindscope.space.families import COUNT, PLACE


def scene_lookup(scenes: SceneSet) -> tuple[np.ndarray, np.ndarray]:
    """Sorted scene keys (``id1 * U + id2``) and the scene row of each; refuses duplicate scenes."""
    ids = scenes.object_ids().astype(np.int64)
    keys = ids[:, 0] * scenes.space.num_objects + ids[:, 1]
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    dup = np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])
    if len(dup):
        a, b = sorted(order[dup[0] : dup[0] + 2])
        raise BindscopeError(
            f"scenes {a} and {b} hold the same two objects ({len(dup):,} duplicate(s) in all); scenes are "
            "looked up by their objects here, so each must appear once: deduplicate the dataset"
        )
    return sorted_keys, order


def find_scenes(lookup: tuple[np.ndarray, np.ndarray], keys: np.ndarray) -> np.ndarray:
    """The row of each scene key, -1 where no scene has it."""
    sorted_keys, order = lookup
    pos = np.searchsorted(sorted_keys, keys)
    pos = np.minimum(pos, len(sorted_keys) - 1)
    return np.where(sorted_keys[pos] == keys, order[pos], -1)


def concept_roles(scenes: SceneSet, attribute: str | None, noun: str | None) -> dict[str, str]:
    """The attribute and noun concept names: as given, else the last concept as the noun and, in a
    2-concept space, the other one as the attribute; a relation or count space's place and count are left aside
    (a colour x shape space with counts has its attribute and noun found as one without)."""
    concepts = scenes.space.concepts
    named = [c for c in concepts if c not in (PLACE, COUNT)] or list(concepts)
    noun = noun or named[-1]
    check_concept(concepts, "noun", noun)
    if attribute is None:
        others = [c for c in named if c != noun]
        if len(others) != 1:
            raise BindscopeError(
                f"the space has concepts {', '.join(concepts)}; name the attribute with --attribute "
                f"(and the noun with --noun)"
            )
        attribute = others[0]
    check_concept(concepts, "attribute", attribute)
    if attribute == noun:
        raise BindscopeError(f"the attribute and the noun must be different concepts, both are {noun!r}")
    return {"attribute": attribute, "noun": noun}


def check_concept(concepts: tuple[str, ...] | list[str], role: str, name: str) -> None:
    if name not in concepts:
        raise BindscopeError(f"--{role} {name!r} is not a concept of this space; choose one of {', '.join(concepts)}")
