"""What a run checks from its config alone, before it writes or embeds anything: the splits of its analyses.

Each dataset's scenes follow from its preset, ``max_scenes`` and ``subsample_seed`` without embedding them, so
every analysis that splits scenes by a fraction and a seed plans those splits here as it will at run time, with
the analysis's own planning code:

- ``probe`` and ``decompose``: every seed's scene-level split (``train_fraction``, and decompose's
  ``test_fraction``) leaves train and test scenes;
- ``complexity``: every (fraction, seed) object-level split leaves enough scenes made only of seen objects to fit
  and validate on (the sweep's plan);
- ``geometry``: some fraction splits the objects into seen and unseen ones.

A check that fails refuses the whole run with one line: what cannot run, and the smallest ``max_scenes`` or the
fractions that work. Whatever only the data can tell (an edit no scene allows, a probe-scored group emptied by
``selection: test``) is found at run time; such an analysis is skipped and recorded with its reason and fix.

The layers a model lists are checked against the layers it has (:func:`check_layers`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from bindscope.core.errors import BindscopeError
from bindscope.core.validation import short_repr
from bindscope.data.presets import Preset
from bindscope.pipeline.config import DatasetConfig, ModelConfig, RunConfig
from bindscope.space.concepts import SceneSet
from bindscope.space.splits import DEFAULT_FRACTIONS

#: A check of one analysis's splits on a dataset's scenes: the problem in one line, or None.
Check = Callable[[SceneSet, Any], str | None]


def refusal(plan: Callable[[], object]) -> str | None:
    """The message of the :class:`BindscopeError` ``plan()`` raises, or None when it plans."""
    try:
        plan()
    except BindscopeError as exc:
        return str(exc)
    return None


def probe_problem(scenes: SceneSet, settings: Any) -> str | None:
    """Whether every seed's scene split of the probes (and decompose's held-out R²) leaves train and test scenes."""
    from bindscope.estimators.probe_runs import used_scenes
    from bindscope.space.splits import scene_split

    def plan() -> None:
        n = len(used_scenes(scenes, settings.scenes))
        fractions = [("train_fraction", settings.train_fraction)]
        if hasattr(settings, "test_fraction"):
            fractions.append(("test_fraction", 1.0 - settings.test_fraction))
        for field, fraction in fractions:
            for seed in settings.seeds:
                try:
                    scene_split(n, fraction, seed, source=settings.split_source)
                except BindscopeError as exc:
                    raise BindscopeError(f"{field} on {n} scenes, seed {seed}: {exc}") from None

    return refusal(plan)


def complexity_problem(scenes: SceneSet, settings: Any) -> str | None:
    """Whether every (fraction, seed) model of the complexity sweep has scenes to fit and validate on (its plan)."""
    from bindscope.analyses.complexity.plan import plan_sweep

    full = scenes.full()
    if not len(full):
        return "no scene holds all K objects; the complexity sweep needs K-object scenes"
    return refusal(lambda: plan_sweep(scenes.subset(full), settings))


def geometry_problem(scenes: SceneSet, settings: Any) -> str | None:
    """Whether some fraction splits the objects into seen and unseen ones."""
    from bindscope.analyses.geometry.sweeps import usable_fractions

    return refusal(lambda: usable_fractions(tuple(settings.fractions), scenes.space.num_objects))


CHECKS: dict[str, Check] = {
    "probe": probe_problem,
    "decompose": probe_problem,
    "complexity": complexity_problem,
    "geometry": geometry_problem,
}


def subsample(entry: DatasetConfig, count: int | None) -> SceneSet:
    """The dataset's scenes with ``max_scenes`` = ``count`` (None: every scene), as the run would build them."""
    return entry.model_copy(update={"max_scenes": count}).load_preset().build_scenes()


