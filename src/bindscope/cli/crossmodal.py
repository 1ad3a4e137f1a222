"""``bindscope crossmodal``: image against text embeddings of one joint model (docs/method.md §7)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from bindscope.cli.app import app
from bindscope.cli.common import (
    DeviceOpt,
    OutDir,
    OverwriteOpt,
    QuietOpt,
    SeedsOpt,
    WaitOpt,
    given,
    parse_fractions,
    parse_seeds,
)
from bindscope.cli.measure import AttributeOpt, DatasetOpt, NounOpt, report


class BridgeChoice(str, Enum):
    ridge = "ridge"
    contrastive = "contrastive"
    none = "none"


def probe_result(modality: str) -> object:
    return typer.Option(
        f"--probes-{modality}",
        help=f"A `bindscope probe` output folder of the {modality} embeddings: its object probe accuracy is "
        "shown beside the cross-modal tests (the paper's uni-modal vs cross-modal contrast).",
    )


@app.command()
def crossmodal(
    image_dir: Annotated[
        Path, typer.Argument(help="The image embedding folder.", show_default=False, metavar="IMAGE_DIR")
    ],
    text_dir: Annotated[
        Path,
        typer.Argument(
            help="The text embedding folder of the same dataset and model (its captions).",
            show_default=False,
            metavar="TEXT_DIR",
        ),
    ],
    out: OutDir,
    bridge: Annotated[
        Optional[BridgeChoice],
        typer.Option(
            help="The linear bridge text -> image fitted on seen objects: ridge (closed form, default), "
            "contrastive (InfoNCE, started from the ridge map) or none."
        ),
    ] = None,
    fractions: Annotated[
        Optional[str],
        typer.Option(help="Fractions of objects the bridge is fitted on, comma-separated (0.3,0.5,0.7,0.9)."),
    ] = None,
    seeds: SeedsOpt = None,
    contrastive_steps: Annotated[
        Optional[int], typer.Option(help="Adam steps of the contrastive bridge (300).")
    ] = None,
    max_scenes: Annotated[
        Optional[int],
        typer.Option(help="Score a seeded subsample of this many 2-object scenes (default: all of them)."),
    ] = None,
    retrieval_queries: Annotated[
        Optional[int],
        typer.Option(
            help="Estimate retrieval from this many seeded queries per scoring, each ranked exactly against every "
            "caption / image (default: every scene asks; for very large sets)."
        ),
    ] = None,
    subsample_seed: Annotated[
        Optional[int], typer.Option(help="The seed of --max-scenes' subsample and --retrieval-queries' sample (0).")
    ] = None,
    attribute: AttributeOpt = None,
    noun: NounOpt = None,
    singles: Annotated[
        Optional[Path],
        typer.Option(
            help="The text single-object captions (`bindscope embed --single-objects` on the text modality, or "
            "`bindscope embeddings import --singles`), for half-truths. Default: a sibling folder of TEXT_DIR "
            "holding them; without one, half-truths are absent."
        ),
    ] = None,
    probes_image: Annotated[Optional[Path], probe_result("image")] = None,
    probes_text: Annotated[Optional[Path], probe_result("text")] = None,
    allow_different_models: Annotated[
        bool,
        typer.Option(
            "--allow-different-models",
            help="Compare embeddings of two different models (refused by default: cross-modal similarity "
            "is meant within one joint model).",
        ),
    ] = False,
    cases: Annotated[
        bool, typer.Option("--cases/--no-cases", help="Write per-scene scores to cases.parquet (on by default).")
    ] = True,
    dataset: DatasetOpt = None,
    device: DeviceOpt = "cpu",
    overwrite: OverwriteOpt = False,
    quiet: QuietOpt = False,
    wait: WaitOpt = False,
) -> None:
    """Does image-text similarity see the binding? Swap tests, retrieval, a linear bridge, half-truths."""
    from bindscope.analyses import CrossmodalSettings, load_inputs

    settings = CrossmodalSettings(
        cases=cases,
        device=device,
        **given(
            bridge=bridge.value if bridge else None,
            fractions=parse_fractions(fractions),
            seeds=parse_seeds(seeds),
            contrastive_steps=contrastive_steps,
            max_scenes=max_scenes,
            retrieval_queries=retrieval_queries,
            subsample_seed=subsample_seed,
            attribute=attribute,
            noun=noun,
        ),
    )
    unimodal = {m: p for m, p in (("image", probes_image), ("text", probes_text)) if p is not None}
    inputs = load_inputs(
        "crossmodal",
        image_dir,
        other=text_dir,
        singles=singles,
        unimodal=unimodal or None,
        dataset=dataset,
        allow_different_models=allow_different_models,
    )
    report("crossmodal", inputs, out, settings, overwrite, quiet)
