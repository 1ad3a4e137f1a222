"""The binding report card, generic over the analyses: a row per embedding folder, a cell per card column.

Every cell is an analysis's stored :class:`~bindscope.estimators.verdicts.Verdict` (its number with n and 95%
interval or sd over seeds, its floors, its typed answer), rendered here with the words of
:mod:`bindscope.analyses.card`; the columns, their order and the steps of the story come from each analysis's
declaration (``columns``, ``order``, ``story``). An analysis that was skipped for an embedding folder is a cell
too, with its reason and fix; a model whose embeddings (nearly) equal its ``+rand`` control's is flagged.
"""

from __future__ import annotations

import html
import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bindscope.analyses import get_analysis, list_analyses, load_result
from bindscope.analyses.card import (
    ANSWER_WORDS,
    CardColumn,
    floor_text,
    sd_text,
    value_text,
    verdict_rate,
    verdict_words,
)
from bindscope.analyses.results import LoadedResult, read_header
from bindscope.estimators.intervals import bounds_text
from bindscope.estimators.verdicts import BAG, CHANCE, RAND, REASONS, Verdict, skipped_verdict
from bindscope.pipeline.steps import Skip

#: Relative distance (Frobenius) below which a model's embeddings count as equal to its ``+rand`` control's.
RAND_TOLERANCE = 1e-3

#: The most columns one table of the card holds (besides the rows' names): a card with more is cut into tables at
#: the story's steps, so that each fits a 1,400 px window without scrolling sideways.
TABLE_COLUMNS = 8


@dataclass(frozen=True)
class Cell:
    """One card cell: the analysis, the column it declares and its verdict (``skip``: why it did not run)."""

    analysis: str
    column: CardColumn
    verdict: Verdict
    skip: Skip | None = None


@dataclass
class CardRow:
    """One row of the card: an embedding folder (or a model's cross-modal pair), its cells in the order of the
    story, the analyses skipped for it, and flags (e.g. equal to its ``+rand`` control)."""

    dataset: str
    label: str
    cells: dict[str, Cell] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    family: str = "attribution"

    def value(self, column: str) -> float | None:
        """A column's number (None: missing or skipped)."""
        cell = self.cells.get(column)
        return None if cell is None else cell.verdict.value

    def verdict(self, column: str) -> Verdict | None:
        """A column's verdict (None: the row has no such column)."""
        cell = self.cells.get(column)
        return None if cell is None else cell.verdict

    @property
    def readings(self) -> list[str]:
        """One line per cell: its verdict in words, or why it was skipped and how to fix it; then the flags."""
        lines = []
        for cell in self.cells.values():
            if cell.skip is not None:
                fix = f"; to run it: {cell.skip.fix}" if cell.skip.fix else ""
                why = f"{cell.analysis} was skipped ({cell.skip.reason})"
                lines.append(f"{cell.column.question}: not measured, {why}{fix}")
            else:
                lines.append(verdict_words(cell.column, cell.verdict))
        return lines + self.flags


def analyses_in_order(analyses: Iterable[str] | None = None) -> list[str]:
    """The registered analyses (or those of ``analyses`` that are registered) in the order of the paper's story
    (their ``order``, then name). Naming them imports only those: a card of probe results loads no other
    analysis's libraries."""
    names = set(list_analyses()) if analyses is None else set(analyses) & set(list_analyses())
    return sorted(names, key=lambda a: (get_analysis(a).order, a))


def columns_in_order(analyses: Iterable[str] | None = None) -> list[tuple[str, CardColumn]]:
    """Every declared card column with its analysis (of ``analyses``, default every registered one), in the order
    of the story."""
    return [(a, c) for a in analyses_in_order(analyses) for c in get_analysis(a).columns]


def row_analyses(rows: Iterable[CardRow]) -> set[str]:
    """The analyses that have a cell (a verdict or a skip) in any of ``rows``."""
    return {cell.analysis for row in rows for cell in row.cells.values()}


