"""Folder-backed inputs of an analysis: an embedding folder, its dataset, the control, frozen probes.

Loading happens here, at the edge; analyses compute on the arrays (:meth:`Inputs.arrays`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bindscope.analyses.results import LoadedResult, load_result
from bindscope.core.errors import BindscopeError
from bindscope.data.datasets import Dataset, load_dataset
from bindscope.embeddings.store import EmbeddingSet, find_rand_control, find_single_objects, load_embeddings
from bindscope.estimators.probes import ProbeSet
from bindscope.space.concepts import SceneSet

log = logging.getLogger(__name__)

#: What an analysis can take: scene embeddings (always), the ``+rand`` control's embeddings, frozen
#: probes, the single-object bank (rows object-major: row ``o * S + s`` is object ``o`` alone at
#: position ``s`` of ``S``), a second modality of the same model, and uni-modal probe results (the
#: object and concept probe accuracy of ``bindscope probe`` per modality).
INPUT_KINDS = ("embeddings", "control", "probes", "singles", "other", "unimodal")


@dataclass(frozen=True)
class AnalysisInputs:
    """The arrays an analysis computes on, aligned with ``scenes``."""

    embeddings: np.ndarray
    scenes: SceneSet
    control: np.ndarray | None = None
    probes: ProbeSet | None = None
    singles: np.ndarray | None = None
    other: np.ndarray | None = None
    unimodal: dict[str, dict[str, Any]] | None = None  # per modality: probe accuracies (spreads)
    noun: str | None = None  # the dataset's noun concept (its preset's), when known

    def __post_init__(self) -> None:
        y = np.asarray(self.embeddings)
        if y.ndim != 2:
            raise BindscopeError(f"embeddings must be 2-D [scenes, dim], got shape {y.shape}")
        if len(y) != len(self.scenes):
            raise BindscopeError(f"{len(y)} embeddings but {len(self.scenes)} scenes; rows must align with scenes")
        if self.control is not None and np.shape(self.control)[0] != len(y):
            raise BindscopeError(f"the control has {np.shape(self.control)[0]} rows, the embeddings {len(y)}")

    def present(self) -> set[str]:
        """The input kinds given."""
        return {"embeddings"} | {k for k in INPUT_KINDS[1:] if getattr(self, k) is not None}


@dataclass(frozen=True)
class Inputs:
    """An embedding folder, its dataset, and the optional ``+rand`` control, frozen probes and
    single-object bank."""

    embeddings: EmbeddingSet
    dataset: Dataset
    control: EmbeddingSet | None = None
    probes: ProbeSet | None = None
    probes_path: Path | None = None
    singles: EmbeddingSet | None = None
    other: EmbeddingSet | None = None
    unimodal: dict[str, LoadedResult] | None = None
    _described: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def arrays(self) -> AnalysisInputs:
        """The arrays the analyses compute on (a single-object folder's rows are 1-object scenes)."""
        ctrl = np.asarray(self.control.array) if self.control is not None else None
        singles = np.asarray(self.singles.array) if self.singles is not None else None
        return AnalysisInputs(
            np.asarray(self.embeddings.array),
            single_object_scenes(self.embeddings, self.dataset) if self.is_single_objects else self.dataset.scenes,
            control=ctrl,
            probes=self.probes,
            singles=singles,
            other=np.asarray(self.other.array) if self.other is not None else None,
            unimodal={m: probe_accuracies(r) for m, r in self.unimodal.items()} if self.unimodal else None,
            noun=self.dataset.preset.noun,
        )

    def input_paths(self) -> list[Path]:
        """The folders these inputs were read from (an output may be none of them)."""
        sets = (self.embeddings, self.control, self.singles, self.other)
        paths = [s.root for s in sets if s is not None] + [self.dataset.root]
        paths += [self.probes_path] if self.probes_path is not None else []
        return paths + [r.path for r in (self.unimodal or {}).values()]

    @property
    def is_single_objects(self) -> bool:
        """Whether the embedding folder itself is a single-object bank (``embed --single-objects``)."""
        return self.embeddings.rows == "single_objects"

    def describe(self) -> dict[str, Any]:
        """Provenance for the result header; each input carries a ``key`` (what its content is).

        Computed once per :class:`Inputs` (an embedding folder without a content key in its manifest
        is hashed whole), however often a step asks for it."""
        if not self._described:
            self._described.update(self._describe())
        return self._described

    def _describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "embeddings": describe_embeddings(self.embeddings),
            "dataset": {
                "path": str(self.dataset.root.resolve()),
                "preset": self.dataset.name,
                "hash": self.dataset.hash,
                "key": self.dataset.hash,
            },
            "control": describe_embeddings(self.control) if self.control is not None else None,
            "probes": None,
            "singles": None,
            "other": describe_embeddings(self.other) if self.other is not None else None,
            "unimodal": {
                m: {"path": str(r.path.resolve()), "key": r.header.content_key} for m, r in self.unimodal.items()
            }
            if self.unimodal
            else None,
        }
        if self.singles is not None:
            manifest = self.singles.manifest
            out["singles"] = {
                **describe_embeddings(self.singles),
                "positions": int(manifest.get("single_positions", 1)),
                "captions": manifest.get("single_captions", "template") if self.singles.modality == "text" else None,
            }
        if self.probes is not None:
            out["probes"] = {
                "path": str(self.probes_path.resolve()) if self.probes_path else None,
                "key": probes_key(self.probes),
            }
        return out


