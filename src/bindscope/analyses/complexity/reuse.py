"""Finished fits kept by their own content keys, per (family, fraction, seed): a rerun with more approximators,
fractions or seeds fits only the new models."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from bindscope.analyses.complexity.families import Family
from bindscope.analyses.complexity.plan import Plan, stacks
from bindscope.analyses.complexity.units import SweepShared
from bindscope.analyses.inputs import array_key, probes_key
from bindscope.core.executors import UnitStore, current_store
from bindscope.core.version import __version__

#: The folder, beside a run's units, where finished fits are kept by their own content keys (see
#: :func:`model_keys`): a rerun with more approximators, fractions or seeds fits only the new ones.
FITS = "fits"
#: What a kept fit's rows hold; raised when scoring adds or changes rows, so that older fits are fitted again.
ROWS_VERSION = 2


def fit_stores() -> list[UnitStore]:
    """Where a sweep finds finished fits, the first one also keeping the new ones: :data:`FITS` beside
    the run's units folder (``.<out>.units/``, shared by every run into ``out`` whatever its
    approximators, fractions and seeds), then ``out/fits`` of a result already there; none without
    a units folder (a sweep outside :func:`~bindscope.analyses.registry.run_analysis`)."""
    store = current_store()
    if store is None:
        return []
    units = store.folder.parent
    out = units.parent / units.name.removeprefix(".").removesuffix(".units")
    return [UnitStore(units / FITS), UnitStore(out / FITS)]


def sweep_key(shared: SweepShared) -> str:
    """What every fit of a sweep depends on besides its family and model: the bindscope version, the
    embeddings, scenes and probes, and every setting but the lists of families, fractions and seeds."""
    settings = {
        k: v for k, v in shared.settings.to_dict().items() if k not in ("approximators", "hidden", "fractions", "seeds")
    }
    blob = {
        "bindscope": __version__,
        "rows": ROWS_VERSION,
        "settings": settings,
        "width": shared.width,
        "embeddings": array_key(shared.y),
        "scenes": array_key(shared.scenes.scenes),
        "probes": probes_key(shared.probes),
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()


def model_keys(shared: SweepShared) -> dict[Family, list[str]]:
    """Per family, the content key of each planned model's fit: the family, the sweep's key
    (:func:`sweep_key`), the model's fraction and seed, and the scenes it fits, selects on and scores
    (with description lengths, its next block too, which the next fraction up decides)."""
    base = sweep_key(shared)
    plans = []
    for plan in shared.plans:
        h = hashlib.sha256(f"{base}|{plan.fraction!r}|{plan.seed}|{sorted(plan.group_sizes.items())}".encode())
        parts = [plan.train, *(plan.groups[g] for g in sorted(plan.groups))]
        if shared.settings.description_length:
            parts += [plan.block, np.array([plan.block_size])]
        for part in parts:
            h.update(np.ascontiguousarray(part, dtype=np.int64).tobytes() + b"|")
        plans.append(h.hexdigest())
    return {
        f: [hashlib.sha256(f"{f.label}|{p}".encode()).hexdigest() for p in plans] for f in shared.settings.families()
    }


def kept_fits(stores: list[UnitStore], keys: dict[Family, list[str]]) -> dict[str, dict]:
    """The fits among ``keys`` that any of ``stores`` holds, by key."""
    out: dict[str, dict] = {}
    for key in (k for family_keys in keys.values() for k in family_keys):
        for store in stores:
            found, part = store.get(key)
            if found:
                out[key] = part
                break
    return out


def missing_stacks(plans: list[Plan], missing: list[int], family: Family, shared: SweepShared) -> list[list[int]]:
    """Stacks (:func:`~bindscope.analyses.complexity.plan.stacks`) of the ``missing`` models only, as indices
    into ``plans``."""
    if not missing:
        return []
    chosen = [plans[i] for i in missing]
    groups = stacks(chosen, family, shared.width, shared.y.shape[1], shared.layout)
    return [[missing[j] for j in group] for group in groups]
