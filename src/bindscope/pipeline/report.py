"""``bindscope report RUN_DIR``: one self-contained HTML page of a run (plots embedded, no network).

It reads like a paper's figure page: a table of contents with links; the binding report card, a row per
embedding folder (and per model for the cross-modal tests), rates in percent with their n and 95% Wilson
interval, R² as R², the complexity verdict in words, each row's one-line readings below; the layer sweeps;
then the steps of the paper's story (recoverable, additive, editable, complexity, cross-modal, geometry),
each a section per result folder titled in words, with its headline table, notes and captioned figures; the
provenance of each model, the time per step and the command that reproduces the run.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import pandas as pd

from bindscope.analyses import get_analysis, load_result
from bindscope.analyses.complexity import ComplexitySummary
from bindscope.analyses.complexity import plot as complexity_plot
from bindscope.analyses.complexity.present import card_words
from bindscope.analyses.crossmodal import CrossmodalSummary
from bindscope.analyses.crossmodal import plot as crossmodal_plot
from bindscope.analyses.decompose import DecomposeSummary
from bindscope.analyses.geometry import GeometrySummary
from bindscope.analyses.geometry import plot as geometry_plot
from bindscope.analyses.intervene import InterveneSummary, at_k
from bindscope.analyses.intervene import plot as intervene_plot
from bindscope.analyses.probe import ProbeSummary, binding_reading, object_numbers, recoverable_reading
from bindscope.analyses.results import LoadedResult, Summary, read_header
from bindscope.core.errors import BindscopeError
from bindscope.core.figures import pyplot, save_figure
from bindscope.core.io import atomic_file, read_json
from bindscope.core.locks import writes
from bindscope.estimators.floors import SHORT_READINGS
from bindscope.estimators.intervals import Rate, bounds_text, rate, rate_text, share_text
from bindscope.estimators.metrics import percent, spread_mean
from bindscope.estimators.probes import OBJECT
from bindscope.pipeline.steps import time_table

REPORT = "report.html"
PROVENANCE = ("bindscope_version", "created", "git", "seeds", "device", "datasets", "models")


@dataclass
class CardRow:
    """One row of the report card: an embedding folder (or a model's cross-modal pair) and its numbers.

    ``cells``: the numbers as measured (rates as shares in [0, 1], R² as is; the complexity verdict in words);
    ``counts``: for each rate cell, the cases per seed it is a share of (its n, which the report shows with a 95%
    Wilson interval); ``readings``: one line per answer, in words.
    """

    dataset: str
    label: str
    cells: dict[str, float | str | None] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    readings: list[str] = field(default_factory=list)

    def rate(self, column: str) -> Rate | None:
        """A rate cell with its n and interval (None: not a number, or its n is not recorded)."""
        value = self.cells.get(column)
        return rate(value, self.counts.get(column)) if isinstance(value, float) else None


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


def numbers_of(loaded: LoadedResult, kind: type[S]) -> S:
    """The typed numbers of a loaded analysis folder (:func:`load_result` validates them against the analysis's
    summary)."""
    typed = loaded.typed
    if not isinstance(typed, kind):
        raise BindscopeError(f"{loaded.path} does not hold {kind.__name__} numbers; run the analysis again")
    return typed


def loaded_results(root: Path) -> dict[tuple[str, str], dict[str, LoadedResult]]:
    """Every complete result folder of a run, read once: ``(dataset, label) -> {analysis: result}``."""
    return {key: {a: load_result(f) for a, f in group.items()} for key, group in result_folders(root).items()}


def card_row(dataset: str, label: str, results: dict[str, LoadedResult]) -> CardRow:
    """The report card's numbers and readings for one embedding folder's results."""
    row = CardRow(dataset, label)
    for analysis, fill in CARD_PARTS.items():
        if analysis in results:
            fill(results[analysis], row)
    return row


def probe_part(loaded: LoadedResult, row: CardRow) -> None:
    summary = numbers_of(loaded, ProbeSummary)
    tested = tested_scenes(loaded)
    row.cells |= probe_cells(summary)
    row.counts |= {"object probe": tested, "random weights": tested} if tested is not None else {}
    row.readings += [recoverable_reading(summary, row.rate("object probe")), binding_reading(summary)]


def tested_scenes(loaded: LoadedResult) -> int | None:
    """The test scenes of one seed's object probe (the same for each seed's split, and for the ``+rand`` control);
    None where the folder has no per-scene table."""
    try:
        per_scene = loaded.read_table("per_scene")
    except BindscopeError:
        return None
    rows = per_scene[(per_scene["group"] == "test") & (per_scene["probe"] == OBJECT)]
    per_seed = rows.groupby("seed").size()
    return round(float(per_seed.mean())) if len(per_seed) else None


def decompose_part(loaded: LoadedResult, row: CardRow) -> None:
    r2 = numbers_of(loaded, DecomposeSummary).r2.test or {}
    obj, con = spread_mean(r2.get("object_additive")), spread_mean(r2.get("concept_additive"))
    row.cells |= {"object-additive R²": obj, "concept-additive R²": con}
    if obj is not None:
        row.readings.append(
            f"a sum of object vectors: R² {obj:.3f} on held-out scenes"
            + (f" (of concept vectors: {con:.3f})" if con is not None else "")
        )


def intervene_part(loaded: LoadedResult, row: CardRow) -> None:
    intervention_cells(numbers_of(loaded, InterveneSummary), row)


def complexity_part(loaded: LoadedResult, row: CardRow) -> None:
    summary = numbers_of(loaded, ComplexitySummary)
    row.cells |= {"complexity": card_words(summary), "f*": summary.verdict.f_star}
    row.readings.append(f"binding function: {summary.verdict.reading}")


def crossmodal_part(loaded: LoadedResult, row: CardRow) -> None:
    swap = spread_mean(numbers_of(loaded, CrossmodalSummary).raw.get("swap_attribute"))
    row.cells |= {"attribute swap": swap}
    cases = swap_cases(loaded.table, "swap_attribute")
    row.counts |= {"attribute swap": cases} if cases else {}
    row.readings.append(
        f"image-text similarity tells the attribute swap apart {rate_or_percent(row, 'attribute swap')} of the "
        "time (chance 50%)"
    )


def swap_cases(table: pd.DataFrame, metric: str) -> int | None:
    """The image-caption pairs a swap test of the captions as they are was scored on (None: not recorded)."""
    rows = table[(table["variant"] == "raw") & (table["group"] == "all") & (table["metric"] == metric)]
    if "cases" not in rows or not len(rows):
        return None
    return int(rows["cases"].iloc[0])


def geometry_part(loaded: LoadedResult, row: CardRow) -> None:
    g = numbers_of(loaded, GeometrySummary)
    slot = g.positions[0]
    held = slot.held_out.get(f"{g.headline_fraction:g}")
    heads = spread_mean(held.heads.get("object") if held is not None else None)
    row.cells |= {"factorization R²": slot.r2, "linear heads (unseen)": heads}
    row.counts |= {"linear heads (unseen)": held.objects} if held is not None and held.objects else {}
    r2 = "-" if slot.r2 is None else f"{slot.r2:.3f}"
    row.readings.append(
        f"object vectors factorise: R² {r2}; linear heads read {rate_or_percent(row, 'linear heads (unseen)')} "
        f"of unseen objects ({g.headline_fraction:.0%} seen)"
    )


def rate_or_percent(row: CardRow, column: str) -> str:
    """A rate cell for a reading: with its interval and n where its n is known, else its percentage."""
    value = row.cells.get(column)
    shown = row.rate(column)
    return rate_text(shown) if shown is not None else percent(value if isinstance(value, float) else None)


#: What each analysis adds to a report-card row (its numbers and readings), in the order of the paper's story.
CARD_PARTS: dict[str, Callable[[LoadedResult, CardRow], None]] = {
    "probe": probe_part,
    "decompose": decompose_part,
    "intervene": intervene_part,
    "complexity": complexity_part,
    "crossmodal": crossmodal_part,
    "geometry": geometry_part,
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


def intervention_cells(summary: InterveneSummary, row: CardRow) -> None:
    """Retrieval of the attribute edit by the first available bank, shared and different, at the table's k, with
    the edits per seed each is a share of (the cases over all seeds over the seeds), and its reading."""
    banks = [b for b, v in summary.banks.items() if v.available]
    edit = summary.edits[0]
    if not banks:
        return
    numbers = {g: at_k(summary, edit, banks[0], g, summary.table_k) for g in ("shared", "different")}
    for group, n in numbers.items():
        row.cells[f"edit {group}"] = spread_mean(n.retrieval if n is not None else None)
        if n is not None and n.cases:
            row.counts[f"edit {group}"] = round(n.cases / max(n.retrieval.n, 1))
    row.readings.append(
        f"editing one object ({edit}, {banks[0]} bank): retrieval {rate_or_percent(row, 'edit shared')} when the "
        f"two objects share the value, {rate_or_percent(row, 'edit different')} when they differ"
    )


def report_card(root: Path, results: dict[tuple[str, str], dict[str, LoadedResult]] | None = None) -> list[CardRow]:
    """Every row of the report card of a run folder."""
    results = loaded_results(root) if results is None else results
    return [card_row(dataset, label, group) for (dataset, label), group in results.items()]


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
    """A PNG embedded in the page (base64), so the page needs no other file."""
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def figure_html(path: Path, caption: str) -> str:
    """An embedded PNG with its caption."""
    return f"<figure>{image_tag(path)}<figcaption>{html.escape(caption)}</figcaption></figure>"


def table_html(rows: list[tuple[str, ...]] | list[list[str]]) -> str:
    """A header row, then rows of cells, as an HTML table (every cell escaped)."""
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


# -- the card ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Column:
    """How the card shows one of its columns: the analysis it comes from, its unit and its header.

    ``unit``: ``rate`` (a share of counted cases: percent with its 95% interval and n), ``percent`` (a reference
    share without cases: chance, a floor, a fraction seen), ``r2`` or ``words``.
    """

    analysis: str
    unit: Literal["rate", "percent", "r2", "words"]
    header: str


#: Every column of the card, in the order of the paper's story.
COLUMNS = {
    "object probe": Column("probe", "rate", "object probe, %"),
    "random weights": Column("probe", "rate", "random weights, %"),
    "chance": Column("probe", "percent", "chance, %"),
    "bag of concepts": Column("probe", "percent", "bag of concepts, %"),
    "beyond bag": Column("probe", "words", "beyond bag"),
    "object-additive R²": Column("decompose", "r2", "object-additive R²"),
    "concept-additive R²": Column("decompose", "r2", "concept-additive R²"),
    "edit shared": Column("intervene", "rate", "edit shared, %"),
    "edit different": Column("intervene", "rate", "edit different, %"),
    "complexity": Column("complexity", "words", "complexity"),
    "f*": Column("complexity", "percent", "f*, % of objects seen"),
    "attribute swap": Column("crossmodal", "rate", "attribute swap, %"),
    "factorization R²": Column("geometry", "r2", "factorization R²"),
    "linear heads (unseen)": Column("geometry", "rate", "linear heads on unseen objects, %"),
}


def column_of(name: str) -> Column:
    """How the card shows a column (one it does not know: as words, under its name)."""
    return COLUMNS.get(name, Column("", "words", name))


def card_columns(rows: list[CardRow]) -> list[str]:
    """The columns any row has, in the order of :data:`COLUMNS` (unknown ones last)."""
    present = dict.fromkeys(c for r in rows for c in r.cells)
    order = list(COLUMNS)
    return sorted(present, key=lambda c: order.index(c) if c in order else len(order))


def card_cell_html(row: CardRow, column: str) -> str:
    """One card cell: a rate as percent with its 95% Wilson interval and n, a reference share in percent, R² with
    three decimals, words as they are; ``-`` where missing."""
    value = row.cells.get(column)
    unit = column_of(column).unit
    missing = value is None or (isinstance(value, float) and np.isnan(value))
    if missing or not isinstance(value, (float, int)) or unit == "words":
        return f"<td>{html.escape(cell_text(value))}</td>"
    if unit == "percent":
        return f"<td class='share'>{html.escape(percent(float(value)))}</td>"
    if unit == "r2":
        return f"<td class='r2'>{float(value):.3f}</td>"
    shown = row.rate(column)
    if shown is None:
        return f"<td class='rate'>{share_text(float(value))}<br><small class='ci'>n not recorded</small></td>"
    return (
        f"<td class='rate' data-n='{shown.n}' data-low='{shown.low:.6f}' data-high='{shown.high:.6f}'>"
        f"{share_text(shown.value)}<br><small class='ci'>{html.escape(bounds_text(shown))}<br>"
        f"n = {shown.n:,}</small></td>"
    )


def card_head_html(columns: list[str], lead: list[str]) -> str:
    """The card's two header rows: the step of the story each column answers (linked to its section), then the
    columns with their units."""
    groups: list[tuple[str, int]] = []
    for c in columns:
        analysis = column_of(c).analysis
        if groups and groups[-1][0] == analysis:
            groups[-1] = (analysis, groups[-1][1] + 1)
        else:
            groups.append((analysis, 1))
    steps = "".join(
        f"<th colspan='{n}'>" + (f"<a href='#{a}'>{html.escape(STORY[a])}</a>" if a in STORY else "") + "</th>"
        for a, n in groups
    )
    top = f"<tr><th colspan='{len(lead)}'></th>{steps}</tr>"
    names = "".join(f"<th>{html.escape(x)}</th>" for x in [*lead, *(column_of(c).header for c in columns)])
    return f"<thead>{top}<tr>{names}</tr></thead>"


def card_html(rows: list[CardRow], runs: list[str] | None = None) -> str:
    """The report card as a table (``runs``: a leading run column, one label per row, as ``compare`` shows it),
    then each row's readings."""
    columns = card_columns(rows)
    lead = ["run", "dataset", "embeddings"] if runs is not None else ["dataset", "embeddings"]
    body = []
    for i, r in enumerate(rows):
        first = [runs[i]] if runs is not None else []
        cells = "".join(f"<td>{html.escape(x)}</td>" for x in [*first, r.dataset, r.label])
        body.append(f"<tr>{cells}{''.join(card_cell_html(r, c) for c in columns)}</tr>")
    table = f"<table class='card'>{card_head_html(columns, lead)}<tbody>{''.join(body)}</tbody></table>"
    readings = "".join(
        f"<li><b>{html.escape(r.dataset)} / {html.escape(r.label)}</b><ul>"
        + "".join(f"<li>{html.escape(x)}</li>" for x in r.readings)
        + "</ul></li>"
        for r in rows
    )
    return table + CARD_NOTE + f"<ul class='readings'>{readings}</ul>"