def result_folders(root: Path) -> dict[tuple[str, str], dict[str, Path]]:
    """``(dataset, label) -> {analysis: folder}`` of every complete result folder of a run."""
    out: dict[tuple[str, str], dict[str, Path]] = {}
    for summary in sorted((root / "results").glob("*/*/*/summary.json")):
        folder = summary.parent
        if read_header(folder) is None:
            continue
        out.setdefault((folder.parent.parent.name, folder.parent.name), {})[folder.name] = folder
    return out


def loaded_results(root: Path) -> dict[tuple[str, str], dict[str, LoadedResult]]:
    """Every complete result folder of a run, read once: ``(dataset, label) -> {analysis: result}``."""
    return {key: {a: load_result(f) for a, f in group.items()} for key, group in result_folders(root).items()}


def card_row(
    dataset: str, label: str, results: dict[str, LoadedResult], skips: dict[str, Skip] | None = None
) -> CardRow:
    """The card row of one embedding folder's results (``skips``: the analyses skipped for it, by name)."""
    row = CardRow(dataset, label)
    for analysis, column in columns_in_order({*results, *(skips or {})}):
        loaded = results.get(analysis)
        skip = (skips or {}).get(analysis)
        if loaded is not None and loaded.typed is not None:
            verdict = loaded.typed.verdicts.get(column.key)
            if verdict is not None:
                row.cells[column.key] = Cell(analysis, column, verdict)
        elif skip is not None:
            row.cells[column.key] = Cell(analysis, column, skipped_verdict(), skip)
    row.flags += rand_flags(results)
    return row


def rand_flags(results: dict[str, LoadedResult]) -> list[str]:
    """A flag where a result was computed beside a ``+rand`` control its embeddings (nearly) equal."""
    for loaded in results.values():
        distance = getattr(loaded.typed, "rand_distance", None)
        if distance is not None and distance < RAND_TOLERANCE:
            return [
                f"warning: these embeddings equal their +rand control's (relative difference {distance:.1e}): the "
                "model's weights did not shape them; check that the model and its control were loaded as intended"
            ]
    return []


def report_card(
    root: Path,
    results: dict[tuple[str, str], dict[str, LoadedResult]] | None = None,
    skips: dict[tuple[str, str], dict[str, Skip]] | None = None,
) -> list[CardRow]:
    """Every row of the report card of a run folder (``skips``: analyses skipped per ``(dataset, label)``)."""
    results = loaded_results(root) if results is None else results
    skips = skips or {}
    keys = list(results) + [k for k in skips if k not in results]
    rows = [card_row(d, lab, results.get((d, lab), {}), skips.get((d, lab))) for d, lab in keys]
    for row in rows:
        row.family = dataset_family(root / "datasets" / row.dataset)
        other = [k for k, c in row.cells.items() if c.skip is not None and c.column.family not in (None, row.family)]
        for key in other:  # a skipped analysis has no cell in another family's columns (a relation swap on clevr)
            del row.cells[key]
    return rows


def dataset_family(folder: Path) -> str:
    """``relation``, ``count`` or ``attribution``, from a run's dataset folder's stored config (attribution
    where the folder or its manifest is missing: a row of imported embeddings names no family)."""
    try:
        spec = json.loads((folder / "manifest.json").read_text()).get("spec") or {}
    except (OSError, ValueError):
        return "attribution"
    return "relation" if spec.get("relations") else "count" if spec.get("counts") else "attribution"


