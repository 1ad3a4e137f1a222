"""Turning a controlled model into inputs for every analysis (docs/method/09-scratch.md, conversion).

``export_model(MODEL, OUT)`` writes::

    OUT/dataset/              every ordered pair of the model's objects (K = 2), with captions
    OUT/embeddings/scene/     the scene encoder's embedding of every pair (spec scratch:MODEL)
    OUT/embeddings/scene-rand/  the same architecture with random weights (scratch:MODEL+rand),
                              the control that ``bindscope probe`` finds next to it
    OUT/probes/               concept and object probes: the query encoder's L2-normalised
                              embeddings of every concept value and every object
    OUT/export.json           what was exported, from which model

Each part is written atomically and skipped when already there, so exporting again is a no-op.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bindscope.core.errors import BindscopeError
from bindscope.core.io import mark_output, read_json, write_json
from bindscope.core.locks import writes
from bindscope.estimators.probes import save_probes


@dataclass(frozen=True)
class ExportResult:
    """Where :func:`export_model` put the dataset, the embeddings, the control and the probes."""

    dataset: Path
    embeddings: Path
    control: Path | None
    probes: Path


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
    from bindscope.embeddings.encoders.scratch.folder import load_model
    from bindscope.scratch.evaluate import query_probes

    model_dir, out = Path(model_dir).resolve(), Path(out)
    if out.exists() and not out.is_dir():
        raise BindscopeError(f"{out} exists and is not a folder; choose another --out")
    _check_previous(out, model_dir, layer, overwrite)
    model, record = load_model(model_dir, device=device)
    preset = _preset(record)  # checked before the folder is made, so a refused export leaves none
    out.mkdir(parents=True, exist_ok=True)
    mark_output(out, "export")
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
