"""``bindscope report RUN_DIR``: one self-contained HTML page of a run (plots embedded, no network).

At the top a binding report card, a row per embedding folder (and per model for the cross-modal
tests), each number with a one-line reading; then a section per result folder with its headline
table and figures; the provenance of each model; and the commands that reproduce the run.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from bindscope.analyses import get_analysis, load_result
from bindscope.analyses.complexity import ComplexitySummary
from bindscope.analyses.crossmodal import CrossmodalSummary
from bindscope.analyses.decompose import DecomposeSummary
from bindscope.analyses.geometry import GeometrySummary
from bindscope.analyses.intervene import InterveneSummary, at_k
from bindscope.analyses.probe import ProbeSummary, binding_reading, object_numbers, recoverable_reading
from bindscope.analyses.results import Summary, read_header
from bindscope.core.errors import BindscopeError
from bindscope.core.figures import pyplot, save_figure
from bindscope.core.io import atomic_file, read_json
from bindscope.core.locks import writes
from bindscope.estimators.floors import SHORT_READINGS
from bindscope.estimators.metrics import percent, spread_mean
from bindscope.pipeline.steps import time_table

REPORT = "report.html"
PROVENANCE = ("bindscope_version", "created", "git", "seeds", "device", "datasets", "models")


@dataclass
class CardRow:
    """One row of the report card: an embedding folder (or a model's cross-modal pair) and its numbers."""

    dataset: str
    label: str
    cells: dict[str, float | str | None] = field(default_factory=dict)
    readings: list[str] = field(default_factory=list)


def result_folders(root: Path) -> dict[tuple[str, str], dict[str, Path]]:
    """``(dataset, label) -> {analysis: folder}`` of every complete result folder of a run."""
    out: dict[tuple[str, str], dict[str, Path]] = {}
    for summary in sorted((root / "results").glob("*/*/*/summary.json")):
        folder = summary.parent
        if read_header(folder) is None:
            continue
        out.setdefault((folder.parent.parent.name, folder.parent.name), {})[folder.name] = folder
    return out


S = TypeVar("S", bound=Summary)


def numbers_of(folder: Path, kind: type[S]) -> S:
    """The typed numbers of an analysis folder (:func:`load_result` validates them against the analysis's summary)."""
    typed = load_result(folder).typed
    if not isinstance(typed, kind):
        raise BindscopeError(f"{folder} does not hold {kind.__name__} numbers; run the analysis again")
    return typed


def card_row(dataset: str, label: str, folders: dict[str, Path]) -> CardRow:
    """The report card's numbers and readings for one embedding folder's results."""
    row = CardRow(dataset, label)
    for analysis, fill in CARD_PARTS.items():
        if analysis in folders:
            fill(folders[analysis], row)
    return row


def probe_part(folder: Path, row: CardRow) -> None:
    summary = numbers_of(folder, ProbeSummary)
    row.cells |= probe_cells(summary)
    row.readings += [recoverable_reading(summary), binding_reading(summary)]


def decompose_part(folder: Path, row: CardRow) -> None:
    r2 = numbers_of(folder, DecomposeSummary).r2.test or {}
    obj, con = spread_mean(r2.get("object_additive")), spread_mean(r2.get("concept_additive"))
    row.cells |= {"object-additive R²": obj, "concept-additive R²": con}
    if obj is not None:
        row.readings.append(
            f"a sum of object vectors: R² {obj:.3f} on held-out scenes"
            + (f" (of concept vectors: {con:.3f})" if con is not None else "")
        )


def intervene_part(folder: Path, row: CardRow) -> None:
    row.cells |= intervention_cells(numbers_of(folder, InterveneSummary), row.readings)


def complexity_part(folder: Path, row: CardRow) -> None:
    verdict = numbers_of(folder, ComplexitySummary).verdict
    row.cells |= {"complexity": verdict.simplest_generalising or "none", "f*": verdict.f_star}
    row.readings.append(f"binding function: {verdict.reading}")


def geometry_part(folder: Path, row: CardRow) -> None:
    g = numbers_of(folder, GeometrySummary)
    slot = g.positions[0]
    held = slot.held_out.get(f"{g.headline_fraction:g}")
    heads = spread_mean(held.heads.get("object") if held is not None else None)
    row.cells |= {"factorization R²": slot.r2, "linear heads (unseen)": heads}
    row.readings.append(
        f"object vectors factorise: R² {slot.r2:.3f}; linear heads read {percent(heads)} of unseen objects (half seen)"
    )


def crossmodal_part(folder: Path, row: CardRow) -> None:
    swap = spread_mean(numbers_of(folder, CrossmodalSummary).raw.get("swap_attribute"))
    row.cells |= {"attribute swap": swap}
    row.readings.append(
        f"image-text similarity tells the attribute swap apart {percent(swap)} of the time (chance 50%)"
    )


#: What each analysis adds to a report-card row (its numbers and readings), in the card's order.
CARD_PARTS: dict[str, Callable[[Path, CardRow], None]] = {
    "probe": probe_part,
    "decompose": decompose_part,
    "intervene": intervene_part,
    "complexity": complexity_part,
    "geometry": geometry_part,
    "crossmodal": crossmodal_part,
}


def probe_cells(summary: ProbeSummary) -> dict[str, float | str | None]:
    """The test object accuracy beside its floors (random weights, chance, the bag of concepts: the
    larger of the ideal and the fitted bag, mean over seeds) and whether it binds beyond the bag."""
    binding = summary.binding
    acc, rand, chance = object_numbers(summary)
    return {
        "object probe": acc,
        "random weights": rand,
        "chance": chance,
        "bag of concepts": binding.floor_mean if binding is not None else None,
        "beyond bag": SHORT_READINGS.get(binding.reading, "-") if binding is not None else "-",
    }


def intervention_cells(summary: InterveneSummary, readings: list[str]) -> dict[str, float | None]:
    """Retrieval of the attribute edit by the first available bank, shared and different, at the table's k."""
    banks = [b for b, v in summary.banks.items() if v.available]
    edit = summary.edits[0]
    if not banks:
        return {}
    numbers = {g: at_k(summary, edit, banks[0], g, summary.table_k) for g in ("shared", "different")}
    cells = {f"edit {g}": spread_mean(n.retrieval if n is not None else None) for g, n in numbers.items()}
    cases = " and ".join(f"{n.cases if n is not None else 0:,}" for n in numbers.values())
    readings.append(
        f"editing one object ({edit}, {banks[0]} bank): retrieval {percent(cells['edit shared'])} when the two objects "
        f"share the value, {percent(cells['edit different'])} when they differ ({cases} edits)"
    )
    return cells


def report_card(root: Path) -> list[CardRow]:
    """Every row of the report card of a run folder."""
    return [card_row(dataset, label, folders) for (dataset, label), folders in result_folders(root).items()]


LAYERED = re.compile(r"^(?P<base>.+)-L(?P<layer>-?\d+)$")
DEPTH_METRICS = (
    "object probe",
    "object-additive R²",
    "edit different",
    "factorization R²",
    "linear heads (unseen)",
    "attribute swap",
)


def depth_series(rows: list[CardRow]) -> dict[tuple[str, str], list[tuple[int, CardRow]]]:
    """Rows of one model (and modality) at several layers, by (dataset, folder label without the layer)."""
    out: dict[tuple[str, str], list[tuple[int, CardRow]]] = {}
    for r in rows:
        match = LAYERED.match(r.label)
        if match:
            out.setdefault((r.dataset, match["base"]), []).append((int(match["layer"]), r))
    return {k: sorted(v, key=lambda x: x[0]) for k, v in out.items() if len(v) > 1}


def depth_figure(key: tuple[str, str], series: list[tuple[int, CardRow]], path: Path) -> Path | None:
    """Each headline metric of a layer sweep against depth."""
    metrics = [m for m in DEPTH_METRICS if any(isinstance(r.cells.get(m), float) for _, r in series)]
    if not metrics:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    layers = [layer for layer, _ in series]
    for m in metrics:
        values = [r.cells.get(m) for _, r in series]
        ax.plot(layers, [v if isinstance(v, float) else np.nan for v in values], "o-", label=m)
    ax.set_xlabel("layer")
    ax.set_ylabel("value")
    ax.set_title(f"{key[0]} / {key[1]}: headline metrics against depth")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def image_tag(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def table_html(rows: list[tuple[str, ...]] | list[list[str]]) -> str:
    head, *body = rows
    out = ["<table><thead><tr>", *(f"<th>{html.escape(str(c))}</th>" for c in head), "</tr></thead><tbody>"]
    for r in body:
        out += ["<tr>", *(f"<td>{html.escape(str(c))}</td>" for c in r), "</tr>"]
    return "".join([*out, "</tbody></table>"])


def cell_text(value: Any) -> str:
    """A report-card cell as text: ``-`` when missing (None or NaN), three decimals for a number."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def card_html(rows: list[CardRow]) -> str:
    columns = list(dict.fromkeys(c for r in rows for c in r.cells))
    body = [["dataset", "embeddings", *columns]]
    for r in rows:
        body.append([r.dataset, r.label, *(cell_text(r.cells.get(c)) for c in columns)])
    readings = "".join(
        f"<li><b>{html.escape(r.dataset)} / {html.escape(r.label)}</b><ul>"
        + "".join(f"<li>{html.escape(x)}</li>" for x in r.readings)
        + "</ul></li>"
        for r in rows
    )
    return table_html(body) + f"<ul class='readings'>{readings}</ul>"


def section_html(folder: Path, root: Path) -> str:
    loaded = load_result(folder)
    analysis = get_analysis(loaded.analysis)
    parts = [f"<h3>{html.escape(analysis.name)}: {html.escape(str(folder.relative_to(root)))}</h3>"]
    parts.append(f"<p class='title'>{html.escape(analysis.title)}</p>")
    parts.append(table_html(analysis.headline(loaded.view)))
    notes = analysis.notes(loaded.view)
    if notes:
        parts.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    for png in sorted((folder / "plots").glob("*.png")):
        parts.append(f"<figure>{image_tag(png)}<figcaption>{html.escape(png.name)}</figcaption></figure>")
    for page in sorted((folder / "plots").glob("*.html")):
        parts.append(f"<p>interactive: <a href='{html.escape(str(page.relative_to(root)))}'>{page.name}</a></p>")
    return "<section>" + "".join(parts) + "</section>"


STYLE = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:1em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}td,th{border:1px solid #ccc;padding:.2em .5em}
th{background:#f0f0f0}img{max-width:100%}figure{margin:.5em 0}section{border-top:1px solid #ddd;margin-top:1em}
.readings li{margin:.2em 0}pre{background:#f6f6f6;padding:.5em;overflow-x:auto}
"""


def depth_html(rows: list[CardRow], root: Path) -> list[str]:
    """A figure per layer sweep (a model embedded at several layers): the headline metrics against depth."""
    parts = []
    for key, series in depth_series(rows).items():
        figure = depth_figure(key, series, root / "report" / f"depth-{key[0]}-{key[1]}.png")
        if figure is not None:
            parts.append(f"<h3>Layer sweep: {html.escape(key[0])} / {html.escape(key[1])}</h3>{image_tag(figure)}")
    return parts


@writes("root", what="run folder", in_place=True)
def write_report(root: str | Path) -> Path:
    """Write ``report.html`` into a run folder (also the last step of ``bindscope run``)."""
    root = Path(root)
    manifest_path = root / "manifest.json"
    config_path = root / "config.yaml"
    if not config_path.is_file():
        raise BindscopeError(f"{root} is not a run folder (no config.yaml); give the --out folder of bindscope run")
    manifest = read_json(manifest_path, "run manifest") if manifest_path.is_file() else {}
    rows = report_card(root)
    folders = result_folders(root)
    name = manifest.get("run") or root.name
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>bindscope: {html.escape(name)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>bindscope run {html.escape(name)}</h1>",
        "<h2>Binding report card</h2>",
        card_html(rows) if rows else "<p>No results yet.</p>",
        *depth_html(rows, root),
        "<h2>Analyses</h2>",
        *(section_html(f, root) for group in folders.values() for f in group.values()),
        "<h2>Provenance</h2>",
        f"<pre>{html.escape(json.dumps({k: manifest.get(k) for k in PROVENANCE}, indent=2))}</pre>",
        "<h2>Time per step</h2>",
        f"<pre>{html.escape(chr(10).join(time_table(manifest.get('steps') or [])) or 'not recorded')}</pre>",
        "<h2>Reproduce</h2>",
        f"<pre>bindscope run {html.escape(str(config_path))} --out {html.escape(str(root))}</pre>",
        "</body></html>",
    ]
    out = root / REPORT
    with atomic_file(out, "w") as fh:
        fh.write("\n".join(parts))
    return out