# -- HTML -------------------------------------------------------------------------------------------------------
def cell_html(cell: Cell | None) -> str:
    """One card cell: the number (a rate with its 95% interval and n, R² with its sd over seeds), its floors, and
    the verdict; a skipped analysis with its reason; ``-`` where the row has no such column."""
    if cell is None:
        return "<td class='missing'>-</td>"
    v = cell.verdict
    if cell.skip is not None:
        return (
            f"<td class='skipped' data-verdict='{v.answer}' data-reason='skipped'>skipped<br>"
            f"<small class='why'>{html.escape(cell.skip.reason)}</small></td>"
        )
    attrs = f" data-verdict='{v.answer}' data-reason='{v.reason}'"
    if v.n_cases is not None and v.ci_low is not None and v.ci_high is not None:
        attrs += f" data-n='{v.n_cases}' data-low='{v.ci_low:.6f}' data-high='{v.ci_high:.6f}'"
    shown = "-" if v.value is None else value_text(v, cell.column.unit, interval=False)
    detail = spread_html(v, cell.column)
    floors = f"<small class='floors'>{html.escape(floor_text(v, cell.column.unit))}</small>"
    why = html.escape(REASONS[v.reason])
    answer = f"<span class='verdict {v.answer}' title='{why}'>{ANSWER_WORDS[v.answer]}</span>"
    return f"<td class='cell {cell.column.unit}'{attrs}>{html.escape(shown)}{detail}<br>{floors}<br>{answer}</td>"


def spread_html(v: Verdict, column: CardColumn) -> str:
    """Below a number: its 95% interval and n (a rate), or its sd over seeds (anything else)."""
    shown = verdict_rate(v)
    if shown is not None:
        return f"<br><small class='ci'>{bounds_text(shown)}<br>n = {shown.n:,}</small>"
    if v.sd is not None:
        return f"<br><small class='ci'>sd {html.escape(sd_text(v.sd, column.unit))} over {v.seeds} seeds</small>"
    return ""


def head_html(columns: list[tuple[str, CardColumn]], lead: list[str]) -> str:
    """A card table's two header rows: the step of the story each column answers (linked to its section), then the
    columns with their units."""
    groups = [(a, len(list(run))) for a, run in itertools.groupby(a for a, _ in columns)]
    steps = "".join(
        f"<th colspan='{n}'><a href='#{a}'>{html.escape(get_analysis(a).story or a)}</a></th>" for a, n in groups
    )
    top = f"<tr><th colspan='{len(lead)}'></th>{steps}</tr>"
    names = "".join(f"<th>{html.escape(x)}</th>" for x in [*lead, *(c.header for _, c in columns)])
    return f"<thead>{top}<tr>{names}</tr></thead>"


def card_parts(columns: list[tuple[str, CardColumn]], most: int = TABLE_COLUMNS) -> list[list[tuple[str, CardColumn]]]:
    """The card's columns cut into tables of at most ``most`` columns each, at a step of the story (an analysis's
    columns stay in one table, unless it alone has more than ``most``)."""
    parts: list[list[tuple[str, CardColumn]]] = [[]]
    for _, run in itertools.groupby(columns, key=lambda ac: ac[0]):
        step = list(run)
        for start in range(0, len(step), most):
            chunk = step[start : start + most]
            if parts[-1] and len(parts[-1]) + len(chunk) > most:
                parts.append([])
            parts[-1] += chunk
    return parts


def dataset_cell(row: CardRow) -> str:
    """A row's dataset, with its family below where it is not attribution (relation, count)."""
    family = f"<br><small class='family'>{row.family}</small>" if row.family != "attribution" else ""
    return f"<td>{html.escape(row.dataset)}{family}</td>"


def card_html(rows: list[CardRow], runs: list[str] | None = None) -> str:
    """The report card as tables of at most :data:`TABLE_COLUMNS` columns each, cut at the story's steps, each
    with the names of the rows that have a cell in it (``runs``: a leading run column, one label per row, as
    ``compare`` shows it); then each row's readings."""
    present = {k for r in rows for k in r.cells}
    parts = card_parts([(a, c) for a, c in columns_in_order(row_analyses(rows)) if c.key in present])
    lead = ["run", "dataset", "embeddings"] if runs is not None else ["dataset", "embeddings"]
    tables = []
    for i, columns in enumerate(parts, 1):
        body = []
        for j, r in enumerate(rows):
            if not any(c.key in r.cells for _, c in columns):
                continue  # a row with nothing in this table's columns (e.g. a cross-modal pair) is left out of it
            first = [runs[j]] if runs is not None else []
            names = "".join(f"<td>{html.escape(x)}</td>" for x in first) + dataset_cell(r)
            names += f"<td>{html.escape(r.label)}</td>"
            flag = " class='flagged'" if r.flags else ""
            body.append(f"<tr{flag}>{names}{''.join(cell_html(r.cells.get(c.key)) for _, c in columns)}</tr>")
        caption = f"<caption>part {i} of {len(parts)}</caption>" if len(parts) > 1 else ""
        table = f"<table class='card'>{caption}{head_html(columns, lead)}<tbody>{''.join(body)}</tbody></table>"
        tables.append(f"<div class='card-scroll'>{table}</div>")  # scrolls only where a window is narrower still
    readings = "".join(
        f"<li><b>{html.escape(r.dataset)} / {html.escape(r.label)}</b><ul>"
        + "".join(f"<li>{html.escape(x)}</li>" for x in r.readings)
        + "</ul></li>"
        for r in rows
    )
    return "".join(tables) + CARD_NOTE + f"<ul class='readings'>{readings}</ul>"


