"""The MDS picture of one quadruple from the inputs (docs/method/08-geometry.md; :mod:`.mds` draws it).

The attribute and noun drawn, the quadruple's value indices, and the picture's vectors: with 2-object
scene embeddings, the simple objects and the attribute / noun means come from the scenes (each mean over
the scenes holding it in either slot) and the composites are mean scene vectors, as in the research code;
from single-object embeddings alone, the simple objects are those and there are no composites.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bindscope.analyses.geometry.mds import Picture, Quad, composite_keys, quad_picture
from bindscope.analyses.geometry.vectors import ObjectVectors
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.core.errors import BindscopeError
from bindscope.estimators.object_banks import group_means
from bindscope.estimators.scene_index import concept_roles
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.families import COUNT, PLACE


@dataclass(frozen=True)
class MdsPicture:
    """The picture of one quadruple, the concepts it draws (attribute, noun), the quadruple's value names
    (attribute i, noun j, attribute k, noun l) and how many of its composites had 2-object scenes."""

    picture: Picture
    roles: dict[str, str]
    quad: list[str]
    composites: int

    def points(self) -> pd.DataFrame:
        """The picture's points: label, category, 3-D coordinates."""
        x = self.picture.coords
        return pd.DataFrame(
            {
                "label": self.picture.labels,
                "category": self.picture.categories,
                "x": x[:, 0],
                "y": x[:, 1],
                "z": x[:, 2],
            }
        )


def picture_roles(
    space: ConceptSpace, asked: bool, attribute: str | None, noun: str | None
) -> tuple[dict[str, str] | None, str]:
    """The attribute and noun of the picture, or why there is none (a relation or count space's place and count
    left aside: its other two concepts are drawn)."""
    if not asked:
        return None, "not asked for (--no-mds)"
    named = [c for c in space.concepts if c not in (PLACE, COUNT)]  # a relation or count space's own concepts
    if space.num_concepts < 2:
        return None, "the space has one concept; the picture needs an attribute and a noun"
    if attribute is None and len(named) != 2:
        return None, f"the space has {space.num_concepts} concepts; name the picture's --attribute (and --noun)"
    return concept_roles(SceneSet.singles(space), attribute, noun), ""


def resolve_quad(space: ConceptSpace, roles: dict[str, str], quad: tuple[str, ...] | None) -> Quad:
    """Value indices (attribute i, noun j, attribute k, noun l) of the quadruple's names, or the default."""
    a, o = roles["attribute"], roles["noun"]
    if quad is None:
        sizes = [space.sizes[space.concept_index(c)] for c in (a, o)]
        return (0, 0, min(1, sizes[0] - 1), min(1, sizes[1] - 1))
    i, j, k, m = (space.value_index(c, v) for c, v in zip((a, o, a, o), quad))
    return (i, j, k, m)


def mds_picture(
    inputs: AnalysisInputs, bank: ObjectVectors, space: ConceptSpace, roles: dict[str, str], quad: Quad
) -> MdsPicture:
    """The picture of ``quad``, its object vectors the mean of ``bank`` over slot positions."""
    every = np.flatnonzero(bank.present.any(axis=0))
    mean_vectors = np.nanmean(np.where(bank.present[..., None], bank.vectors, np.nan), axis=0)
    picture, composites = picture_parts(inputs, np.nan_to_num(mean_vectors), every, roles, quad)
    names = [space.values[space.concept_index(roles[r])][i] for r, i in zip(("attribute", "noun") * 2, quad)]
    return MdsPicture(picture, roles, names, composites)


def picture_parts(
    inputs: AnalysisInputs, vectors: np.ndarray, present: np.ndarray, roles: dict[str, str], quad: Quad
) -> tuple[Picture, int]:
    """The MDS picture of the quadruple, and how many composites had 2-object scenes."""
    space, scenes = inputs.scenes.space, inputs.scenes
    means: tuple[np.ndarray, np.ndarray] | None = None
    composites: dict[Quad, np.ndarray] = {}
    rows = scenes.full() if scenes.max_objects == 2 else np.arange(0)
    if len(rows):  # 2-object scene embeddings (a single-object folder has 1-object scenes)
        y, two = np.asarray(inputs.embeddings)[rows], scenes.subset(rows)
        simple, attr, noun = scene_parts(y, two, roles)
        means = (attr, noun)
        composites = composite_means(y, two, roles, composite_keys(quad))
    else:
        simple = simple_grid(vectors, present, space, roles)
    i, j, k, m = quad
    needed = [simple[i, j], simple[k, m], simple[i, m], simple[k, j]]
    if means is not None:
        needed += [means[0][i], means[0][k], means[1][j], means[1][m]]
    if any(np.isnan(v).any() for v in needed):
        raise BindscopeError("the MDS quadruple names an object no scene holds; choose another --quad")
    return quad_picture(simple, composites, quad, means), len(composites)


def means_or_nan(keys: np.ndarray, x: np.ndarray, size: int) -> np.ndarray:
    """Per key, the mean of the rows of ``x`` holding it (:func:`group_means`), NaN for a key no row holds."""
    means, counts = group_means(keys, x, size)
    return np.where(counts[:, None] > 0, means, np.nan).astype(np.float64)


def simple_grid(vectors: np.ndarray, present: np.ndarray, space: ConceptSpace, roles: dict[str, str]) -> np.ndarray:
    """Object vectors by (attribute, noun) ``[A, O, D]``: the mean over the other concepts' values of the
    present objects (NaN where none is present)."""
    a, o = space.concept_index(roles["attribute"]), space.concept_index(roles["noun"])
    values = space.all_objects()[present]
    keys = values[:, a] * space.sizes[o] + values[:, o]
    grid = means_or_nan(keys, np.asarray(vectors)[present], space.sizes[a] * space.sizes[o])
    return grid.reshape(space.sizes[a], space.sizes[o], -1)


def composite_means(y: np.ndarray, scenes: SceneSet, roles: dict[str, str], keys: list[Quad]) -> dict[Quad, np.ndarray]:
    """The mean embedding of the 2-object scenes holding (a1, o1) then (a2, o2), for each key with scenes."""
    space = scenes.space
    a, o = space.concept_index(roles["attribute"]), space.concept_index(roles["noun"])
    v = scenes.scenes
    out: dict[Quad, np.ndarray] = {}
    for key in keys:
        mask = (v[:, 0, a] == key[0]) & (v[:, 0, o] == key[1]) & (v[:, 1, a] == key[2]) & (v[:, 1, o] == key[3])
        if mask.any():
            out[key] = np.asarray(y, dtype=np.float64)[mask].mean(axis=0)
    return out


def scene_parts(y: np.ndarray, scenes: SceneSet, roles: dict[str, str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The research code's simple objects and means from 2-object scenes of two different (attribute, noun)
    pairs: per (attribute, noun), per attribute and per noun, the mean scene vector over the scenes holding it
    in either slot (a scene counted once per slot it fills). NaN where no scene holds it."""
    space = scenes.space
    a, o = space.concept_index(roles["attribute"]), space.concept_index(roles["noun"])
    na, no = space.sizes[a], space.sizes[o]
    v = scenes.scenes
    keep = (v[:, 0, a] != v[:, 1, a]) | (v[:, 0, o] != v[:, 1, o])
    v, x = v[keep], np.asarray(y, dtype=np.float64)[keep]
    out = []
    for keys, size in ((v[:, :, a] * no + v[:, :, o], na * no), (v[:, :, a], na), (v[:, :, o], no)):
        out.append(means_or_nan(keys, x, size))
    return out[0].reshape(na, no, -1), out[1], out[2]
