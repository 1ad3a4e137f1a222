"""``bindscope report RUN_DIR``: one self-contained HTML page of a run (plots embedded, no network).

It reads like a paper's figure page: a table of contents with links; the binding report card
(:mod:`bindscope.pipeline.card`: a row per embedding folder, and per model for the cross-modal tests; a cell per
column each analysis declares, with its number, n and 95% interval or sd over seeds, its floors and its typed
verdict; the analyses skipped, with reason and fix), each row's readings below, the card as ``report/card.csv``;
the layer sweeps; then the steps of the paper's story in each analysis's declared order, each a section per
result folder titled in words, with its headline table, notes and captioned figures; the provenance of each
model, the time per step and the command that reproduces the run.
"""

from __future__ import annotations

import base64
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bindscope.analyses import get_analysis
from bindscope.analyses.card import verdict_lines
from bindscope.analyses.results import LoadedResult
from bindscope.core.display import display_path, display_values
from bindscope.core.errors import BindscopeError
from bindscope.core.figures import pyplot, save_figure
from bindscope.core.io import atomic_file, read_json
from bindscope.core.locks import writes
from bindscope.pipeline.card import (
    CardRow,
    analyses_in_order,
    card_html,
    card_table,
    columns_in_order,
    loaded_results,
    report_card,
    row_analyses,
)
from bindscope.pipeline.steps import Skip, skipped_steps, time_table

REPORT = "report.html"
CONFIG = "config.yaml"
PROVENANCE = ("bindscope_version", "created", "git", "seeds", "device", "datasets", "models")


LAYERED = re.compile(r"^(?P<base>.+)-L(?P<layer>-?\d+)$")
CARD_CSV = "report/card.csv"


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
    rows = [r for _, r in series]
    metrics = [c.key for _, c in columns_in_order(row_analyses(rows)) if any(r.value(c.key) is not None for r in rows)]
    if not metrics:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    layers = [layer for layer, _ in series]
    for m in metrics:
        values = [r.value(m) for _, r in series]
        ax.plot(layers, [np.nan if v is None else v for v in values], "o-", label=m)
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


# -- the sections -----------------------------------------------------------------------------------------------
def story(analysis: str) -> str:
    """The step of the paper's story an analysis answers (its declared ``story``; its name where it has none)."""
    try:
        return get_analysis(analysis).story or analysis
    except BindscopeError:  # a result of an analysis not registered here
        return analysis


def caption(analysis: str, stem: str) -> str:
    """What one figure of an analysis shows (its file stem named where the analysis wrote no caption)."""
    try:
        captions = get_analysis(analysis).captions
    except BindscopeError:
        captions = {}
    return captions.get(stem, f"{stem}: a figure of {analysis}")


