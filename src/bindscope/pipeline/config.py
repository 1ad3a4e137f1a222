"""The run config of ``bindscope run``: datasets x models x modalities x layers, the analyses, the report.

A config is YAML (or a mapping) validated here; unknown keys are errors naming the allowed ones,
and each analysis's settings are validated by that analysis's own settings class, so the CLI, the
Python API and the YAML refuse the same runs the same way. Everything that can be checked before a
run writes anything is checked here, loading no model: every name that becomes a folder follows
:func:`bindscope.core.validation.check_name`, model specs parse (local folders exist, the backend's
libraries are installed), each model's modalities are offered by its datasets' presets and its
backend, presets load and a ``max_scenes`` subsample keeps every object in every slot.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator

from bindscope.analyses import get_analysis, list_analyses
from bindscope.core.devices import check_device
from bindscope.core.errors import BindscopeError, did_you_mean
from bindscope.core.io import read_yaml
from bindscope.core.validation import (
    MAX_BATCH,
    NAME_RULE,
    Schema,
    Seed,
    Seeds,
    Settings,
    check_name,
    format_error,
    short_repr,
)
from bindscope.data.presets import Preset, load_preset, preset_from_dict, with_image_settings
from bindscope.embeddings.encoders import BACKENDS, embeds_images, parse_spec
from bindscope.space.splits import DEFAULT_SEEDS

Modality = Literal["image", "text"]
SHIPPED = Path(__file__).parent / "configs"
#: The analyses a run holds by default, in the order they run (any other registered analysis may be named too).
RUN_ANALYSES = ("probe", "decompose", "intervene", "complexity", "crossmodal", "geometry")
#: The most datasets, models and scratch models one run holds: far beyond a study's (the paper's runs hold 1 to 3
#: datasets and 2 to 6 models), small enough that a generated or hostile config is refused at once.
MAX_ENTRIES = {"datasets": 100, "models": 100, "scratch": 100, "embeddings": 100}
#: A settings error's own prefix (``invalid ProbeSettings: ``), replaced by where the settings came from.
SETTINGS_PREFIX = re.compile(r"^invalid \w+: ")


def checked(check: Any, *args: Any) -> Any:
    """``check(*args)``, its :class:`BindscopeError` as the ``ValueError`` a pydantic validator raises."""
    try:
        return check(*args)
    except BindscopeError as exc:
        raise ValueError(str(exc)) from None


class DatasetConfig(Schema):
    """One dataset of the run: a built-in preset or a YAML file, optionally a seeded subsample of its scenes
    that keeps every object in every slot (``max_scenes`` of its K-object scenes; the single-object scenes a
    preset adds all stay)."""

    name: str = Field(description="The dataset's folder name under `datasets/` and its name in results and the report.")
    preset: str = Field(
        description="A built-in preset (`bindscope presets`) or a preset YAML file (relative to the run config)."
    )
    images: bool = Field(
        False, description="Render the images even when no model of the run embeds them (an image model renders them)."
    )
    max_scenes: int | None = Field(
        None,
        ge=2,
        description="A seeded subsample of this many K-object scenes keeping every object in every slot (at least 2); "
        "default: every scene.",
    )
    subsample_seed: Seed = Field(0, description="Seed of the `max_scenes` subsample.")
    image_size: str | None = Field(
        None,
        description="Render the images at this size instead of the preset's: `SIZE` or `WIDTHxHEIGHT` (e.g. `64`); "
        "a preset with a renderer only.",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v, "dataset name")

    @model_validator(mode="after")
    def _preset(self) -> DatasetConfig:
        """The preset and its subsample are valid before anything is written (a subsample's scenes are drawn to
        know it keeps every object in every slot: under a second for the largest preset)."""
        preset = checked(self.load_preset)
        if self.max_scenes is not None:
            try:
                preset.build_scenes()
            except BindscopeError as exc:
                raise ValueError(f"dataset {self.name}: {exc}") from None
        return self

    def load_preset(self) -> Preset:
        """The dataset's preset, with its covering subsample when ``max_scenes`` is set (its scenes are not built)."""
        preset = load_preset(self.preset)
        if self.image_size is not None:
            if preset.config.renderer in (None, "import"):
                raise BindscopeError(
                    f"dataset {self.name}: preset {self.preset} draws no images, so image_size does not apply; drop it"
                )
            preset = with_image_settings(preset, size=self.image_size)
        if self.max_scenes is None:
            return preset
        data = preset.to_dict()
        data["scenes"] = {**data["scenes"], "max_scenes": self.max_scenes, "subsample_seed": self.subsample_seed}
        return replace(preset_from_dict(data, origin=f"dataset {self.name}"), source=preset.source)