def smallest_max_scenes(preset: Preset, entry: DatasetConfig, check: Check, settings: Any) -> int | None:
    """The smallest ``max_scenes`` above the dataset's at which ``check`` passes (None: not even every scene).

    A larger covering subsample holds every scene of a smaller one (the same seeded order), so the scenes a split
    can use only grow with ``max_scenes``: a bisection finds the smallest that works.
    """
    available = len(preset.k_object_scenes())
    low, high = int(entry.max_scenes or available), available
    if check(subsample(entry, None), settings) is not None:
        return None
    while high - low > 1:
        middle = (low + high) // 2
        if check(subsample(entry, middle), settings) is None:
            high = middle
        else:
            low = middle
    return high


def working_fractions(scenes: SceneSet, check: Check, settings: Any, fractions: Iterable[float]) -> list[float]:
    """The ``fractions`` that pass ``check`` on their own (for every seed of ``settings``)."""
    return [f for f in fractions if check(scenes, settings.model_copy(update={"fractions": (f,)})) is None]


def fix_for(preset: Preset, entry: DatasetConfig, name: str, settings: Any, scenes: SceneSet) -> str:
    """What to change so that analysis ``name`` can run on the dataset: the smallest ``max_scenes`` that works,
    the fractions that work, or switching it off."""
    check = CHECKS[name]
    fixes = []
    if entry.max_scenes is not None:
        least = smallest_max_scenes(preset, entry, check, settings)
        if least is not None:
            fixes.append(f"raise datasets.{entry.name}.max_scenes to at least {least} (or drop it)")
    if hasattr(settings, "fractions"):
        kept = working_fractions(scenes, check, settings, settings.fractions)
        grid = "" if kept else " (those of the default grid that work)"
        kept = kept or working_fractions(scenes, check, settings, DEFAULT_FRACTIONS)
        if kept:
            fixes.append(f"set analyses.{name}.fractions to [{', '.join(f'{f:g}' for f in kept)}]{grid}")
    fixes.append(f"switch {name} off (analyses: {{{name}: false}})")
    return ", or ".join(fixes)


def split_problems(config: RunConfig) -> list[str]:
    """Every (analysis, dataset) of the run whose splits cannot be made on the dataset's scenes, each as
    ``dataset D: A cannot run: <why>; <fix>``."""
    checked = [n for n in config.enabled_analyses() if n in CHECKS]
    problems = []
    for entry in config.datasets:
        if not config.models_for(entry.name) or not checked:
            continue
        preset = entry.load_preset()
        scenes = preset.build_scenes()
        for name in checked:
            settings = config.analysis_settings(name)
            why = CHECKS[name](scenes, settings)
            if why is not None:
                size = f"max_scenes {entry.max_scenes}" if entry.max_scenes else f"{len(scenes.full()):,} scenes"
                fix = fix_for(preset, entry, name, settings, scenes)
                problems.append(f"dataset {entry.name} ({size}): {name} cannot run: {why}; {fix}")
    return problems


def check_splits(config: RunConfig) -> None:
    """Refuse a run some of whose analyses cannot split its datasets' scenes (see the module doc), before it
    writes or embeds anything, in one line."""
    problems = split_problems(config)
    if problems:
        raise BindscopeError(" | ".join(problems))


def layer_problem(model: ModelConfig, modality: str, count: int) -> str | None:
    """Why the model's listed layers do not fit its ``modality`` tower of ``count`` layers, or None when they do."""
    if not isinstance(model.layers, tuple):
        return None
    outside = [layer for layer in model.layers if not -(count + 1) <= layer <= count]
    if not outside:
        return None
    return (
        f"model {model.label} ({short_repr(model.spec)}): layers {outside} are out of range: its {modality} tower has "
        f"{count} layers; list layers from 0 (the embedding layer) to {count} (the last block), or -1 (the last "
        f"block) to -{count + 1} counting back, or give layers: all"
    )


def check_layers(config: RunConfig) -> None:
    """Refuse a model whose listed layers it does not have, before the run writes anything, in one line: the
    layers are counted from the model's config where its backend can (``hf:``), else from the model loaded once."""
    from bindscope.embeddings.encoders import count_layers

    for model in config.models:
        if not isinstance(model.layers, tuple):
            continue
        counts = count_layers(model.spec, device=config.device)
        for modality in model.modalities:
            why = layer_problem(model, modality, counts[modality]) if modality in counts else None
            if why is not None:
                raise BindscopeError(why)