def single_object_scenes(bank: EmbeddingSet, dataset: Dataset) -> SceneSet:
    """The rows of a single-object bank as 1-object scenes: row ``o * S + s`` is object ``o`` alone."""
    positions = int(bank.manifest.get("single_positions", 1))
    return SceneSet.singles(dataset.space).subset(np.repeat(np.arange(dataset.space.num_objects), positions))


def describe_embeddings(emb: EmbeddingSet) -> dict[str, Any]:
    """An embedding folder in a result header."""
    key = emb.manifest.get("content_key") or array_key(np.asarray(emb.array))
    return {
        "path": str(emb.root.resolve()),
        "name": emb.name,
        "modality": emb.modality,
        "dim": emb.dim,
        "num_rows": len(emb),
        "model_spec": emb.manifest.get("model_spec"),
        "layer": emb.manifest.get("layer"),
        "content_key": emb.manifest.get("content_key"),
        "key": key,
    }


def array_key(array: np.ndarray) -> str:
    """sha256 of an array's shape, dtype and bytes."""
    h = hashlib.sha256(f"{array.shape}|{array.dtype}".encode())
    h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()


def json_key(value: Any) -> str:
    """sha256 of a JSON-able value (keys sorted)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def probes_key(probes: ProbeSet) -> str:
    """sha256 of frozen probes' weights, mean and preprocessing."""
    h = hashlib.sha256(f"{probes.center}|{probes.normalize}".encode())
    for name in sorted(probes.coef_):
        h.update(name.encode() + array_key(np.asarray(probes.coef_[name])).encode())
    if probes.mean_ is not None:
        h.update(array_key(np.asarray(probes.mean_)).encode())
    return h.hexdigest()


def describe_arrays(arrays: AnalysisInputs) -> dict[str, Any]:
    """In-memory inputs in a result header (no folders: keys of the arrays themselves)."""
    y = np.asarray(arrays.embeddings)
    scene_hash = arrays.scenes.content_hash()
    out: dict[str, Any] = {
        "embeddings": {"in_memory": True, "dim": int(y.shape[1]), "num_rows": len(y), "key": array_key(y)},
        "dataset": {"in_memory": True, "scene_set_hash": scene_hash, "key": scene_hash},
        "control": None,
        "probes": None,
        "singles": None,
        "other": {"in_memory": True, "key": array_key(np.asarray(arrays.other))} if arrays.other is not None else None,
        "unimodal": {"in_memory": True, "key": json_key(arrays.unimodal)} if arrays.unimodal else None,
    }
    if arrays.singles is not None:
        out["singles"] = {"in_memory": True, "key": array_key(np.asarray(arrays.singles))}
    if arrays.control is not None:
        out["control"] = {"in_memory": True, "key": array_key(np.asarray(arrays.control))}
    if arrays.probes is not None:
        out["probes"] = {"in_memory": True, "key": probes_key(arrays.probes)}
    return out