def figures_in_order(analysis: str, folder: Path, suffix: str) -> list[Path]:
    """The figures of a folder in the order its analysis's captions tell them (unknown ones last, by name)."""
    try:
        order = list(get_analysis(analysis).captions)
    except BindscopeError:
        order = []
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
    sections = [Section(a, d, lab, r) for (d, lab), group in results.items() for a, r in group.items()]
    order = analyses_in_order({s.analysis for s in sections})
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
    verdicts = loaded.typed.verdicts if loaded.typed is not None else {}
    lines = verdict_lines(analysis.columns, verdicts)
    if lines:
        parts.append("<ul class='verdicts'>" + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul>")
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
    head = f"<h2>{number}. {html.escape(story(analysis).capitalize())}: {html.escape(asked)}</h2>"
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
        name = story(analysis).capitalize()
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
table.card{font-size:.85em;margin:.5em auto}span.verdict{white-space:nowrap}
table.card caption{font-size:.9em;color:#555;text-align:left}
/* the card (in tables of at most 8 columns, pipeline.card.TABLE_COLUMNS) may use the window's width beyond the
   1200px column (half of it: 600px), less 1.5em each side; its cells wrap, and only a window narrower than a
   table still scrolls it, inside this box */
div.card-scroll{overflow-x:auto;margin:0 min(0px,600px - 50vw + 1.5em)}
figcaption,.interactive{font-size:.9em;color:#444;max-width:60em}
section.step{border-top:2px solid #bbb;margin-top:1.5em}
section.result{border-top:1px solid #ddd;margin-top:1em}.path{font-size:.8em;color:#777;margin-top:-.6em}
.lead{color:#444}td.rate,td.share,td.r2{text-align:right}small.ci{color:#666}
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


def manifest_skips(manifest: dict[str, Any]) -> dict[tuple[str, str], dict[str, Skip]]:
    """The analyses a run skipped, per ``(dataset, embeddings)``, from its manifest's steps (with reason and fix)."""
    out: dict[tuple[str, str], dict[str, Skip]] = {}
    for skip in skipped_steps(manifest.get("steps") or []):
        out.setdefault((skip.dataset, skip.label), {})[skip.analysis] = skip
    return out


def skipped_html(manifest: dict[str, Any]) -> str:
    """Every step the run skipped, with its reason and fix (nothing where none was)."""
    skipped = [s for s in manifest.get("steps") or [] if s.get("status") == "skipped"]
    if not skipped:
        return ""
    items = "".join(
        f"<li><b>{html.escape(str(s.get('kind')))} {html.escape(str(s.get('name')))}</b>: skipped, "
        f"{html.escape(str(s.get('reason') or 'no reason recorded'))}"
        + (f"; to run it: {html.escape(str(s['fix']))}" if s.get("fix") else "")
        + "</li>"
        for s in skipped
    )
    return f"<div id='skipped'><h3>Skipped ({len(skipped)})</h3><ul class='skipped'>{items}</ul></div>"


def run_card(root: Path) -> list[CardRow]:
    """The report card of a run folder, its skipped analyses included (what ``bindscope run`` prints)."""
    manifest_path = root / "manifest.json"
    manifest = read_json(manifest_path, "run manifest") if manifest_path.is_file() else {}
    return report_card(root, None, manifest_skips(manifest))


@writes("root", what="run folder", in_place=True)
def write_report(root: str | Path) -> Path:
    """Write ``report.html`` into a run folder (also the last step of ``bindscope run``)."""
    root = Path(root)
    manifest_path = root / "manifest.json"
    config_path = root / CONFIG
    if not config_path.is_file():
        raise BindscopeError(f"{root} is not a run folder (no config.yaml); give the --out folder of bindscope run")
    manifest = read_json(manifest_path, "run manifest") if manifest_path.is_file() else {}
    manifest = display_values(manifest, root)  # the page names no absolute path (docs/reference/results.md)
    results = loaded_results(root)
    skips = manifest_skips(manifest)
    rows = report_card(root, results, skips)
    card = card_table(rows).to_csv(index=False)
    steps: dict[str, list[Section]] = {}
    for section in story_sections(results):
        steps.setdefault(section.analysis, []).append(section)
    depth = depth_html(rows, root)
    name = manifest.get("run") or root.name
    times = "\n".join(time_table(manifest.get("steps") or [])) or "not recorded"
    shown = display_path(root)  # from ~, or its last part: never the absolute path
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>bindscope: {html.escape(name)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>bindscope run {html.escape(name)}</h1>",
        contents_html(steps, bool(depth)),
        "<section id='card'><h2>Binding report card</h2>",
        card_html(rows) if rows else "<p>No results yet.</p>",
        skipped_html(manifest),
        f"<p class='note'>The card as a table: <a href='{CARD_CSV}'>{CARD_CSV}</a>.</p>",
        "</section>",
        *(["<section id='layers'><h2>Layer sweeps</h2>", *depth, "</section>"] if depth else []),
        *(step_html(a, i, sections, root) for i, (a, sections) in enumerate(steps.items(), 1)),
        "<section id='provenance'><h2>Provenance</h2>",
        f"<pre>{html.escape(json.dumps({k: manifest.get(k) for k in PROVENANCE}, indent=2, ensure_ascii=False))}</pre>",
        "</section>",
        "<section id='time'><h2>Time per step</h2>",
        f"<pre>{html.escape(times)}</pre></section>",
        "<section id='reproduce'><h2>Reproduce</h2>",
        f"<pre>bindscope run {html.escape(shown)}/{CONFIG} --out {html.escape(shown)}</pre></section>",
        "</body></html>",
    ]
    out = root / REPORT
    # both written in full before either replaces the old one: a full disk leaves the previous page and card
    with atomic_file(out, "w") as page, atomic_file(root / CARD_CSV, "w") as table:
        page.write("\n".join(parts))
        table.write(card)
        page.flush()
    return out
