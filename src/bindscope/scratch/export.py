"""Turning a controlled model into inputs for every analysis (docs/method/09-scratch.md, conversion).

``export_model(MODEL, OUT)`` writes::

    OUT/dataset/              every ordered pair of the model's objects (K = 2), with captions
    OUT/embeddings/scene/     the scene encoder's embedding of every pair (spec scratch:MODEL)
    OUT/embeddings/scene-rand/  the same architecture with random weights (scratch:MODEL+rand),
                              the control that ``bindscope probe`` finds next to it
    OUT/probes/               concept and object probes: the query encoder's L2-normalised
                              embeddings of every concept value and every object
    OUT/export.json           what was exported, from which model

An image-text model (a CLIP in miniature) exports its training dataset's images and captions instead::

    OUT/embeddings/image/ , image+rand/ , image-single/    its image tower on the scenes, the control, the
    OUT/embeddings/text/ , text+rand/ , text-single/       single objects; the same for its text tower
    OUT/export.json

Each part is written atomically and skipped when already there, so exporting again is a no-op.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bindscope.core.errors import BindscopeError
from bindscope.core.io import mark_output, read_json, write_json
from bindscope.core.locks import remove_leftovers, writes
from bindscope.estimators.probes import save_probes


@dataclass(frozen=True)
class ExportResult:
    """Where :func:`export_model` put the dataset, the embeddings, the control and the probes (an image-text
    model: the image embeddings as ``embeddings``, all its folders in ``folders``, no probes)."""

    dataset: Path
    embeddings: Path
    control: Path | None
    probes: Path | None
    folders: tuple[Path, ...] = ()


@writes("out", what="export folder", kind="export", reads=("model_dir",))
def export_model(
    model_dir: str | Path,
    out: str | Path,
    *,
    layer: int | None = None,
    control: bool = True,
    device: str = "cpu",
    batch_size: int = 1024,
    overwrite: bool = False,
    progress: bool = False,
) -> ExportResult:
    """Embed every ordered object pair with a scratch model's scene encoder and write its probes.

    Parameters
    ----------
    model_dir : path
        A finished model folder of ``bindscope scratch train``.
    out : path
        The export folder (see the module docstring).
    layer : int or None
        Embed this layer's EOS state instead of the final embedding (the probes are the final
        query embeddings, so use them with final embeddings only).
    control : bool
        Also embed the ``+rand`` control.
    """
    import torch

    from bindscope.data.datasets import build_dataset
    from bindscope.embeddings.embed import embed_dataset
    from bindscope.embeddings.encoders.scratch.folder import CLIP_FORMAT, load_model, read_model_config
    from bindscope.scratch.evaluate import query_probes

    model_dir, out = Path(model_dir).resolve(), Path(out)
    if out.exists() and not out.is_dir():
        raise BindscopeError(f"{out} exists and is not a folder; choose another --out")
    _check_previous(out, model_dir, layer, overwrite)
    record = read_model_config(model_dir)
    if record.get("format") == CLIP_FORMAT:
        return export_image_text(model_dir, record, out, layer, control, device, overwrite, progress)
    model, record = load_model(model_dir, device=device)
    preset = _preset(record)  # checked before the folder is made, so a refused export leaves none
    out.mkdir(parents=True, exist_ok=True)
    mark_output(out, "export")
    remove_leftovers(out)  # marked now: what a writer killed before its mark was written left inside goes too
    ds = build_dataset(preset, out / "dataset", images=False, overwrite=overwrite)
    spec = f"scratch:{model_dir}"
    emb = embed_dataset(
        ds,
        spec,
        modality="text",
        out=out / "embeddings" / "scene",
        layer=layer,
        device=device,
        batch_size=batch_size,
        overwrite=overwrite,
        progress=progress,
    )
    rand = None
    if control:
        rand = embed_dataset(
            ds,
            f"{spec}+rand",
            modality="text",
            out=out / "embeddings" / "scene-rand",
            layer=layer,
            device=device,
            batch_size=batch_size,
            overwrite=overwrite,
            progress=progress,
        ).embeddings.root
    with torch.no_grad():
        probes = {k: v.cpu().numpy() for k, v in query_probes(model, ds.space, device).items()}
    save_probes(
        out / "probes",
        probes,
        None,
        center=False,
        normalize=False,
        meta={
            "source": "query encoder (L2-normalised)",
            "model": str(model_dir),
            "selected_step": record["selected_step"],
            "dataset_hash": ds.hash,
        },
    )
    write_json(
        out / "export.json",
        {
            "model": str(model_dir),
            "selected_step": record["selected_step"],
            "layer": layer,
            "dataset_hash": ds.hash,
            "scenes": len(ds),
            "control": rand is not None,
        },
    )
    return ExportResult(ds.root, emb.embeddings.root, rand, out / "probes")


def export_image_text(
    model_dir: Path,
    record: dict,
    out: Path,
    layer: int | None,
    control: bool,
    device: str,
    overwrite: bool,
    progress: bool,
) -> ExportResult:
    """Embed an image-text model's training dataset: images and captions, each with its control and singles."""
    from bindscope.embeddings.embed import embed_dataset
    from bindscope.embeddings.encoders import load_encoder
    from bindscope.embeddings.encoders.scratch.clip_config import ClipConfig
    from bindscope.embeddings.encoders.scratch.folder import RETRAIN
    from bindscope.scratch.clip_train import check_same_dataset, training_dataset
    from bindscope.scratch.config import config_from_dict

    if layer is not None:
        raise BindscopeError(f"{model_dir} is an image-text model: it has no layers to export; drop --layer")
    config = config_from_dict(record["config"], f"{model_dir}/config.json")
    if not isinstance(config, ClipConfig):
        raise BindscopeError(f"{model_dir}/config.json records a token-level config in an image-text model; {RETRAIN}")
    ds = training_dataset(config)
    check_same_dataset(record, ds)
    out.mkdir(parents=True, exist_ok=True)
    mark_output(out, "export")
    remove_leftovers(out)  # marked now: what a writer killed before its mark was written left inside goes too
    spec = f"scratch:{model_dir}"
    trained = load_encoder(spec, device=device)  # each encoder is loaded once for every folder it writes
    rand = load_encoder(f"{spec}+rand", device=device) if control else None
    folders = []
    for modality in ("image", "text"):
        jobs = [("", trained, False), ("-single", trained, True)] + ([("+rand", rand, False)] if rand else [])
        for suffix, encoder, singles in jobs:
            folder = out / "embeddings" / f"{modality}{suffix}"
            embed_dataset(
                ds,
                encoder,
                modality=modality,
                out=folder,
                device=device,
                single_objects=singles,
                overwrite=overwrite,
                progress=progress,
            )
            folders.append(folder)
    write_json(
        out / "export.json",
        {
            "model": str(model_dir),
            "selected_step": record["selected_step"],
            "layer": None,
            "dataset_hash": ds.hash,
            "dataset": str(ds.root),
            "scenes": len(ds),
            "control": control,
        },
    )
    image = out / "embeddings" / "image"
    return ExportResult(ds.root, image, out / "embeddings" / "image+rand" if control else None, None, tuple(folders))


def _preset(record: dict):
    from bindscope.data.presets import preset_from_dict

    if "preset" not in record:
        raise BindscopeError("the model's config.json records no concept space ('preset'); train the model again")
    return preset_from_dict(record["preset"], origin="the model's concept space")


def _check_previous(out: Path, model_dir: Path, layer: int | None, overwrite: bool) -> None:
    """Refuse an export folder that holds another model's export (unless ``overwrite``)."""
    previous = out / "export.json"
    if overwrite or not previous.is_file():
        if not overwrite and out.is_dir() and any(out.iterdir()) and not previous.is_file():
            known = {"dataset", "embeddings", "probes"}
            if any(p.name not in known and not p.name.startswith(".") for p in out.iterdir()):
                raise BindscopeError(f"{out} holds files that are not a bindscope export; choose another --out")
        return
    data = read_json(previous, "export record")
    if data.get("model") != str(model_dir) or data.get("layer") != layer:
        raise BindscopeError(
            f"{out} holds an export of {data.get('model')} (layer {data.get('layer')}); "
            "choose another --out or pass --overwrite"
        )
