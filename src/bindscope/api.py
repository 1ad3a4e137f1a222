"""The top-level Python API: the commands' work as functions, re-exported by ``import bindscope as bs``.

``bs.build_dataset`` -> ``bs.embed`` -> ``bs.analyze`` -> ``bs.load_result`` for one analysis, and ``bs.run`` ->
``bs.load_run`` for a whole run. Each calls what the matching command calls (``bindscope embed``, ``bindscope
probe`` and the other analyses' commands, ``bindscope run``), so a script and the command line give the same
folders and the same numbers. In library use nothing is printed: progress bars (bindscope's and the model
libraries') are off unless ``progress=True``, and a run's step lines go to the ``bindscope`` logger.

The heavy libraries (torch, transformers, pandas) are imported when a function needs them, not with this module.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bindscope.core.errors import BindscopeError, did_you_mean

if TYPE_CHECKING:
    import pandas as pd

    from bindscope.analyses.results import LoadedResult
    from bindscope.core.validation import Settings
    from bindscope.data.datasets import Dataset
    from bindscope.embeddings.encoders import Encoder, ModelSpec
    from bindscope.embeddings.store import EmbeddingSet
    from bindscope.pipeline.card import CardRow
    from bindscope.pipeline.config import RunConfig
    from bindscope.pipeline.steps import Skip

#: The logger of library use: a run's step lines (``bindscope run`` prints them) and what each function did.
log = logging.getLogger("bindscope")

#: The suffix of the ``+rand`` control's folder that :func:`embed` writes beside ``out`` with ``control=True``.
CONTROL_SUFFIX = "+rand"


# -- embeddings -----------------------------------------------------------------------------------------------------
def embed(
    dataset: str | Path | Dataset,
    model: str | ModelSpec | Encoder,
    *,
    out: str | Path,
    modality: str = "text",
    layer: int | None = None,
    control: bool = False,
    single_objects: bool = False,
    single_captions: str = "template",
    device: str = "cpu",
    dtype: str = "float32",
    batch_size: int | None = None,
    name: str | None = None,
    overwrite: bool = False,
    progress: bool = False,
    cache: bool = True,
) -> EmbeddingSet:
    """Embed a dataset's captions (or images) with a model into an embedding folder, as ``bindscope embed`` does.

    Resumable and content-addressed: asking again for the same embeddings in the same folder does nothing, and an
    interrupted call continues where it stopped.

    Parameters
    ----------
    dataset
        A dataset folder (:func:`bindscope.build_dataset`) or a loaded :class:`~bindscope.Dataset`.
    model
        A model spec: ``st:all-MiniLM-L6-v2``, ``hf:openai/clip-vit-base-patch32``, ``hf:/path/to/folder``,
        ``openclip:ViT-B-32/openai``, ``scratch:/path``; ``+rand`` for the same architecture with random weights
        (``bindscope models`` lists the backends). An encoder already loaded is used as it is.
    out
        The embedding folder to write (``embeddings.npy`` + ``manifest.json``).
    modality
        ``text`` (the captions, the default) or ``image`` (the rendered images).
    layer
        Pooled hidden state of this layer instead of the final embedding (0: the embedding layer, -1: the last).
    control
        Also embed the model's ``+rand`` control (same architecture, random weights) into ``<out>+rand`` beside
        ``out``: the analyses find it there and report every number beside it.
    single_objects
        Embed every object alone (the single-object bank ``intervene``, ``geometry`` and ``crossmodal`` use).
    single_captions
        Wording of a text single-object bank: ``template`` ("a red cube") or ``bare`` ("red cube").
    device
        Torch device: ``cpu``, ``cuda`` or ``cuda:N``.
    dtype
        Compute dtype: ``float32``, ``float16`` or ``bfloat16`` (the embeddings are float32 either way).
    batch_size
        Rows per forward pass (default 256 captions or 32 images).
    name
        A name for the embeddings (default: from the model spec).
    overwrite
        Replace a folder that holds other embeddings (default: refuse it).
    progress
        Show progress bars on stderr (the rows embedded, and the model library's own while it loads).
    cache
        Reuse (and add to) the shared embedding cache (``bindscope cache ls``); False embeds without it.

    Returns
    -------
    EmbeddingSet
        The embedding folder read back: ``.array`` (float32, one row per scene in the dataset's order) and
        ``.manifest`` (model, layer, dataset hash, provenance). With ``control``, the model's folder, not the
        control's.

    Examples
    --------
    >>> import bindscope as bs
    >>> emb = bs.embed("data/clevr", "st:all-MiniLM-L6-v2", out="emb/minilm", control=True)  # doctest: +SKIP
    >>> emb.array.shape  # doctest: +SKIP
    (576, 384)
    """
    from bindscope.embeddings.embed import embed_dataset

    options: dict[str, Any] = {
        "modality": modality,
        "layer": layer,
        "device": device,
        "dtype": dtype,
        "batch_size": batch_size,
        "single_objects": single_objects,
        "single_captions": single_captions,
        "overwrite": overwrite,
        "progress": progress,
        "cache": "active" if cache else None,
    }
    rand = control_spec(model) if control else None  # refused before anything is embedded
    done = embed_dataset(dataset, model, out=out, name=name, **options)
    log.info("embeddings %s: %s, %d rows computed", done.embeddings.root, done.status, done.rows_computed)
    if rand is not None:
        folder = control_folder(out)
        ctrl = embed_dataset(dataset, rand, out=folder, name=f"{done.embeddings.name}{CONTROL_SUFFIX}", **options)
        log.info("control %s: %s, %d rows computed", folder, ctrl.status, ctrl.rows_computed)
    return done.embeddings


def control_spec(model: str | ModelSpec | Encoder) -> str:
    """The spec of ``model``'s ``+rand`` control: its architecture with random weights."""
    from bindscope.embeddings.encoders import Encoder, parse_spec

    if isinstance(model, Encoder):
        raise BindscopeError(
            "control=True needs a model spec, not a loaded encoder (the control loads the same architecture with "
            "random weights); give the spec, or embed the control yourself with its spec and +rand"
        )
    spec = parse_spec(model)
    if spec.rand_seed is not None:
        raise BindscopeError(f"{spec} is a +rand control already; drop control=True, or drop +rand from the spec")
    return f"{spec}{CONTROL_SUFFIX}"


def control_folder(out: str | Path) -> Path:
    """Where :func:`embed` writes the ``+rand`` control of the embeddings in ``out``: ``<out>+rand``, beside it."""
    out = Path(out)
    return out.with_name(f"{out.name}{CONTROL_SUFFIX}")


# -- one analysis ---------------------------------------------------------------------------------------------------
def analyze(
    name: str,
    embeddings: str | Path,
    *,
    out: str | Path,
    settings: Settings | Mapping[str, Any] | None = None,
    dataset: str | Path | None = None,
    control: str | Path | None = None,
    probes: str | Path | None = None,
    singles: str | Path | None = None,
    other: str | Path | None = None,
    unimodal: Mapping[str, str | Path] | None = None,
    allow_different_models: bool = False,
    overwrite: bool = False,
    progress: bool = False,
    **options: Any,
) -> LoadedResult:
    """Run one registered analysis on an embedding folder into a result folder, as its command does.

    ``bs.analyze("probe", "emb/minilm", out="results/probe", seeds=[0])`` is ``bindscope probe emb/minilm --out
    results/probe --seeds 0``: the same inputs are read (a ``+rand`` sibling and a single-object bank beside the
    embeddings are found and used), the same settings are validated, and the folder holds the same numbers.

    Parameters
    ----------
    name
        A registered analysis: ``probe``, ``decompose``, ``complexity``, ``intervene``, ``crossmodal``, ``geometry``
        (``bindscope.analyses.list_analyses()``).
    embeddings
        The embedding folder (for ``crossmodal``: the image one, and ``other`` the text one).
    out
        The result folder to write; must be new or empty unless ``overwrite``.
    settings
        The analysis's settings: a mapping of its fields (a run config's ``analyses.NAME`` section), or its
        settings object (``bindscope.analyses.ProbeSettings`` ...). Default: its defaults.
    dataset
        The dataset folder, if not where the embedding manifest says.
    control
        The ``+rand`` control's folder (``--control``); default: a sibling folder of the same model with ``+rand``.
    probes
        Frozen probes (``--probes``): a probe folder or a ``probe`` result folder; default: fitted here.
    singles
        The single-object bank (``--singles``); default: a sibling folder of the same model holding one.
    other
        ``crossmodal``: the text embedding folder of the same model (its command's second folder).
    unimodal
        ``crossmodal``: ``probe`` result folders by modality (``{"image": ..., "text": ...}``), shown beside it.
    allow_different_models
        ``crossmodal``: compare embeddings of two different models.
    overwrite
        Replace a result folder that holds another result.
    progress
        Show a progress bar on stderr.
    **options
        Settings fields, over ``settings``: ``seeds=[0]``, ``optimizer="lbfgs"``, ``budget="cpu"``. An unknown
        name is refused with the closest one and the allowed ones.

    Returns
    -------
    LoadedResult
        The result folder read back (:func:`bindscope.analyses.results.load_result`): ``.summary``, ``.typed``
        (the analysis's typed numbers and verdicts), ``.table`` (every number as tidy rows) and ``.header``.

    Examples
    --------
    >>> import bindscope as bs
    >>> result = bs.analyze("probe", "emb/minilm", out="results/probe", seeds=[0])  # doctest: +SKIP
    >>> result.typed.test["object_acc"].mean  # doctest: +SKIP
    0.98
    """
    from bindscope.analyses.registry import get_analysis, load_inputs, run_analysis
    from bindscope.core.progress import progress_callback

    get_analysis(name)  # an unknown name first: the closest one and the registered ones
    chosen = analysis_settings_of(name, settings, options)
    inputs = load_inputs(
        name,
        embeddings,
        dataset=dataset,
        control=control,
        probes=probes,
        singles=singles,
        other=other,
        unimodal=unimodal,
        settings=chosen,
        allow_different_models=allow_different_models,
    )
    with progress_callback(name, "step", enabled=progress) as advance:
        result = run_analysis(name, inputs, out, chosen, overwrite=overwrite, progress=advance)
    log.info("%s: wrote %s", name, out)
    return result


def analysis_settings_of(name: str, settings: Settings | Mapping[str, Any] | None, options: Mapping[str, Any]) -> Any:
    """An analysis's settings from a settings object or mapping, with ``options`` over it: the validation a run
    config's section and the command's options go through (:func:`bindscope.pipeline.config.analysis_settings`)."""
    from bindscope.analyses.registry import get_analysis
    from bindscope.pipeline.config import analysis_settings

    kind = get_analysis(name).Settings
    if settings is None or isinstance(settings, Mapping):
        return analysis_settings(name, {**(settings or {}), **options})
    if type(settings) is not kind:  # (decompose's settings are a probe's and more: refused for a probe too)
        raise BindscopeError(
            f"{name} takes {kind.__name__} (or a mapping of its fields), got {type(settings).__name__}"
        )
    if not options:
        return settings
    checked = analysis_settings(name, dict(options))  # unknown keys and bad values, in the one message
    return settings.replace(**{k: getattr(checked, k) for k in options})


# -- a whole run ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """A run folder read back: what :func:`run` returns and :func:`load_run` reads.

    Attributes
    ----------
    path
        The run folder.
    manifest
        Its ``manifest.json``: status, versions, seeds, datasets, models, every step with its time.
    card
        The report card: one row per embedding folder (or model, for the cross-modal tests), each with its
        verdicts (``row.readings``: in words, the lines ``bindscope run`` prints).
    results
        Every result folder of the run, by ``dataset/label/analysis`` (``label``: ``<model>-<modality>``).
    """

    path: Path
    manifest: dict[str, Any]
    card: list[CardRow]
    results: dict[str, Path]

    @property
    def status(self) -> str:
        """``complete``, ``complete_with_skips`` or ``interrupted``."""
        return str(self.manifest.get("status"))

    @property
    def report(self) -> Path | None:
        """The HTML report (None where the run wrote none)."""
        path = self.path / "report.html"
        return path if path.is_file() else None

    @property
    def skipped(self) -> list[Skip]:
        """The analyses the run skipped, each with why and what to change."""
        from bindscope.pipeline.steps import skipped_steps

        return skipped_steps(self.manifest.get("steps") or [])

    def config(self) -> RunConfig:
        """The run's config, as it ran (its ``config.yaml``)."""
        from bindscope.pipeline.config import load_config

        return load_config(self.path / "config.yaml")

    def result(self, key: str) -> LoadedResult:
        """One result of the run by ``dataset/label/analysis`` (a key of :attr:`results`)."""
        if key not in self.results:
            hint = did_you_mean(key, self.results)
            raise BindscopeError(
                f"run {self.path} has no result {key!r}{hint}; it has {', '.join(self.results) or 'none'}"
            )
        from bindscope.analyses.results import load_result

        return load_result(self.results[key])

    def summaries(self) -> dict[str, dict[str, Any]]:
        """Every result's summary (``summary.json``), by ``dataset/label/analysis``."""
        return {key: self.result(key).summary for key in self.results}

    def readings(self) -> dict[str, list[str]]:
        """The card's verdicts in words, by ``dataset / label``: what ``bindscope run`` prints at its end."""
        return {f"{row.dataset} / {row.label}": row.readings for row in self.card}

    def card_table(self) -> pd.DataFrame:
        """The card as a long table: one row per (embedding folder, card column), with value, floors, verdict."""
        from bindscope.pipeline.card import card_table

        return card_table(self.card)

    def __repr__(self) -> str:
        report = f", report={str(self.report)!r}" if self.report else ""
        return f"Run({str(self.path)!r}, status={self.status!r}, {len(self.results)} results{report})"


def load_run(folder: str | Path) -> Run:
    """Read a run folder back (of :func:`run` or ``bindscope run``): manifest, report card, result folders.

    Raises
    ------
    BindscopeError
        For a folder that is not a run folder.
    """
    from bindscope.core.io import read_json
    from bindscope.pipeline.card import result_folders
    from bindscope.pipeline.report import run_card

    root = Path(folder)
    path = root / "manifest.json"
    if not path.is_file():
        raise BindscopeError(f"{root} is not a run folder (no manifest.json); give the out folder of a run")
    manifest = read_json(path, "run manifest")
    tag = manifest.get("format")
    if not isinstance(tag, dict) or tag.get("name") != "bindscope-run":
        raise BindscopeError(f"{path} is not a bindscope run manifest; give the out folder of a run")
    folders = {f"{d}/{label}/{a}": p for (d, label), group in result_folders(root).items() for a, p in group.items()}
    return Run(root, manifest, run_card(root), folders)


def run(
    config: RunConfig | Mapping[str, Any] | str | Path | None = None,
    *,
    out: str | Path,
    models: Sequence[str] | str | None = None,
    datasets: Sequence[str] | str | None = None,
    analyses: Sequence[str] | str | None = None,
    embeddings: Sequence[str | Path] | str | Path | None = None,
    quick: bool = False,
    name: str | None = None,
    modality: str | None = None,
    device: str | None = None,
    progress: bool = False,
    cache: bool = True,
    say: Callable[[str], None] | None = None,
) -> Run:
    """Datasets -> embeddings -> every analysis that applies -> the report, as ``bindscope run`` does.

    Give a run config, or models (the one-liner, ``bindscope run --model SPEC``), not both. Finished steps in
    ``out`` are reused, so calling it again on the same folder continues an interrupted run.

    Parameters
    ----------
    config
        A :class:`~bindscope.pipeline.config.RunConfig`, a mapping of one (as the YAML file holds), a YAML file, or a
        shipped config's name (``demo``, ``demo-quick``).
    out
        The run folder (resumed when it holds this run).
    models
        Instead of ``config``: model specs (``NAME=SPEC`` names one); the run embeds the presets that fit them
        (``datasets``), with each model's ``+rand`` control, and runs ``analyses`` (default: every one that applies).
    datasets
        With ``models``: the presets to embed (default: those that fit the models' modalities).
    analyses
        With ``models``: the analyses to run (default: every one that applies).
    embeddings
        With ``models``, or alone: embedding folders made elsewhere, analysed like a model's.
    quick
        With ``models``: a small first look (one seed, fewer scenes, the fast solvers, a short complexity sweep).
    name
        With ``models``: the run's name (default: from the models').
    modality
        With ``models``: embed only ``text`` or ``image`` with every model.
    device
        Torch device of every step, over the config's.
    progress
        Show a progress bar per step on stderr.
    cache
        Reuse (and add to) the shared embedding cache; False embeds every folder the run does not hold yet.
    say
        Where each step's line goes (e.g. ``print``); default: the ``bindscope`` logger, at level INFO.

    Returns
    -------
    Run
        The run folder read back (:func:`load_run`): ``.status``, ``.card`` and ``.readings()``, ``.results``,
        ``.report``.
    """
    from bindscope.core.progress import progress_callback
    from bindscope.pipeline.run import run_pipeline

    chosen = run_config(
        config, models, datasets, analyses, embeddings, quick=quick, name=name, modality=modality, device=device
    )

    def bars(step: str) -> Any:
        return progress_callback(step, "step", enabled=True)

    from bindscope.embeddings.cache import cache_off

    with cache_off(not cache):
        run_pipeline(chosen, out, say=say or log.info, progress=bars if progress else None)
    return load_run(out)


def run_config(
    config: RunConfig | Mapping[str, Any] | str | Path | None,
    models: Sequence[str] | str | None = None,
    datasets: Sequence[str] | str | None = None,
    analyses: Sequence[str] | str | None = None,
    embeddings: Sequence[str | Path] | str | Path | None = None,
    *,
    quick: bool = False,
    name: str | None = None,
    modality: str | None = None,
    device: str | None = None,
) -> RunConfig:
    """The run config :func:`run` runs: ``config`` read and validated, or the one-liner's config of ``models``."""
    from bindscope.pipeline.config import RunConfig, load_config, parse_config

    listed = {k: as_list(v) for k, v in {"models": models, "datasets": datasets, "analyses": analyses}.items()}
    folders = [str(p) for p in as_list(embeddings) or []]
    if config is None:
        if not listed["models"] and not folders:
            raise BindscopeError(
                "give a run config (a RunConfig, a mapping, a YAML file or a shipped config's name: demo, demo-quick) "
                "or models=[SPEC, ...]"
            )
        from bindscope.pipeline.oneline import one_line_config

        return one_line_config(
            listed["models"] or (),
            listed["datasets"],
            listed["analyses"],
            folders,
            quick=quick,
            name=name,
            device=device,
            modality=modality,
        )
    one_line = {**listed, "embeddings": folders, "quick": quick, "name": name, "modality": modality}
    given = [k for k, v in one_line.items() if v]
    if given:
        raise BindscopeError(
            f"give a run config or models=[...], not both: {', '.join(f'{k}=' for k in given)} "
            "belong to the models' run; with a config, write them into it"
        )
    if isinstance(config, RunConfig):
        return config if device is None else parse_config({**config.model_dump(mode="json"), "device": device})
    if isinstance(config, Mapping):
        data = dict(config) if device is None else {**config, "device": device}
        return parse_config(data, origin="run config (the mapping given)")
    if isinstance(config, (str, Path)):
        return load_config(config, device=device)
    raise BindscopeError(
        f"config must be a RunConfig, a mapping, a YAML file or a shipped config's name, got {type(config).__name__}"
    )


def as_list(value: Any) -> list[Any] | None:
    """One value or several as a list (a string is one value, not its characters); None stays None."""
    if value is None:
        return None
    return [value] if isinstance(value, (str, Path)) else list(value)


__all__ = ["Run", "analyze", "embed", "load_run", "run"]