class ModelConfig(Schema):
    """One model of the run: its spec, the modalities and layers embedded, the ``+rand`` control and the
    single-object bank, and the datasets it embeds (default all)."""

    spec: str = Field(
        min_length=1,
        description="The model spec, as `bindscope embed --model` takes it: `st:all-MiniLM-L6-v2`, `hf:<id or path>`, "
        "`openclip:<arch>/<pretrained>`, `+rand` for random weights (`bindscope models` lists examples).",
    )
    name: str | None = Field(
        None, description="The model's folder name in `embeddings/` and `results/` (default: the spec's last part)."
    )
    modalities: tuple[Modality, ...] = Field(
        ("text",), description="What it embeds: `text`, `image` or both (each offered by its datasets and backend)."
    )
    layers: tuple[int, ...] | Literal["all"] | None = Field(
        None,
        description="Layers embedded beside the final embedding (which is always kept): unset for the final "
        "embedding only, a list of layers (0 = embedding layer, -1 = last block), or `all`.",
    )
    control: bool = Field(
        True, description="Also embed with random weights (`+rand`), the control every number is read against."
    )
    single_objects: bool = Field(
        True, description="Also embed every object alone (the `-single` bank of interventions, geometry, half-truths)."
    )
    datasets: tuple[str, ...] | None = Field(
        None, description="Names of the run's datasets this model embeds (default: all of them)."
    )
    batch_size: int | None = Field(
        None, ge=1, le=MAX_BATCH, description="Rows per forward pass (default: 32 images, 256 texts)."
    )
    dtype: Literal["float32", "float16", "bfloat16"] = Field(
        "float32", description="Compute dtype: `float32`, `float16` or `bfloat16` (embeddings are stored as float32)."
    )

    @field_validator("spec")
    @classmethod
    def _spec(cls, v: str) -> str:
        checked(parse_spec, v)  # a malformed spec, an unknown backend or a missing local folder: refused here
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        return None if v is None else check_name(v, "model name")

    @field_validator("modalities")
    @classmethod
    def _modalities(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or len(set(v)) != len(v):
            raise ValueError(f"give each modality once, at least one, got {list(v)}")
        return v

    @field_validator("datasets")
    @classmethod
    def _datasets(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("datasets: [] embeds nothing; name at least one dataset, or leave datasets out for all")
        repeated = [d for d, n in collections.Counter(v).items() if n > 1]
        if repeated:
            raise ValueError(f"dataset {short_repr(repeated[0])} is listed more than once; give each dataset once")
        return v

    @field_validator("layers")
    @classmethod
    def _layers(cls, v: Any) -> Any:
        if isinstance(v, tuple) and (not v or len(set(v)) != len(v)):
            raise ValueError(f"give each layer once, at least one (or all), got {list(v)}")
        return v

    @model_validator(mode="after")
    def _folder_and_modalities(self) -> ModelConfig:
        if self.name is None:
            try:
                check_name(self.label, "model folder name")
            except ValueError:
                raise ValueError(
                    f"model {short_repr(self.spec)} gives no usable folder name ({short_repr(self.label)}); "
                    f"give it one with name: ({NAME_RULE})"
                ) from None
        backend = BACKENDS[parse_spec(self.spec).backend]
        if "image" in self.modalities and not embeds_images(self.spec):
            what = "token-level scratch models" if backend.name == "scratch" else f"{backend.name} models"
            raise ValueError(
                f"model {self.label} ({short_repr(self.spec)}): {what} embed text only; drop image from its modalities"
            )
        missing = backend.missing()  # found without importing them
        if missing:
            raise ValueError(
                f"model {self.label} ({short_repr(self.spec)}) needs {', '.join(missing)}, which is not installed; "
                f"pip install {' '.join(missing)}"
            )
        return self

    @property
    def label(self) -> str:
        """The model's folder name: ``name``, else the last part of the spec."""
        if self.name:
            return self.name
        tail = re.split(r"[:/]", self.spec.rstrip("/"))[-1]
        return re.sub(r"[^A-Za-z0-9_.+-]", "_", tail) or "model"


class ScratchEntry(Schema):
    """A controlled model trained from scratch (§9) in the run: its training config (built-in or YAML) with
    overrides, then its export (every ordered object pair embedded, with the ``+rand`` control) analysed
    like any embedding folder."""

    name: str = Field(
        description="The model's folder name under `scratch/`; its results go under `results/scratch-<name>/`."
    )
    config: str = Field(
        "cpu-small",
        description="The training config: built-in `cpu-small` or `paper`, or a scratch-config YAML file "
        "(relative to the run config).",
    )
    fraction: float | None = Field(
        None, gt=0, le=1, description="Share of the objects trained on (default: the training config's)."
    )
    seed: Seed | None = Field(
        None, description="Seed of the object split and the training (default: the training config's)."
    )
    steps: int | None = Field(None, ge=1, description="Training steps (default: the training config's).")
    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="Any other field of the training config (`d_model`, `lr` ...), replacing the config's value.",
    )
    control: bool = Field(True, description="Also export the random-weight (`+rand`) control of the trained model.")
    dataset: str | None = Field(
        None,
        description="An image-text config's dataset: the name of a dataset of the run with images and captions "
        "(rendered for it); the model is trained on it, then embeds its images and captions like any model.",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v, "scratch model name")

    def image_text(self) -> bool:
        """Whether the training config is an image-text one (a CLIP in miniature)."""
        from bindscope.scratch.config import image_text

        return image_text(self.config)

    def training_config(self, dataset: str | None = None) -> Any:
        """The validated training config (:class:`bindscope.scratch.config.ScratchConfig`, or
        :class:`~bindscope.embeddings.encoders.scratch.clip_config.ClipConfig` trained on the folder ``dataset``)."""
        from bindscope.scratch.config import load_config as load_scratch_config

        given = {"fraction": self.fraction, "seed": self.seed, "steps": self.steps, "dataset": dataset}
        overrides = {**self.overrides, **{k: v for k, v in given.items() if v is not None}}
        return load_scratch_config(self.config, **overrides)


class EmbeddingsEntry(Schema):
    """An embedding folder made elsewhere (``bindscope embeddings import``, ``bindscope embed``), analysed in the
    run like a model's: a model no backend loads (a custom architecture, an embedding API, arrays computed
    elsewhere) gets the whole report. Its ``+rand`` control and single-object bank are the folders given here,
    else the siblings the analyses find; an image and a text folder with the same ``name`` are one model's two
    modalities, and get the cross-modal tests."""

    path: str = Field(description="An embedding folder of scenes (relative to the run config).")
    name: str | None = Field(
        None, description="The model's folder name in `results/` (default: the name its manifest records)."
    )
    dataset: str | None = Field(
        None,
        description="A dataset of the run these embeddings are of (its scenes must be the ones they were made "
        "from); default: the dataset folder their manifest records, analysed under its folder name.",
    )
    control: str | None = Field(
        None,
        description="Its `+rand` control folder (default: a sibling folder of the same model spec with `+rand`, "
        "when the import recorded a model spec).",
    )
    singles: str | None = Field(
        None,
        description="Its single-object bank (default: the sibling `embeddings import --singles` wrote, if any).",
    )

    @model_validator(mode="after")
    def _folders(self) -> EmbeddingsEntry:
        """The folders hold embeddings of one dataset and modality, and name a usable folder name."""
        manifest = checked(embedding_manifest, self.path, "scenes")
        self._manifest = manifest
        if self.name is not None:
            check_name(self.name, "embeddings name")
        elif not re.fullmatch(r"[A-Za-z0-9_.+-]+", self.label):
            raise ValueError(
                f"embeddings {self.path}: their name {short_repr(self.label)} is no usable folder name; give one "
                f"with name: ({NAME_RULE})"
            )
        for key, rows in (("control", "scenes"), ("singles", "single_objects")):
            folder = getattr(self, key)
            if folder is None:
                continue
            other = checked(embedding_manifest, folder, rows)
            for field in ("dataset_hash", "modality"):
                if other.get(field) != manifest.get(field):
                    raise ValueError(
                        f"embeddings {self.path}: its {key} folder {folder} holds embeddings of another "
                        f"{field.replace('_hash', '')} ({other.get(field)!s:.12} vs {manifest.get(field)!s:.12}); "
                        f"give the {key} of the same dataset and modality"
                    )
        return self

    _manifest: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def manifest(self) -> dict[str, Any]:
        """The embedding folder's manifest (read once, when the entry was validated)."""
        return self._manifest

    @property
    def label(self) -> str:
        """The model's folder name: ``name``, else the name the manifest records."""
        return self.name or re.sub(r"[^A-Za-z0-9_.+-]", "_", str(self.manifest.get("name") or Path(self.path).name))

    @property
    def modality(self) -> Modality:
        """The modality the folder embeds (its manifest's, checked to be image or text when it was read)."""
        return "image" if self.manifest.get("modality") == "image" else "text"

    @property
    def dataset_folder(self) -> Path:
        """The dataset folder the manifest records."""
        return Path(str(self.manifest.get("dataset_path") or ""))

    @property
    def dataset_name(self) -> str:
        """The dataset of the run the embeddings are analysed under: ``dataset``, else the recorded folder's name."""
        return self.dataset or self.dataset_folder.name


def embedding_manifest(path: str | Path, rows: str) -> dict[str, Any]:
    """The manifest of an embedding folder holding ``rows`` (its array's shape checked, not its values)."""
    from bindscope.embeddings.store import load_embeddings

    if not Path(path).is_dir():
        raise BindscopeError(
            f"embeddings {path} is not a folder; give a folder written by `bindscope embeddings import` or "
            "`bindscope embed`"
        )
    return load_embeddings(path, mmap=True, rows=rows).manifest


def clashing(names: list[str]) -> list[str]:
    """The names that equal another ignoring case (one folder on a case-insensitive disk: macOS, Windows)."""
    folded = collections.Counter(n.casefold() for n in names)
    return [n for n in names if folded[n.casefold()] > 1]


def check_distinct(names: list[str], what: str) -> None:
    """Refuse ``what`` names (each a folder of the run) that repeat, or differ only in case."""
    same = clashing(names)
    if not same:
        return
    if len(set(same)) == 1:
        raise ValueError(f"{what} names repeat: {same}; give each {what} a distinct name")
    raise ValueError(
        f"{what} names {same} differ only in case: they would share one folder on a case-insensitive disk (macOS, "
        f"Windows); give each {what} a name that differs in more than case"
    )


def all_analyses() -> dict[str, dict[str, Any] | bool]:
    """Every analysis of a run, with its default settings."""
    return dict.fromkeys(RUN_ANALYSES, True)


def run_order() -> list[str]:
    """The analyses a run config may name, in the order they run: the shipped ones, then any other registered."""
    return [*RUN_ANALYSES, *(n for n in list_analyses() if n not in RUN_ANALYSES)]


def analysis_settings(name: str, data: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> Settings:
    """An analysis's settings from a mapping: a run config's ``analyses.<name>`` section, or the options,
    ``--set`` and ``--settings`` of its command (one path for both).

    Parameters
    ----------
    name
        A registered analysis.
    data
        Values of its settings fields; complexity's ``budget`` may be a budget's name or a mapping of a name and
        overrides (:func:`named_budget`).
    defaults
        Values for the fields ``data`` does not give, where the settings have them (a run's seeds and device).

    Raises
    ------
    BindscopeError
        For an unknown key (naming the allowed ones) or a bad value (the settings class's one line).
    """
    analysis = get_analysis(name)
    fields = analysis.Settings.model_fields
    unknown = sorted(set(data) - set(fields))
    if unknown:
        hints = "".join(did_you_mean(k, fields) for k in unknown)
        raise BindscopeError(f"unknown keys {unknown}{hints}; allowed: {', '.join(sorted(fields))}")
    values = {**{k: v for k, v in (defaults or {}).items() if k in fields}, **data}
    if name == "complexity":  # a budget by name (auto: full on CUDA, cpu otherwise), with overrides
        values["budget"] = named_budget(values.get("budget", "auto"), values.get("device", "cpu"))
    return analysis.Settings(**values)


def run_settings(name: str, given: Any, defaults: Mapping[str, Any]) -> Settings:
    """The settings of analysis ``name`` in a run config (``given``: its section, a mapping or a bool), the
    run's ``defaults`` where it has them; a bad one is a ValueError ``analyses.NAME: ...``."""
    try:
        return analysis_settings(name, dict(given) if isinstance(given, dict) else {}, defaults)
    except BindscopeError as exc:
        raise ValueError(f"analyses.{name}: {SETTINGS_PREFIX.sub('', str(exc))}") from None


class RunConfig(Schema):
    """Everything a run does (the schema of ``bindscope run CONFIG.yaml``)."""

    name: str = Field(description="The run's name (letters, digits, `_`, `-`, `+` and `.`).")
    description: str = Field("", description="A free-text note on the run, kept in its `config.yaml`.")
    device: str = Field(
        "cpu", description="Torch device of every step: `cpu`, `cuda` or `cuda:N` (`bindscope run --device` wins)."
    )
    seeds: Seeds = Field(
        DEFAULT_SEEDS, description="Seed ids of every analysis, unless its own settings give `seeds` (default 0, 1, 2)."
    )
    datasets: tuple[DatasetConfig, ...] = Field((), description="The datasets to build and embed.")
    models: tuple[ModelConfig, ...] = Field((), description="The models that embed the datasets (needs `datasets`).")
    scratch: tuple[ScratchEntry, ...] = Field(
        (), description="Controlled models to train from scratch, export and analyse like the others."
    )
    embeddings: tuple[EmbeddingsEntry, ...] = Field(
        (),
        description="Embedding folders made elsewhere (`bindscope embeddings import`), analysed like a model's.",
    )
    analyses: dict[str, dict[str, Any] | bool] = Field(
        default_factory=lambda: all_analyses(),
        validate_default=True,  # every analysis's settings are valid before anything runs, the defaults' too
        description="Analysis name -> `true` (its defaults), `false` or a mapping of its settings; only those named "
        "run (default: all six).",
    )
    report: bool = Field(True, description="Write `report.html` at the end of the run.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v, "run name")

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        """Refuse more entries than :data:`MAX_ENTRIES` allows before any entry is validated (each loads a preset,
        a model folder or a training config)."""
        for key, limit in MAX_ENTRIES.items():
            entries = data.get(key) if isinstance(data, dict) else None
            if isinstance(entries, (list, tuple)) and len(entries) > limit:
                what = "scratch models" if key == "scratch" else key
                raise ValueError(
                    f"{key}: the number of {what} must be at most {limit}, got {len(entries)}; split them across runs"
                )
        return data

    @field_validator("analyses")
    @classmethod
    def _analyses(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        unknown = sorted(set(v) - set(run_order()))
        if unknown:
            hints = "".join(did_you_mean(str(k), run_order()) for k in unknown)
            raise ValueError(f"analyses: unknown analyses {unknown}{hints}; a run holds {', '.join(run_order())}")
        problems = []  # each analysis's settings now, beside the other fields' errors (one pass over the file)
        defaults: dict[str, Any] = {k: info.data[k] for k in ("seeds", "device") if k in info.data}
        for name, given in v.items():
            try:
                run_settings(name, given, defaults)
            except ValueError as exc:
                problems.append(str(exc))
        if problems:
            raise ValueError("; ".join(problems))
        return v

    def _trains_on(self, entry: ScratchEntry, names: list[str]) -> None:
        """An image-text scratch model names a dataset of the run with images and captions; a token-level one none."""
        if not entry.image_text():
            if entry.dataset is not None:
                raise ValueError(
                    f"scratch model {entry.name}: config {entry.config} is token-level and trains on its own concept "
                    "space; drop `dataset` (only image-text configs such as clip-tiny train on a dataset)"
                )
            return
        if entry.dataset not in names:
            raise ValueError(
                f"scratch model {entry.name}: image-text config {entry.config} trains on a dataset of the run; set "
                f"`dataset` to one of {', '.join(names) or '(none: add a dataset with images, e.g. preset clevr2d)'}"
            )
        preset = next(d for d in self.datasets if d.name == entry.dataset).load_preset()
        if not {"image", "text"} <= set(preset.config.modalities) or preset.config.renderer is None:
            raise ValueError(
                f"scratch model {entry.name}: dataset {entry.dataset} has no rendered images and captions; give it a "
                "preset with a renderer (clevr2d, clevr)"
            )

    def trains_images(self, dataset: str) -> bool:
        """Whether an image-text scratch model trains on ``dataset`` (so its images must be rendered)."""
        return any(e.dataset == dataset and e.image_text() for e in self.scratch)

    @model_validator(mode="after")
    def _references(self) -> RunConfig:
        if self.models and not self.datasets:
            raise ValueError("the models have no dataset to embed; add datasets")
        if not self.scratch and not self.embeddings and not (self.datasets and self.models):
            raise ValueError(
                "give datasets and models to embed them with, scratch models, or embedding folders (embeddings:)"
            )
        names = [d.name for d in self.datasets]
        check_distinct(names, "dataset")
        scratch = [f"scratch-{e.name}" for e in self.scratch]
        if clashing(scratch) or {n.casefold() for n in scratch} & {n.casefold() for n in names}:
            raise ValueError(
                "scratch model names repeat or clash with dataset names (ignoring case): "
                f"{[e.name for e in self.scratch]}; give each a distinct name (its results go under "
                "results/scratch-<name>/)"
            )
        for entry in self.scratch:
            try:
                entry.training_config()
            except BindscopeError as exc:
                raise ValueError(f"scratch model {entry.name}: {exc}") from None
            self._trains_on(entry, names)
        # an image-text scratch model embeds its dataset into the same folders as a model of its name would
        check_distinct([m.label for m in self.models] + [e.name for e in self.scratch if e.image_text()], "model")
        for m in self.models:
            missing = sorted(set(m.datasets or ()) - set(names))
            if missing:
                raise ValueError(f"model {m.label} names datasets {missing}; the run has {', '.join(names)}")
        for d in self.datasets:
            self._offers(d, d.load_preset())
        self._imported(names)
        checked(check_device, self.device)
        return self

    def _imported(self, names: list[str]) -> None:
        """Each embedding folder names a dataset of the run (or its recorded one exists), and each (dataset, name,
        modality, layer) is one folder, apart from the run's models."""
        models = {m.label.casefold() for m in self.models} | {e.name.casefold() for e in self.scratch if e.image_text()}
        seen: dict[tuple[str, str, str, Any], str] = {}
        for entry in self.embeddings:
            if entry.dataset is not None and entry.dataset not in names:
                raise ValueError(
                    f"embeddings {entry.path} name dataset {entry.dataset}; the run has {', '.join(names) or 'none'}"
                )
            if entry.dataset is None and not (entry.dataset_folder / "manifest.json").is_file():
                raise ValueError(
                    f"embeddings {entry.path}: their dataset is not at {entry.dataset_folder} any more; set dataset: "
                    "to a dataset of the run built from the same preset"
                )
            if entry.label.casefold() in models:
                raise ValueError(
                    f"embeddings {entry.path} are named {entry.label}, like a model of the run; give them another "
                    "name (name: ...)"
                )
            key = (entry.dataset_name, entry.label.casefold(), entry.modality, entry.manifest.get("layer"))
            if key in seen:
                raise ValueError(
                    f"embeddings {entry.path} and {seen[key]} are both {entry.label}'s {entry.modality} embeddings of "
                    f"{key[0]}; give them distinct names (name: ...)"
                )
            seen[key] = entry.path

    def _offers(self, dataset: DatasetConfig, preset: Preset) -> None:
        """Refuse a model of the run that embeds a modality ``dataset`` lacks."""
        offered = list(preset.config.modalities)
        for m in self.models_for(dataset.name):
            lacking = [x for x in m.modalities if x not in offered]
            if lacking:
                raise ValueError(
                    f"model {m.label} embeds {' and '.join(lacking)}, which dataset {dataset.name} (preset "
                    f"{preset.name}) lacks (it has {' and '.join(offered)}); drop {' and '.join(lacking)} from the "
                    "model's modalities or limit the model to datasets that have it (datasets: [...])"
                )

    def enabled_analyses(self) -> list[str]:
        """The analyses switched on, in run order."""
        return [n for n in run_order() if self.analyses.get(n, False) is not False]

    def analysis_settings(self, name: str) -> Settings:
        """The settings of one analysis: the run's seeds and device where it has them, then its overrides."""
        return run_settings(name, self.analyses.get(name), {"seeds": self.seeds, "device": self.device})

    def to_yaml(self) -> str:
        """The config as the YAML ``bindscope run`` reads back, every default filled in (a run's ``config.yaml``)."""
        import yaml

        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)

    def models_for(self, dataset: str) -> list[ModelConfig]:
        """The models that embed ``dataset``."""
        return [m for m in self.models if m.datasets is None or dataset in m.datasets]


def allowed_keys(schema: type[BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    """The keys allowed at ``loc`` (the parent of an unknown key) of ``schema``, when it is a model."""
    model: Any = schema
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
            return None
        model = inner_model(model.model_fields[part].annotation)
    return sorted(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else None


def inner_model(annotation: Any) -> Any:
    """The model inside ``tuple[M, ...]``, ``list[M]`` or ``M | None``, else the annotation."""
    for arg in getattr(annotation, "__args__", ()) or ():
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return annotation


def named_budget(budget: Any, device: str) -> Any:
    """``budget: paper`` or ``budget: {name: cpu, epochs: 500}`` as a complexity :class:`Budget`."""
    from bindscope.analyses.complexity import resolve_budget

    if isinstance(budget, str):
        return resolve_budget(budget, device)
    if isinstance(budget, dict):
        rest = dict(budget)
        return resolve_budget(str(rest.pop("name", "auto")), device, **rest)
    return budget


def parse_config(data: Any, origin: str = "run config") -> RunConfig:
    """Validate a mapping into a :class:`RunConfig`; errors are one line naming ``origin``, and an unknown key
    lists the allowed ones."""
    if not isinstance(data, dict):
        raise BindscopeError(f"{origin} must be a mapping of settings, got {type(data).__name__}")
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        message = "; ".join(_config_error(err) for err in exc.errors())  # every error at once, not one pass each
        raise BindscopeError(f"invalid {origin}: {message}") from None


def _config_error(err: Any) -> str:
    """One validation error of a run config; an unknown key names the closest allowed one and all of them."""
    if tuple(err["loc"]) == ("analyses",):  # its messages name the analysis: analyses.probe: ...
        return str(err["msg"]).removeprefix("Value error, ")
    if err["type"] != "extra_forbidden":
        return format_error(err)
    loc = ".".join(str(p) for p in err["loc"])
    allowed = allowed_keys(RunConfig, tuple(err["loc"][:-1]))
    hint = did_you_mean(str(err["loc"][-1]), allowed) if allowed else ""
    return f"{loc}: unknown key{hint}" + (f"; allowed: {', '.join(allowed)}" if allowed else "")


def relative_to(entries: Any, key: str, folder: Path, *, any_path: bool = False) -> None:
    """Resolve each entry's relative YAML path (``any_path``: any path) under ``key`` against ``folder`` (the run
    config's), in place."""
    for entry in entries if isinstance(entries, list) else []:
        value = entry.get(key) if isinstance(entry, dict) else None
        if not isinstance(value, str) or not (any_path or value.endswith((".yaml", ".yml"))):
            continue
        if not Path(value).is_absolute():
            entry[key] = str((folder / value).resolve())


def shipped_configs() -> list[str]:
    """The names of the run configs shipped inside the package (``demo``, ``demo-quick``)."""
    return sorted(p.stem for p in SHIPPED.glob("*.yaml"))


def config_path(name_or_path: str | Path) -> Path:
    """A run config file: a YAML path, or the name of a shipped config."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    if str(name_or_path) in shipped_configs():
        return SHIPPED / f"{name_or_path}.yaml"
    raise BindscopeError(
        f"run config {path} does not exist; give a YAML file or a shipped config ({', '.join(shipped_configs())}); "
        "`bindscope demo --print-config` prints the demo's to start from"
    )


def load_config(name_or_path: str | Path, **overrides: Any) -> RunConfig:
    """Read a run config from a YAML file (or a shipped one by name); a relative ``preset`` or scratch
    ``config`` file is resolved against the file's folder. ``overrides`` (None values ignored) replace
    top-level keys, e.g. ``device="cpu"``."""
    path = config_path(name_or_path)
    data = read_yaml(path, "run config")
    if data is None:
        raise BindscopeError(f"run config {path} is empty; `bindscope demo --print-config` prints an example")
    if isinstance(data, dict):
        relative_to(data.get("datasets"), "preset", path.parent)
        relative_to(data.get("scratch"), "config", path.parent)
        for key in ("path", "control", "singles"):
            relative_to(data.get("embeddings"), key, path.parent, any_path=True)
        data.update({k: v for k, v in overrides.items() if v is not None})
    return parse_config(data, origin=f"run config {path}")


__all__ = [
    "RUN_ANALYSES",
    "analysis_settings",
    "DatasetConfig",
    "EmbeddingsEntry",
    "ModelConfig",
    "RunConfig",
    "ScratchEntry",
    "load_config",
    "parse_config",
    "shipped_configs",
]
