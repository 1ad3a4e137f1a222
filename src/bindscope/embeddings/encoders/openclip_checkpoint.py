"""open_clip training checkpoints turned into model folders that ``openclip:local-dir:`` loads.

open_clip's trainer (``open_clip_train``, formerly ``training/main.py``) saves
``logs/<run>/checkpoints/epoch_N.pt`` (and ``epoch_latest.pt``): a torch file holding ``epoch``, ``name``,
``state_dict``, ``optimizer`` and maybe ``scaler``; the state dict's keys start with ``module.`` when the run
used DistributedDataParallel. The architecture is not in the file: it is the ``--model`` the run started with
(with its ``--force-*`` and ``--image-*`` options), which the trainer records in ``logs/<run>/params.txt``.

:func:`convert_checkpoint` (``bindscope models convert``) reads such a file with ``torch.load(weights_only=True)``,
strips the prefix, checks the weights against the architecture and writes the folder that open_clip's
``push_to_hf_hub`` writes, plus where it came from::

    FOLDER/open_clip_config.json         {"model_cfg": ..., "preprocess_cfg": ...}
    FOLDER/open_clip_model.safetensors   the weights
    FOLDER/converted_from.json           the checkpoint's path, sha256, epoch and run; the architecture
    FOLDER/tokenizer files               only when the text tower names a Hugging Face tokenizer

The architecture is ``--arch NAME`` (an open_clip built-in, ``NAME/TAG`` for a pretrained tag's preprocessing)
or ``--config FILE`` (a model config, or a whole ``open_clip_config.json``); without either, the ``model`` of the
run's ``params.txt``. When that ``params.txt`` belongs to the checkpoint's run, its forced settings (QuickGELU,
custom text tower, image size, image mean, std, interpolation and resize mode) are applied too, as the trainer
applied them.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import json
import logging
import re
import warnings
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bindscope.core.errors import BindscopeError, did_you_mean
from bindscope.core.io import (
    check_output_dir,
    file_sha256,
    read_json,
    read_text,
    staged_dir,
    write_json,
    written_kind,
)
from bindscope.core.locks import writes
from bindscope.core.version import __version__
from bindscope.embeddings.encoders.base import short_reason, weights_sha256
from bindscope.embeddings.encoders.hub import quiet_hub_logs

#: What open_clip's trainer names its checkpoints.
CHECKPOINT_GLOB = "epoch_*.pt"
CONFIG_NAME = "open_clip_config.json"
WEIGHTS_NAME = "open_clip_model.safetensors"
#: The sidecar that records where a converted folder came from.
SOURCE_NAME = "converted_from.json"
SOURCE_FORMAT = "bindscope-openclip-conversion-v1"
#: Key prefixes of wrapped models (DistributedDataParallel, torch.compile), stripped from the state dict.
PREFIXES = ("module.", "_orig_mod.")
#: params.txt entries that map onto open_clip's preprocess_cfg.
_PREPROCESS_PARAMS = {
    "image_mean": "mean",
    "image_std": "std",
    "image_interpolation": "interpolation",
    "image_resize_mode": "resize_mode",
}
_TAG_PREPROCESS = ("mean", "std", "interpolation", "resize_mode")
_FIX = "give the epoch_N.pt file open_clip's trainer wrote (logs/RUN/checkpoints/)"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainerCheckpoint:
    """A trainer checkpoint, read safely: its state dict (prefix stripped), epoch, run name and hash."""

    path: Path
    state_dict: dict[str, Any]
    epoch: int | None
    name: str | None
    sha256: str
    prefix: str | None


@dataclass
class Architecture:
    """The model config and preprocessing a checkpoint is converted with, and where each came from."""

    model_cfg: dict[str, Any]
    preprocess_cfg: dict[str, Any]
    label: str
    source: dict[str, Any]
    applied: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ConvertResult:
    """What :func:`convert_checkpoint` did: ``converted``, or ``existing`` (the folder already held it)."""

    out: Path
    status: str
    record: dict[str, Any]
    notes: tuple[str, ...] = ()


# -- reading the checkpoint ----------------------------------------------------------------------


def read_checkpoint(path: str | Path) -> TrainerCheckpoint:
    """Read a trainer checkpoint (or a bare state dict) with ``torch.load(weights_only=True)``.

    Anything else (not a torch file, Python objects only an unpickling load could rebuild, no state dict of
    tensors) is a one-line :class:`BindscopeError`.
    """
    path = Path(path).expanduser()
    _check_is_file(path)
    loaded = _safe_load(path)
    state = loaded.get("state_dict", loaded) if isinstance(loaded, Mapping) else None
    state, prefix = strip_prefix(_tensors_only(state, path))
    epoch = loaded.get("epoch") if "state_dict" in loaded else None
    name = loaded.get("name") if "state_dict" in loaded else None
    return TrainerCheckpoint(
        path=path.resolve(),
        state_dict=state,
        epoch=epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None,
        name=name if isinstance(name, str) else None,
        sha256=file_sha256(path),
        prefix=prefix,
    )


def _check_is_file(path: Path) -> None:
    if path.is_dir():
        found = trainer_checkpoints(path)
        example = f", e.g. {found[-1]}" if found else ""
        raise BindscopeError(f"checkpoint {path} is a folder; give one checkpoint file in it{example} ({_FIX})")
    if not path.is_file():
        raise BindscopeError(f"checkpoint {path} does not exist; {_FIX}")


def _safe_load(path: Path) -> Any:
    """``torch.load(weights_only=True)``, memory-mapped where the file allows it; failures as one line."""
    import pickle

    import torch

    try:
        mmap = zipfile.is_zipfile(path)
        with warnings.catch_warnings():  # torch warns about pickle protocols on its way to refusing a file
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as exc:
        found = re.search(r"GLOBAL ([\w.]+)", str(exc))
        if "Weights only load failed" not in str(exc) or not (found or _is_pickle(path)):
            raise _not_a_checkpoint(path, exc) from None
        what = f" ({found.group(1)})" if found else ""
        raise BindscopeError(
            f"{path} holds Python objects{what} that only an unsafe load (torch.load with weights_only=False) "
            "could rebuild, and bindscope never unpickles code; if you trust the file, load it yourself and save "
            "{'state_dict': model.state_dict()} with torch.save, then convert that file"
        ) from None
    except (RuntimeError, OSError, EOFError, KeyError, ValueError, TypeError, AttributeError, IndexError) as exc:
        raise _not_a_checkpoint(path, exc) from None


def _is_pickle(path: Path) -> bool:
    """Whether the file starts as a pickle of protocol 2 or later does (a checkpoint saved in torch's old format)."""
    with path.open("rb") as fh:
        head = fh.read(2)
    return len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5


def _not_a_checkpoint(path: Path, exc: BaseException) -> BindscopeError:
    return BindscopeError(f"{path} is not a torch checkpoint torch.load can read ({short_reason(exc, 120)}); {_FIX}")


def _tensors_only(state: Any, path: Path) -> dict[str, Any]:
    """The state dict, refused unless it maps names to tensors."""
    import torch

    if not isinstance(state, Mapping) or not state:
        raise BindscopeError(
            f"{path} holds no state dict (a trainer checkpoint has a 'state_dict' of tensors, or the file is one); "
            f"{_FIX}"
        )
    odd = [str(k) for k, v in state.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if odd:
        raise BindscopeError(
            f"{path}: its state dict holds entries that are not named tensors ({few(odd)}); {_FIX}, or save "
            "model.state_dict() alone"
        )
    return dict(state)


def strip_prefix(state: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The state dict without the prefix every key carries (``module.`` from DistributedDataParallel,
    ``_orig_mod.`` from torch.compile), and the prefix stripped (None when there was none)."""
    stripped = ""
    while True:
        prefix = next((p for p in PREFIXES if all(k.startswith(p) for k in state)), None)
        if prefix is None:
            return state, stripped or None
        state = {k[len(prefix) :]: v for k, v in state.items()}
        stripped += prefix


def trainer_checkpoints(folder: Path) -> list[Path]:
    """The trainer checkpoints in ``folder`` or in its ``checkpoints/`` (a run folder), by epoch."""
    found = [*Path(folder).glob(CHECKPOINT_GLOB), *(Path(folder) / "checkpoints").glob(CHECKPOINT_GLOB)]

    def epoch(path: Path) -> tuple[int, str]:
        number = path.stem.removeprefix("epoch_")
        return (int(number) if number.isdigit() else 1 << 30, str(path))

    return sorted((p for p in found if p.is_file()), key=epoch)


# -- the architecture ----------------------------------------------------------------------------


def read_params(checkpoint: TrainerCheckpoint) -> tuple[Path | None, dict[str, Any], str | None]:
    """The run's ``params.txt`` (beside ``checkpoints/``) as a dict, with a note when it is not this run's.

    Returns ``(path, params, note)``: ``path`` None and ``params`` empty when there is none or it belongs to
    another run (``note`` says which).
    """
    path = checkpoint.path.parent.parent / "params.txt"
    if checkpoint.path.parent.name != "checkpoints" or not path.is_file():
        return None, {}, None
    params: dict[str, Any] = {}
    for line in read_text(path, "the run's params file").splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            params[key.strip()] = _literal(value)
    name = params.get("name")
    if checkpoint.name is not None and name is not None and str(name) != checkpoint.name:
        note = f"{path} is the params of run {name!r}, not of the checkpoint's run {checkpoint.name!r}: not used"
        return None, {}, note
    return path, params, None


def _literal(value: str) -> Any:
    try:
        return ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return value.strip()


def resolve_architecture(
    arch: str | None, config: str | Path | None, params: dict[str, Any], params_path: Path | None
) -> Architecture:
    """The model config and preprocessing to convert with: ``--arch``, ``--config`` or the run's params.txt."""
    if arch is not None and config is not None:
        raise BindscopeError("give either --arch or --config, not both")
    if config is not None:
        found = _from_config(Path(config).expanduser())
    elif arch is not None:
        found = _from_name(arch, "--arch")
    elif params.get("model"):
        found = _from_params(params, params_path)
    else:
        where = (
            f"; {params_path} names no model" if params_path is not None else " (no params.txt of the run beside it)"
        )
        raise BindscopeError(
            "the checkpoint does not say which architecture it trained"
            + where
            + ": give --arch NAME (an open_clip model name, e.g. ViT-B-32) or --config FILE (its model config JSON)"
        )
    found.applied += apply_params(found, params)
    return found


def _from_name(text: str, option: str) -> Architecture:
    import open_clip

    name, _, tag = text.partition("/")
    known = open_clip.list_models()
    if name not in known:
        raise BindscopeError(
            f"{option} {name!r} is not an open_clip architecture{did_you_mean(name, known)}; open_clip.list_models() "
            "lists them, or give --config FILE with the run's model config"
        )
    preprocess: dict[str, Any] = {}
    if tag:
        tags = open_clip.list_pretrained_tags_by_model(name)
        if tag not in tags:
            raise BindscopeError(
                f"{option} {text!r}: open_clip has no pretrained tag {tag!r} for {name}{did_you_mean(tag, tags)}; "
                f"its tags are {', '.join(tags) or 'none'} (the tag only sets the preprocessing: drop it to use "
                "open_clip's defaults)"
            )
        cfg = open_clip.get_pretrained_cfg(name, tag)
        preprocess = {k: cfg[k] for k in _TAG_PREPROCESS if cfg.get(k) is not None}
    return Architecture(
        model_cfg=open_clip.get_model_config(name),
        preprocess_cfg=preprocess,
        label=text,
        source={"arch": name, **({"pretrained_tag": tag} if tag else {})},
    )


def _from_config(path: Path) -> Architecture:
    data = read_json(path, "model config")
    model_cfg = data.get("model_cfg", data)
    preprocess = data.get("preprocess_cfg", {}) if "model_cfg" in data else {}
    if not isinstance(model_cfg, dict) or not {"embed_dim", "vision_cfg", "text_cfg"} <= model_cfg.keys():
        raise BindscopeError(
            f"model config {path} has no embed_dim, vision_cfg and text_cfg; give an open_clip model config "
            "(open_clip's model_configs/*.json show the format) or an open_clip_config.json with a model_cfg"
        )
    if not isinstance(preprocess, dict):
        raise BindscopeError(f"model config {path}: preprocess_cfg must be a JSON object (mean, std, ...)")
    return Architecture(
        model_cfg=copy.deepcopy(model_cfg),
        preprocess_cfg=dict(preprocess),
        label=f"{path.name} (--config)",
        source={"config": str(path.resolve()), "config_sha256": file_sha256(path)},
    )


def _from_params(params: dict[str, Any], path: Path | None) -> Architecture:
    import open_clip

    name, tag = str(params["model"]), params.get("pretrained")
    if name not in open_clip.list_models():
        raise BindscopeError(
            f"the run's params.txt ({path}) names --model {name}, which is not an open_clip built-in; give "
            "--config FILE with its model config (or its open_clip_config.json)"
        )
    use_tag = isinstance(tag, str) and tag in open_clip.list_pretrained_tags_by_model(name)
    found = _from_name(f"{name}/{tag}" if use_tag else name, "params.txt model")
    found.label = f"{found.label} (the run's params.txt)"
    return found


def apply_params(arch: Architecture, params: dict[str, Any]) -> list[str]:
    """Apply the settings the trainer forced (params.txt ``force_*`` and ``image_*``) to ``arch``, in place;
    returns what changed, for the record."""
    cfg, applied = arch.model_cfg, []
    if params.get("force_quick_gelu") is True and not cfg.get("quick_gelu"):
        cfg["quick_gelu"] = True
        applied.append("quick_gelu (--force-quick-gelu)")
    if params.get("force_custom_text") is True and not cfg.get("custom_text"):
        cfg["custom_text"] = True
        applied.append("custom_text (--force-custom-text)")
    size = params.get("force_image_size")
    size = size[0] if isinstance(size, (list, tuple)) and len(size) == 1 else size
    if size is not None and cfg["vision_cfg"].get("image_size") != size:
        cfg["vision_cfg"]["image_size"] = size
        applied.append(f"image_size {size} (--force-image-size)")
    for key, option in _PREPROCESS_PARAMS.items():
        if params.get(key) is not None and arch.preprocess_cfg.get(option) != params[key]:
            arch.preprocess_cfg[option] = params[key]
            applied.append(f"{option} {params[key]} (--{key.replace('_', '-')})")
    return applied


# -- building and checking -----------------------------------------------------------------------


@contextlib.contextmanager
def quiet_open_clip() -> Iterator[None]:
    """Hide open_clip's own log lines and warnings while a model is built (it logs on the root logger, which
    would otherwise configure itself and print them)."""
    root = logging.getLogger()
    null, level = logging.NullHandler(), root.level
    root.addHandler(null)
    root.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), quiet_hub_logs():
            warnings.simplefilter("ignore")
            yield
    finally:
        root.removeHandler(null)
        root.setLevel(level)


def build_model(folder: Path, label: str) -> Any:
    """open_clip's model for the config in ``folder`` (random weights; nothing is downloaded)."""
    import open_clip

    try:
        with quiet_open_clip():
            return open_clip.create_model(
                f"local-dir:{folder}", load_weights=False, pretrained_image=False, pretrained_text=False
            )
    except Exception as exc:  # the factory raises RuntimeError, ValueError, KeyError, TypeError, hub errors...
        raise BindscopeError(
            f"open_clip could not build {label} ({short_reason(exc)}); check the architecture (--arch or --config)"
        ) from None


def check_fits(model: Any, state: dict[str, Any], checkpoint: Path, label: str) -> None:
    """Refuse a state dict whose names or shapes differ from the model's, naming a few of each."""
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    shapes = [
        f"{k} {list(state[k].shape)} here, {list(own[k].shape)} in the model"
        for k in own
        if k in state and tuple(state[k].shape) != tuple(own[k].shape)
    ]
    parts = [
        f"{len(keys)} {what} ({few(keys)})"
        for keys, what in ((missing, "missing"), (unexpected, "unexpected"), (shapes, "of another shape"))
        if keys
    ]
    if parts:
        raise BindscopeError(
            f"the weights in {checkpoint} do not fit {label}: {'; '.join(parts)}; give the --arch or --config the "
            "run trained with (its params.txt names it as model)"
        )


def few(items: list[str], n: int = 3) -> str:
    """The first ``n`` items, and how many more."""
    more = f" and {len(items) - n} more" if len(items) > n else ""
    return ", ".join(items[:n]) + more


def _fit_logit_bias(arch: Architecture, state: dict[str, Any]) -> None:
    """A checkpoint trained with a SigLIP loss (``--siglip``) has ``logit_bias``; give its config one too."""
    if "logit_bias" in state and arch.model_cfg.get("init_logit_bias") is None:
        arch.model_cfg["init_logit_bias"] = -10.0
        arch.applied.append("init_logit_bias (the weights hold a logit_bias: trained with --siglip)")


def _own_storage(state: dict[str, Any]) -> dict[str, Any]:
    """Tensors safetensors can save: contiguous, and copied where two share one storage."""
    seen: set[int] = set()
    out = {}
    for key, tensor in state.items():
        tensor = tensor.detach().contiguous()
        where = tensor.untyped_storage().data_ptr()
        out[key] = tensor.clone() if where in seen else tensor
        seen.add(where)
    return out


# -- the conversion ------------------------------------------------------------------------------


def conversion_key(checkpoint: TrainerCheckpoint, arch: Architecture) -> str:
    """What names one conversion: the checkpoint's bytes, the model config and the preprocessing."""
    payload = {
        "format": SOURCE_FORMAT,
        "checkpoint_sha256": checkpoint.sha256,
        "model_cfg": arch.model_cfg,
        "preprocess_cfg": arch.preprocess_cfg,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


@writes("out", what="model folder", kind="openclip", reads=("checkpoint", "config"))
def convert_checkpoint(
    checkpoint: str | Path,
    out: str | Path,
    *,
    arch: str | None = None,
    config: str | Path | None = None,
    overwrite: bool = False,
) -> ConvertResult:
    """Turn an open_clip trainer checkpoint into a folder that ``openclip:local-dir:OUT`` loads.

    Parameters
    ----------
    checkpoint : path
        ``epoch_N.pt`` or ``epoch_latest.pt`` of open_clip's trainer (or a file holding a bare state dict).
    out : path
        The model folder to write; new or empty (``overwrite``: a folder this function wrote).
    arch : str, optional
        An open_clip architecture name, ``NAME/TAG`` for a pretrained tag's preprocessing.
    config : path, optional
        A model config JSON (or an ``open_clip_config.json``) instead of ``arch``. Without either, the
        ``model`` of the run's ``params.txt``.
    overwrite : bool
        Replace a model folder this function wrote before.

    Returns
    -------
    ConvertResult
        ``existing`` when ``out`` already holds this conversion (nothing is written).
    """
    out = Path(out)
    ours = written_kind(out) == "openclip"
    if not ours:  # refused at once, before a large checkpoint is read
        check_output_dir(out, kind="openclip", overwrite=overwrite)
    found = read_checkpoint(checkpoint)
    params_path, params, note = read_params(found)
    architecture = resolve_architecture(arch, config, params, params_path)
    _fit_logit_bias(architecture, found.state_dict)
    key = conversion_key(found, architecture)
    previous = conversion_record(out) if ours else None
    if previous is not None and previous.get("key") == key and previous.get("weights_sha256") == weights_sha256(out):
        return ConvertResult(out, "existing", previous, (note,) if note else ())
    with staged_dir(out, kind="openclip", overwrite=overwrite) as stage:
        record, notes = _write_folder(stage, found, architecture, params_path, key)
    return ConvertResult(out, "converted", record, tuple(n for n in (note, *notes) if n))


def _write_folder(
    stage: Path, checkpoint: TrainerCheckpoint, arch: Architecture, params_path: Path | None, key: str
) -> tuple[dict[str, Any], list[str]]:
    from open_clip.push_to_hf_hub import save_config_for_hf
    from safetensors.torch import save_file

    write_json(stage / CONFIG_NAME, {"model_cfg": arch.model_cfg, "preprocess_cfg": arch.preprocess_cfg})
    model = build_model(stage, arch.label)
    check_fits(model, checkpoint.state_dict, checkpoint.path, arch.label)
    model.load_state_dict(checkpoint.state_dict, strict=True)
    save_file(_own_storage(model.state_dict()), str(stage / WEIGHTS_NAME))
    save_config_for_hf(model, stage / CONFIG_NAME, model_config=arch.model_cfg)
    notes = [n for n in [_save_tokenizer(arch.model_cfg, stage)] if n]
    record = {
        "format": SOURCE_FORMAT,
        "key": key,
        "checkpoint": str(checkpoint.path),
        "checkpoint_sha256": checkpoint.sha256,
        "epoch": checkpoint.epoch,
        "run_name": checkpoint.name,
        "stripped_prefix": checkpoint.prefix,
        "architecture": {"label": arch.label, **arch.source},
        "params_txt": str(params_path) if params_path is not None else None,
        "applied": arch.applied,
        "parameters": sum(int(p.numel()) for p in model.parameters()),
        "weights_sha256": weights_sha256(stage),
        "bindscope_version": __version__,
    }
    write_json(stage / SOURCE_NAME, record)
    return record, notes


def _save_tokenizer(model_cfg: dict[str, Any], stage: Path) -> str | None:
    """Copy the Hugging Face tokenizer a text tower names into the folder (open_clip reads it from there); a
    note instead when it cannot be had (the folder then embeds images only)."""
    name = model_cfg.get("text_cfg", {}).get("hf_tokenizer_name")
    if not name:
        return None
    try:
        from transformers import AutoTokenizer

        with quiet_open_clip():
            AutoTokenizer.from_pretrained(name).save_pretrained(str(stage))
    except Exception as exc:  # offline, no such repo, no tokenizer files
        return (
            f"the tokenizer {name} could not be copied into the folder ({short_reason(exc, 120)}): it embeds "
            "images; put the tokenizer's files into it to embed texts"
        )
    return None


def conversion_record(folder: str | Path) -> dict[str, Any] | None:
    """The ``converted_from.json`` of a converted folder, or None (none there, or not readable)."""
    path = Path(folder) / SOURCE_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and data.get("format") == SOURCE_FORMAT else None