CARD_NOTE = (
    "<p class='note'>Rates are in percent of the cases scored, each with its n (cases per seed; a mean over seeds "
    "is read with one seed's n) and its 95% Wilson score interval. Chance, the bag of concepts and f* are "
    "reference shares, without cases; R² is a coefficient of determination.</p>"
)


# -- the sections -----------------------------------------------------------------------------------------------
#: The analyses in the order of the paper's story, each with the step it answers.
STORY = {
    "probe": "recoverable",
    "decompose": "additive",
    "intervene": "editable",
    "complexity": "complexity",
    "crossmodal": "cross-modal",
    "geometry": "geometry",
}

#: What each analysis's figures show, by file stem (kept beside each analysis's plot code).
CAPTIONS: dict[str, dict[str, str]] = {
    "complexity": complexity_plot.CAPTIONS,
    "crossmodal": crossmodal_plot.CAPTIONS,
    "intervene": intervene_plot.CAPTIONS,
    "geometry": geometry_plot.CAPTIONS,
}


def caption(analysis: str, stem: str) -> str:
    """What one figure of an analysis shows (its file stem named where no caption was written)."""
    return CAPTIONS.get(analysis, {}).get(stem, f"{stem}: a figure of {analysis}")


def figures_in_order(analysis: str, folder: Path, suffix: str) -> list[Path]:
    """The figures of a folder in the order its analysis's captions tell them (unknown ones last, by name)."""
    order = list(CAPTIONS.get(analysis, {}))
    found = sorted(folder.glob(f"*.{suffix}"))
    return sorted(found, key=lambda p: order.index(p.stem) if p.stem in order else len(order))


