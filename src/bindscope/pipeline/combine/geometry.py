"""``bindscope geometry EMB...``: the geometry of one embedding folder, or of several side by side.

With one folder, ``out`` is its result folder. With several (models, or layers of one model), ``out``
holds a result folder per embedding folder (``out/<label>/``) and the comparison across them:
``comparison.csv`` / ``.parquet`` (held-out factorization R² and head accuracy per folder and
fraction), ``comparison.json`` (their correlations) and ``plots/correlation.png``. The whole ``out``
appears only once complete.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bindscope.analyses.base import Progress
from bindscope.analyses.geometry import GeometrySettings, comparison_table, correlation_plot, correlations
from bindscope.analyses.inputs import Inputs
from bindscope.analyses.registry import load_inputs, run_analysis
from bindscope.analyses.results import LoadedResult, load_result
from bindscope.core.display import display_path, run_folder
from bindscope.core.errors import BindscopeError
from bindscope.core.io import check_output_dir, staged_dir, write_json, write_parquet
from bindscope.core.locks import writes
from bindscope.core.validation import MAX_NAME, NAME_RULE, is_name, short_repr

COMPARISON = "comparison"


@dataclass(frozen=True)
class GeometryRun:
    """The result folder of each embedding folder (by label) and, with several, their comparison."""

    out: Path
    results: dict[str, LoadedResult]
    comparison: dict[str, Any] | None


def folder_labels(inputs: Sequence[Inputs], labels: Sequence[str] | None) -> list[str]:
    """A label per folder: as given, else the folder names (made unique)."""
    if labels is not None:
        if len(labels) != len(inputs):
            raise BindscopeError(f"{len(labels)} labels for {len(inputs)} embedding folders; give one per folder")
        bad = [x for x in labels if not is_name(x)]
        if bad:
            raise BindscopeError(f"labels name folders: {NAME_RULE}, got {short_repr(bad)}")
        taken = [x for x in labels if reserved(x)]
        if taken:
            raise BindscopeError(
                f"label {taken[0]!r} is taken by the comparison's own files ({COMPARISON}.*, plots/); choose another"
            )
        if len(set(labels)) != len(labels):
            raise BindscopeError(f"labels repeat: {list(labels)}")
        return list(labels)
    out: list[str] = []
    for item in inputs:
        name = re.sub(r"[^A-Za-z0-9_.+-]", "_", item.embeddings.root.resolve().name).lstrip("_.+-")
        base = name[: MAX_NAME - 10] or "embeddings"  # room for a -N suffix
        label, k = base, 2
        while label in out or reserved(label):
            label, k = f"{base}-{k}", k + 1
        out.append(label)
    return out


def reserved(label: str) -> bool:
    """Whether ``label`` is taken by the comparison's own files (``comparison.csv`` ..., ``plots/``)."""
    return label in (COMPARISON, "plots") or label.startswith(f"{COMPARISON}.")


@writes("out", what="result folder", kind="result", reads=("emb_dirs", "singles", "dataset"))
def run_geometry(
    emb_dirs: Sequence[str | Path],
    out: str | Path,
    settings: GeometrySettings | None = None,
    *,
    singles: str | Path | None = None,
    dataset: str | Path | None = None,
    labels: Sequence[str] | None = None,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> GeometryRun:
    """Run ``geometry`` on each embedding folder; with several, compare them (see the module doc)."""
    if not emb_dirs:
        raise BindscopeError("give at least one embedding folder")
    if singles is not None and len(emb_dirs) > 1:
        raise BindscopeError("--singles names the bank of one folder; with several, keep each bank beside its folder")
    out = Path(out)
    check_output_dir(out, kind="result", overwrite=overwrite)
    loaded = [load_inputs("geometry", d, dataset=dataset, singles=singles) for d in emb_dirs]  # all checked before work
    names = folder_labels(loaded, labels)
    settings = settings or GeometrySettings()
    if len(loaded) == 1:
        result = run_analysis("geometry", loaded[0], out, settings, overwrite=overwrite, progress=progress)
        return GeometryRun(out, {names[0]: result}, None)
    with staged_dir(out, kind="result", overwrite=overwrite) as stage:
        results = {
            name: run_analysis("geometry", item, stage / name, settings, progress=progress)
            for name, item in zip(names, loaded)
        }
        table = comparison_table(results)
        table["path"] = list(table["label"])  # where each folder ends up, relative to the comparison (not the stage)
        run = run_folder(out)  # the embedding folders as a summary shows its inputs (docs/reference/results.md)
        comparison = {"folders": {n: display_path(d, run) for n, d in zip(names, emb_dirs)}}
        comparison["correlations"] = correlations(table)
        write_parquet(table, stage / f"{COMPARISON}.parquet")
        table.to_csv(stage / f"{COMPARISON}.csv", index=False)
        write_json(stage / f"{COMPARISON}.json", comparison)
        correlation_plot(table, stage / "plots" / "correlation.png", title="factorization vs generalisation")
    final = {name: load_result(out / name, "geometry") for name in names}
    return GeometryRun(out, final, comparison)