def read_inputs(
    emb_dir: str | Path,
    dataset: str | Path | None = None,
    control: str | Path | None = None,
    *,
    find_control: bool = True,
    probes: str | Path | None = None,
    probe_seed: int = 0,
    singles: str | Path | None = None,
    find_singles: bool = False,
    other: str | Path | None = None,
    allow_different_models: bool = False,
    unimodal: dict[str, str | Path] | None = None,
    single_objects: bool = False,
) -> Inputs:
    """Read an embedding folder with its dataset (from the manifest unless given), control, probes
    and single-object bank: the reader under :func:`bindscope.analyses.load_inputs`, which decides
    from an analysis what to look for.

    Without ``control``, a sibling ``+rand`` folder is used when ``find_control`` is set.
    ``probes`` is a probe folder (``probe.json``) or a ``bindscope probe`` output folder, whose
    ``probes/seed{probe_seed}/`` is taken. ``singles`` is a single-object embedding folder
    (``bindscope embed --single-objects``) of the same model and modality; without it, a sibling
    folder holding one is used when ``find_singles`` is set. ``other`` is the folder of the other
    modality of the same model; ``unimodal`` maps a modality to a ``bindscope probe`` result folder of it.
    ``single_objects``: ``emb_dir`` may itself be a single-object folder (its rows then are the 1-object
    scenes, and it is the single-object bank too).
    """
    emb_dir = Path(emb_dir)
    raw = load_embeddings(emb_dir, mmap=True, rows=None if single_objects else "scenes")  # its manifest only
    recorded = raw.manifest.get("dataset_path") or ""
    ds_path = Path(dataset) if dataset is not None else Path(recorded) if recorded else None
    if ds_path is None or not ds_path.is_dir():
        raise BindscopeError(f"the dataset of {emb_dir} is not at {ds_path or '(unknown)'}; pass --dataset DIR")
    ds = load_dataset(ds_path)
    if single_objects and raw.rows == "single_objects":
        emb = load_embeddings(emb_dir, ds, rows="single_objects")
        return Inputs(emb, ds, singles=emb)
    emb = load_embeddings(emb_dir, ds)
    control_dir = Path(control) if control is not None else (find_rand_control(emb) if find_control else None)
    ctrl = load_embeddings(control_dir, ds) if control_dir is not None else None
    if ctrl is not None:
        log.info("using %s as the +rand control", control_dir)
    frozen, folder = load_frozen_probes(probes, ds, probe_seed) if probes is not None else (None, None)
    second = load_other_modality(other, emb, ds, allow_different_models) if other is not None else None
    bank_for = second if second is not None else emb  # half-truths need the text single-object captions
    singles_dir = Path(singles) if singles is not None else (find_single_objects(bank_for) if find_singles else None)
    bank = load_single_objects(singles_dir, bank_for, ds) if singles_dir is not None else None
    results = {m: load_probe_result(p, ds, m) for m, p in (unimodal or {}).items()} or None
    return Inputs(emb, ds, ctrl, frozen, folder, bank, second, results)


def load_probe_result(path: str | Path, dataset: Dataset, modality: str) -> LoadedResult:
    """A ``bindscope probe`` result folder of this dataset's ``modality`` embeddings."""
    result = load_result(path)
    if result.analysis != "probe":
        raise BindscopeError(f"{path} is a {result.analysis} result; give a `bindscope probe` output folder")
    recorded = (result.header.inputs.get("dataset") or {}).get("key")
    if recorded is not None and recorded != dataset.hash:
        raise BindscopeError(
            f"the probe result {path} is of another dataset (hash {str(recorded)[:12]}, this one "
            f"{dataset.hash[:12]}); probe these embeddings first"
        )
    got = (result.header.inputs.get("embeddings") or {}).get("modality")
    if got is not None and got != modality:
        raise BindscopeError(f"the probe result {path} is of {got} embeddings; give one of {modality} embeddings")
    return result


