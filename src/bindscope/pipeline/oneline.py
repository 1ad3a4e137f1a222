"""The run config of the one-liner, ``bindscope run --model SPEC [--dataset PRESET] ... --out DIR``.

The common case without a YAML file: one or more models (and/or embedding folders made elsewhere), the
presets that fit their modalities, every analysis that applies, each model's ``+rand`` control and
single-object bank. The result is an ordinary :class:`~bindscope.pipeline.config.RunConfig`, validated by
the same code as a YAML file's, and the run writes it to ``config.yaml`` so it can be repeated or edited.

Defaults
--------
- datasets: ``text`` and ``clevr`` (captions) for a text model, ``clevr`` (images and captions) for an
  image-text model; a preset larger than ``max_scenes`` is subsampled (every object kept in every slot).
- analyses: all six, less ``crossmodal`` when nothing in the run embeds images.
- ``quick``: one seed, 1,000 text scenes, the fast solvers and a small complexity sweep (as ``demo-quick``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from bindscope.core.errors import BindscopeError
from bindscope.data.presets import load_preset
from bindscope.embeddings.encoders import embeds_images
from bindscope.pipeline.config import RUN_ANALYSES, RunConfig, parse_config

#: The presets a model gets when no ``--dataset`` is given, by what it embeds.
TEXT_PRESETS = ("text", "clevr")
IMAGE_PRESETS = ("clevr",)
#: Scenes kept of a larger preset (a covering subsample): ``quick`` and the full one-liner.
MAX_SCENES = {True: 1000, False: 5000}
#: The analysis settings of ``--quick`` (the ``demo-quick`` run's): lbfgs probes, one additive sweep.
QUICK_ANALYSES: dict[str, Any] = {
    "probe": {"optimizer": "lbfgs"},
    "decompose": {"optimizer": "lbfgs"},
    "intervene": {"probe_optimizer": "lbfgs"},
    "complexity": {"approximators": ["additive"], "fractions": [0.5], "budget": {"name": "cpu", "epochs": 60}},
    "geometry": {"fractions": [0.3, 0.6]},
    "crossmodal": True,
}
_NAMED = re.compile(r"^(?P<name>[A-Za-z0-9_.+-]+)=(?P<spec>.+)$")


def one_line_config(
    models: Sequence[str] = (),
    datasets: Sequence[str] | None = None,
    analyses: Sequence[str] | None = None,
    embeddings: Sequence[str] = (),
    *,
    quick: bool = False,
    name: str | None = None,
    device: str | None = None,
    modality: str | None = None,
    max_scenes: int | None = -1,
) -> RunConfig:
    """A run config from the one-liner's options.

    Parameters
    ----------
    models
        Model specs as ``bindscope embed --model`` takes them; ``NAME=SPEC`` names the model's folders.
    datasets
        Presets (or preset YAML files) to embed; default: those that fit the models' modalities.
    analyses
        Analyses to run; default: every one that applies.
    embeddings
        Embedding folders made elsewhere (``bindscope embeddings import``), analysed beside the models.
    quick
        A small first look: one seed, 1,000 text scenes, the fast solvers, a short complexity sweep.
    name
        The run's name (default: from the models' names).
    device
        Torch device of every step (default cpu).
    modality
        Embed only this modality (``text`` or ``image``) with every model.
    max_scenes
        Subsample presets larger than this (every object kept in every slot); -1 for the default (5,000, or
        1,000 with ``quick``), None for every scene.

    Raises
    ------
    BindscopeError
        For no model and no embeddings, a bad option, or a config the run would refuse (one line, every
        problem at once).
    """
    if not models and not embeddings:
        raise BindscopeError("give at least one --model SPEC (or --embeddings DIR); `bindscope models` lists specs")
    if modality not in (None, "image", "text"):
        raise BindscopeError(f"--modality must be image or text, got {modality!r}")
    cap = MAX_SCENES[quick] if max_scenes == -1 else max_scenes
    entries = [model_entry(m, modality) for m in models]
    chosen = list(datasets) if datasets else default_presets(entries)
    data: dict[str, Any] = {
        "name": name or run_name(entries, embeddings),
        "description": "bindscope run " + " ".join(f"--model {m}" for m in models),
        "datasets": [dataset_entry(p, cap) for p in chosen] if entries else [],
        "models": fitted_models(entries, chosen) if entries else [],
        "embeddings": [{"path": e} for e in embeddings],
        "analyses": chosen_analyses(analyses, quick, entries, embeddings),
    }
    if quick:
        data["seeds"] = [0]
    if device is not None:
        data["device"] = device
    return parse_config(data, origin="the command line's run")


def model_entry(given: str, modality: str | None) -> dict[str, Any]:
    """A model of the one-liner: ``SPEC`` or ``NAME=SPEC``, with the modalities its backend embeds."""
    named = _NAMED.match(given)
    spec = named["spec"] if named and not any(c in named["name"] for c in ":/") else given
    entry: dict[str, Any] = {"spec": spec}
    if named and spec != given:
        entry["name"] = named["name"]
    entry["modalities"] = [modality] if modality else (["image", "text"] if _has_images(spec) else ["text"])
    return entry


def _has_images(spec: str) -> bool:
    try:
        return embeds_images(spec)
    except BindscopeError:  # a malformed spec: the config's validation says why, with every other problem
        return False


def default_presets(entries: list[dict[str, Any]]) -> list[str]:
    """The presets that fit the models: captions for text models, images and captions for image-text ones."""
    chosen: list[str] = []
    for entry in entries:
        for preset in IMAGE_PRESETS if "image" in entry["modalities"] else TEXT_PRESETS:
            if preset not in chosen:
                chosen.append(preset)
    return chosen


def dataset_entry(preset: str, cap: int | None) -> dict[str, Any]:
    """A dataset of the one-liner, named as its preset, subsampled to ``cap`` scenes when it has more."""
    loaded = load_preset(preset)
    entry: dict[str, Any] = {"name": loaded.name, "preset": preset}
    if cap is not None and len(loaded.k_object_scenes()) > cap:
        entry["max_scenes"] = cap
    return entry


def fitted_models(entries: list[dict[str, Any]], presets: list[str]) -> list[dict[str, Any]]:
    """Each model on the datasets that offer everything it embeds; refuses a dataset no model embeds."""
    loaded = [load_preset(p) for p in presets]
    offered = {p.name: set(p.config.modalities) for p in loaded}
    fitted = []
    for entry in entries:
        fits = [n for n, mods in offered.items() if set(entry["modalities"]) <= mods]
        fitted.append({**entry, "datasets": fits} if fits and len(fits) < len(offered) else entry)
    for dataset, mods in offered.items():
        if not any(set(e["modalities"]) <= mods for e in entries):
            raise BindscopeError(
                f"no model of the run can embed dataset {dataset} (it has {' and '.join(sorted(mods))} only, the "
                "models embed images too); add --modality text to embed the captions only, or drop the dataset"
            )
    return fitted


def chosen_analyses(
    names: Sequence[str] | None, quick: bool, entries: list[dict[str, Any]], embeddings: Sequence[str]
) -> dict[str, Any]:
    """The analyses section: the named ones, or all six less crossmodal when nothing embeds images."""
    if names:
        wanted = list(dict.fromkeys(names))
    else:
        images = any("image" in e["modalities"] for e in entries) or bool(embeddings)
        wanted = [n for n in RUN_ANALYSES if n != "crossmodal" or images]
    return {n: (QUICK_ANALYSES.get(n, True) if quick else True) for n in wanted}


def run_name(entries: list[dict[str, Any]], embeddings: Sequence[str]) -> str:
    """A run name from the models' (or embedding folders') last names, at most 60 characters."""
    parts = [e.get("name") or re.split(r"[:/]", e["spec"].rstrip("/"))[-1] for e in entries]
    parts += [str(p).rstrip("/").rsplit("/", 1)[-1] for p in embeddings]
    name = re.sub(r"[^A-Za-z0-9_.+-]", "_", "-vs-".join(parts))[:60].strip("._-")
    return name or "run"


__all__ = ["one_line_config"]