def question(analysis: str) -> tuple[str, str]:
    """An analysis's title as its question and the rest (``"Is object information recoverable?"``, ``"Concept and
    object probes ..."``)."""
    title = get_analysis(analysis).title
    asked, mark, rest = title.partition("?")
    return (asked + mark, rest.strip()) if mark else (title, "")


def anchor(*parts: str) -> str:
    """An HTML id from names: letters, digits, ``-`` and ``_`` only."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", "-".join(parts)).strip("-")


@dataclass(frozen=True)
class Section:
    """One result folder's place in the report: its analysis, dataset and embeddings, the result read from it,
    and its anchor."""

    analysis: str
    dataset: str
    label: str
    result: LoadedResult

    @property
    def folder(self) -> Path:
        return self.result.path

    @property
    def id(self) -> str:
        return anchor(self.analysis, self.dataset, self.label)

    @property
    def title(self) -> str:
        return f"{question(self.analysis)[0]} {self.dataset} / {self.label}"


def story_sections(results: dict[tuple[str, str], dict[str, LoadedResult]]) -> list[Section]:
    """Every result folder as a section: by analysis in the order of the story (unknown analyses last), then
    by dataset and embedding folder."""
    order = list(STORY)
    sections = [Section(a, d, lab, r) for (d, lab), group in results.items() for a, r in group.items()]
    return sorted(sections, key=lambda s: (order.index(s.analysis) if s.analysis in order else len(order), s.id))


def section_html(section: Section, root: Path) -> str:
    """One result folder: its title in words, its path, its headline table, notes and captioned figures."""
    loaded = section.result
    analysis = get_analysis(loaded.analysis)
    parts = [
        f"<h3>{html.escape(section.title)}</h3>",
        f"<p class='path'>{html.escape(str(section.folder.relative_to(root)))}</p>",
        table_html(analysis.headline(loaded.view)),
    ]
    notes = analysis.notes(loaded.view)
    if notes:
        parts.append("<ul class='notes'>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    for png in figures_in_order(section.analysis, section.folder / "plots", "png"):
        parts.append(figure_html(png, caption(section.analysis, png.stem)))
    for page in figures_in_order(section.analysis, section.folder / "plots", "html"):
        link = f"<a href='{html.escape(str(page.relative_to(root)))}'>{html.escape(page.name)}</a>"
        parts.append(f"<p class='interactive'>Interactive (opens beside this page): {link}. ")
        parts.append(f"{html.escape(caption(section.analysis, page.stem))}</p>")
    return f"<section id='{section.id}' class='result' data-analysis='{section.analysis}'>{''.join(parts)}</section>"


def step_html(analysis: str, number: int, sections: list[Section], root: Path) -> str:
    """One step of the story: its heading, what the analysis does, and a section per result folder."""
    asked, rest = question(analysis)
    head = f"<h2>{number}. {html.escape(STORY.get(analysis, analysis).capitalize())}: {html.escape(asked)}</h2>"
    lead = f"<p class='lead'>{html.escape(rest)}</p>" if rest else ""
    body = "".join(section_html(s, root) for s in sections)
    return f"<section id='{anchor(analysis)}' class='step' data-analysis='{analysis}'>{head}{lead}{body}</section>"


def contents_html(steps: dict[str, list[Section]], layers: bool) -> str:
    """The table of contents: the card, the layer sweeps, each step of the story with its result folders, and the
    run's provenance, times and command."""
    items = ["<li><a href='#card'>Binding report card</a></li>"]
    if layers:
        items.append("<li><a href='#layers'>Layer sweeps</a></li>")
    for number, (analysis, sections) in enumerate(steps.items(), 1):
        sub = "".join(
            f"<li><a href='#{s.id}'>{html.escape(s.dataset)} / {html.escape(s.label)}</a></li>" for s in sections
        )
        name = STORY.get(analysis, analysis).capitalize()
        items.append(f"<li><a href='#{anchor(analysis)}'>{number}. {html.escape(name)}</a><ul>{sub}</ul></li>")
    items += [
        "<li><a href='#provenance'>Provenance</a></li>",
        "<li><a href='#time'>Time per step</a></li>",
        "<li><a href='#reproduce'>Reproduce</a></li>",
    ]
    return f"<nav id='contents'><h2>Contents</h2><ul>{''.join(items)}</ul></nav>"