CARD_NOTE = (
    "<p class='note'>Each cell: the number (a rate in percent of the cases scored, with its 95% Wilson interval and "
    "n, the cases per seed: a mean over seeds is read with one seed's n; any other number with its sd over the "
    "seeds), its floors (an ideal bag of concepts: the same analysis on the counts of each scene's concept values, "
    "on a relation or count dataset a bag of roles, its objects and their places or counts, not which holds which; "
    "the same model with random weights, +rand; chance), and the verdict: <i>binds</i> only when it clears the "
    "largest floor by the margin on every seed, its interval above it; <i>undetermined</i> where seeds or settings "
    "that should not matter disagree, or where a bag of concepts reaches the metric's ceiling.</p>"
)


# -- a table ----------------------------------------------------------------------------------------------------
CARD_COLUMNS = (
    "dataset",
    "family",
    "embeddings",
    "analysis",
    "column",
    "unit",
    "value",
    "sd",
    "n_seeds",
    "n_cases",
    "ci_low",
    "ci_high",
    "verdict",
    "reason",
    "floor",
    "margin",
    "required",
    "bag",
    "rand",
    "chance",
    "scored_on",
    "alternatives",
    "skipped",
    "fix",
)


def card_records(row: CardRow) -> list[dict[str, Any]]:
    """One record per cell of a row, long format (:data:`CARD_COLUMNS`)."""
    out = []
    for key, cell in row.cells.items():
        v = cell.verdict
        out.append(
            {
                "dataset": row.dataset,
                "family": row.family,
                "embeddings": row.label,
                "analysis": cell.analysis,
                "column": key,
                "unit": cell.column.unit,
                "value": v.value,
                "sd": v.sd,
                "n_seeds": v.seeds,
                "n_cases": v.n_cases,
                "ci_low": v.ci_low,
                "ci_high": v.ci_high,
                "verdict": v.answer,
                "reason": v.reason,
                "floor": v.floor.name if v.floor else None,
                "margin": v.margin,
                "required": v.required,
                "bag": v.floor_value(BAG),
                "rand": v.floor_value(RAND),
                "chance": v.floor_value(CHANCE),
                "scored_on": v.scored_on,
                "alternatives": "; ".join(f"{a.setting}: {a.answer}" for a in v.alternatives) or None,
                "skipped": cell.skip.reason if cell.skip else None,
                "fix": cell.skip.fix if cell.skip else None,
            }
        )
    return out


def card_table(rows: list[CardRow], runs: list[str] | None = None) -> pd.DataFrame:
    """The card as a long table: a row per (embedding folder, column) (:data:`CARD_COLUMNS`; ``run`` first where
    ``runs`` labels the rows)."""
    records = []
    for i, r in enumerate(rows):
        for rec in card_records(r):
            records.append({"run": runs[i], **rec} if runs is not None else rec)
    columns = (["run"] if runs is not None else []) + list(CARD_COLUMNS)
    table = pd.DataFrame(records, columns=columns)
    return table.astype({"n_cases": "Int64", "n_seeds": "Int64"})