def probe_accuracies(result: LoadedResult) -> dict[str, Any]:
    """The test-set object and concept probe accuracy (spreads over seeds) and object chance of a probe result."""
    numbers = result.numbers
    test = numbers.get("test") or {}
    return {
        "object_acc": test.get("object_acc"),
        "concept_acc": test.get("concept_acc"),
        "chance": (numbers.get("chance") or {}).get("object_acc"),
    }


def load_other_modality(
    path: str | Path, first: EmbeddingSet, dataset: Dataset, allow_different_models: bool
) -> EmbeddingSet:
    """The second modality of the same model: the same dataset, the other modality, the same model spec
    (unless ``allow_different_models``)."""
    second = load_embeddings(path, dataset)
    if second.modality == first.modality:
        raise BindscopeError(
            f"{path} holds {second.modality} embeddings like {first.root}; give one image and one text folder"
        )
    a, b = first.manifest.get("model_spec"), second.manifest.get("model_spec")
    if a != b and not allow_different_models:
        raise BindscopeError(
            f"{first.root} was embedded with {a!r} and {path} with {b!r}; cross-modal tests need one joint model "
            "(or pass --allow-different-models)"
        )
    return second


def load_single_objects(path: str | Path, scenes: EmbeddingSet, dataset: Dataset) -> EmbeddingSet:
    """A single-object bank for ``scenes``: same dataset, model, layer and modality."""
    bank = load_embeddings(path, dataset, rows="single_objects")
    for key, what in (("modality", "modality"), ("model_spec", "model"), ("layer", "layer")):
        mine, theirs = scenes.manifest.get(key), bank.manifest.get(key)
        if mine != theirs:
            raise BindscopeError(
                f"the single-object embeddings in {path} are of {what} {theirs!r}, the scene embeddings of "
                f"{mine!r}; embed the single objects with the scenes' model, layer and modality"
            )
    if bank.dim != scenes.dim:
        raise BindscopeError(f"the single-object embeddings in {path} have width {bank.dim}, the scenes {scenes.dim}")
    log.info("using %s as the single-object bank", path)
    return bank


def load_frozen_probes(path: str | Path, dataset: Dataset, seed: int = 0) -> tuple[ProbeSet, Path]:
    """Probes from a probe folder (``probe.json``) or from a ``bindscope probe`` output folder.

    They must belong to this dataset (when they record its hash); :func:`load_probes` checks the
    files themselves, and the analyses check their shapes against the dataset and embeddings.
    """
    path = Path(path)
    folder = path if (path / "probe.json").is_file() else path / "probes" / f"seed{seed}"
    if not (folder / "probe.json").is_file():
        raise BindscopeError(
            f"{path} holds no probes: give a probe folder (with probe.json) or the output folder of "
            f"`bindscope probe` (with probes/seed{seed}/)"
        )
    probes = ProbeSet.load(folder)
    recorded = probes.meta_.get("dataset_hash")
    if recorded is not None and recorded != dataset.hash:
        raise BindscopeError(
            f"the probes in {folder} were fitted on another dataset (hash {str(recorded)[:12]}, this one "
            f"{dataset.hash[:12]}); fit probes on these embeddings with bindscope probe"
        )
    space = dataset.space
    labels = {"object": space.num_objects, **{c: len(v) for c, v in zip(space.concepts, space.values)}}
    for name, weights in probes.coef_.items():
        if name in labels and weights.shape[0] != labels[name]:
            raise BindscopeError(
                f"the {name} probe in {folder} has {weights.shape[0]} labels but {dataset.root} has "
                f"{labels[name]}; fit probes on these embeddings with bindscope probe"
            )
    return probes, folder