STYLE = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:1em auto;padding:0 1em;color:#222;line-height:1.4}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}td,th{border:1px solid #ccc;padding:.2em .5em}
th{background:#f0f0f0}th a{color:inherit}img{max-width:100%}figure{margin:1em 0}
table.card{display:block;overflow-x:auto;font-size:.85em}
figcaption,.interactive{font-size:.9em;color:#444;max-width:60em}
section.step{border-top:2px solid #bbb;margin-top:1.5em}
section.result{border-top:1px solid #ddd;margin-top:1em}.path{font-size:.8em;color:#777;margin-top:-.6em}
.lead{color:#444}td.rate,td.share,td.r2{text-align:right;white-space:nowrap}small.ci{color:#666}
.note{font-size:.85em;color:#555}nav#contents ul{margin:.2em 0}nav#contents ul ul{display:inline;padding:0}
nav#contents ul ul li{display:inline;margin-left:.6em}
.readings li{margin:.2em 0}pre{background:#f6f6f6;padding:.5em;overflow-x:auto}
"""

DEPTH_CAPTION = (
    "Each headline number of the card against the layer the embeddings were taken from: rates as shares of "
    "their cases (0 to 1), R² as is."
)


def depth_html(rows: list[CardRow], root: Path) -> list[str]:
    """A figure per layer sweep (a model embedded at several layers): the headline metrics against depth."""
    parts = []
    for key, series in depth_series(rows).items():
        figure = depth_figure(key, series, root / "report" / f"depth-{key[0]}-{key[1]}.png")
        if figure is not None:
            title = f"Layer sweep: {html.escape(key[0])} / {html.escape(key[1])}"
            parts.append(f"<h3>{title}</h3>{figure_html(figure, DEPTH_CAPTION)}")
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
    results = loaded_results(root)
    rows = report_card(root, results)
    steps: dict[str, list[Section]] = {}
    for section in story_sections(results):
        steps.setdefault(section.analysis, []).append(section)
    depth = depth_html(rows, root)
    name = manifest.get("run") or root.name
    times = "\n".join(time_table(manifest.get("steps") or [])) or "not recorded"
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>bindscope: {html.escape(name)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>bindscope run {html.escape(name)}</h1>",
        contents_html(steps, bool(depth)),
        "<section id='card'><h2>Binding report card</h2>",
        card_html(rows) if rows else "<p>No results yet.</p>",
        "</section>",
        *(["<section id='layers'><h2>Layer sweeps</h2>", *depth, "</section>"] if depth else []),
        *(step_html(a, i, sections, root) for i, (a, sections) in enumerate(steps.items(), 1)),
        "<section id='provenance'><h2>Provenance</h2>",
        f"<pre>{html.escape(json.dumps({k: manifest.get(k) for k in PROVENANCE}, indent=2))}</pre></section>",
        "<section id='time'><h2>Time per step</h2>",
        f"<pre>{html.escape(times)}</pre></section>",
        "<section id='reproduce'><h2>Reproduce</h2>",
        f"<pre>bindscope run {html.escape(str(config_path))} --out {html.escape(str(root))}</pre></section>",
        "</body></html>",
    ]
    out = root / REPORT
    with atomic_file(out, "w") as fh:
        fh.write("\n".join(parts))
    return out
