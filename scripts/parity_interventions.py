"""Run the published research code's interventions beside ``bindscope intervene`` on the same embeddings.

The research code (github.com/oshapio/binding-concepts-complexity, ``src/mob/clip_embeddings``) is
imported from a checkout you give; nothing of it is copied here. Its ``run_interventions`` runs on
the dataset's 2-object scenes and embeddings with each bank (obj-avg, pos-avg and, when given, the
single-object bank), each seed and k of a ``bindscope intervene`` result folder, and the retrieval
accuracies (shared / different attribute) and the best match of every edit are compared with that
folder's ``cases.parquet``.

    .venv/bin/python scripts/parity_interventions.py --research-code CHECKOUT/src/mob/clip_embeddings \\
        --result results/minilm-intervene [--singles emb/minilm-single]

The research code's probes need ``wandb``; only its retrieval is compared (its probe module is
stubbed).
"""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd

from bindscope.analyses import load_result
from bindscope.data.datasets import load_dataset
from bindscope.embeddings.store import load_embeddings

MODES = {"obj-avg": "avg_scene_position_independent", "pos-avg": "avg_scene_position_dependent"}


def research_module(path: Path) -> types.ModuleType:
    sys.path.insert(0, str(path))
    sys.modules.setdefault("train_embeddings", types.ModuleType("train_embeddings"))  # probes only (wandb)
    import run_interventions  # type: ignore[import-not-found]

    return run_interventions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--research-code", type=Path, required=True, help="folder holding run_interventions.py")
    parser.add_argument("--result", type=Path, required=True, help="a bindscope intervene result folder (with cases)")
    parser.add_argument("--singles", type=Path, help="the single-object bank the result used, to compare it too")
    args = parser.parse_args()
    rc = research_module(args.research_code)
    result = load_result(args.result, "intervene")
    inputs = result.header.inputs
    ds = load_dataset(inputs["dataset"]["path"])
    y = load_embeddings(inputs["embeddings"]["path"], ds).array
    full = ds.scenes.full()
    scenes, y = ds.scenes.scenes[full], y[full]
    a, n = (ds.space.concept_index(result.summary["concepts"][c]) for c in ("attribute", "noun"))
    records = [rc.PairRecord(int(s[0, a]), int(s[0, n]), int(s[1, a]), int(s[1, n]), "left", "right") for s in scenes]
    banks = {name: (mode, None) for name, mode in MODES.items()}
    if args.singles is not None:
        singles = load_embeddings(args.singles, ds, rows="single_objects").array
        per = len(singles) // ds.space.num_objects
        bank = {}
        for o, v in enumerate(ds.space.all_objects()):
            for s in range(per):
                pos = "*" if per == 1 else ("left", "right")[s]
                bank[(int(v[a]), int(v[n]), pos)] = singles[o * per + s]
        banks["single"] = ("single_object", bank)
    cases = pd.read_parquet(args.result / "cases.parquet")
    cases = cases[cases.edit == "attribute"]
    total = differ = 0
    print(f"{'seed':>4} {'bank':8} {'k':>4}  research same/diff   bindscope same/diff   edits  best match differs")
    for seed in sorted(cases.seed.unique()):
        for name, (mode, given) in banks.items():
            table = given or rc._build_object_embedding_bank(
                records=records,
                scene_embeddings=y,
                mode=mode,
                adapter=ds.name,
                single_object_embeddings_path=None,
                attr_to_idx={},
                obj_to_idx={},
            )
            for k in sorted(cases[cases.variant == name].k.unique()):
                summary, rcases = rc.run_interventions(
                    records=records,
                    embeddings=y,
                    reference_records=None,
                    reference_embeddings=None,
                    object_embedding_mode=mode,
                    object_embedding_bank=table,
                    max_targets_per_pair=1,
                    steering_strength=float(k),
                    seed=int(seed),
                    retrieval_batch_size=512,
                    max_interventions=None,
                    probe_artifacts=None,
                    attr_concept_idx=0,
                    obj_concept_idx=1,
                    split_same_diff=True,
                )
                ours = cases[(cases.seed == seed) & (cases.variant == name) & (cases.k == k)]
                theirs = np.array([full[c.predicted_index] for c in rcases])
                d = int((theirs != ours.retrieved.to_numpy()).sum()) if len(theirs) == len(ours) else -1
                total, differ = total + len(ours), differ + max(d, 0)
                print(
                    f"{seed:>4} {name:8} {k:>4g}  {summary['retrieval_top1_same_color_accuracy']:.4f} / "
                    f"{summary['retrieval_top1_diff_color_accuracy']:.4f}     {ours[ours.shared].hit.mean():.4f} / "
                    f"{ours[~ours.shared].hit.mean():.4f}     {len(ours):>6}  {d if d >= 0 else 'cases differ'}"
                )
    print(f"\nbest match differs on {differ:,} of {total:,} edits")


if __name__ == "__main__":
    main()
