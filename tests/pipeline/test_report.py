"""The report's parts without a run: rates with their n and 95% Wilson interval, the card's cells, the complexity
verdict in words, a caption for every figure an analysis writes, and MDS labels that never overlap.

The report of a real run, read in headless Chromium, is tested in test_run.py (it shares that module's run)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bindscope.analyses import get_analysis, list_analyses
from bindscope.analyses.complexity.present import card_words
from bindscope.analyses.complexity.summary import ComplexitySummary, Spread, VerdictNumbers
from bindscope.analyses.geometry.labels import label_points_3d, place_labels
from bindscope.estimators.intervals import rate, rate_text, successes, wilson_interval
from bindscope.estimators.verdicts import Measured, Verdict, judge, skipped_verdict
from bindscope.pipeline.card import CardRow, Cell, analyses_in_order, card_html, card_table, cell_html
from bindscope.pipeline.steps import Skip

ANALYSES = Path(__file__).resolve().parents[2] / "src" / "bindscope" / "analyses"


def test_the_wilson_interval() -> None:
    low, high = wilson_interval(1.0, 14)  # 14 edits all right: far from a sure 100%
    assert low == pytest.approx(0.7847, abs=1e-4) and high == pytest.approx(1.0)
    z = 1.959964  # the closed form, at 30 of 100
    p, n = 0.3, 100
    centre, half = (
        (p + z**2 / (2 * n)) / (1 + z**2 / n),
        z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / (1 + z**2 / n),
    )
    assert wilson_interval(p, n) == pytest.approx((centre - half, centre + half), abs=1e-6)
    assert successes(0.666, 3) == 2 and successes(1.2, 5) == 5 and successes(-0.1, 5) == 0
    wide, narrow = rate(0.9, 20), rate(0.9, 2000)
    assert wide is not None and narrow is not None and wide.high - wide.low > 5 * (narrow.high - narrow.low)
    assert (
        rate(None, 10) is None and rate(0.5, 0) is None and rate(float("nan"), 10) is None and rate(0.5, None) is None
    )


def test_a_rate_in_words() -> None:
    assert rate_text(rate(1.0, 14)) == "100.0% (95% CI 78.5–100.0%, n = 14)"
    assert rate_text(rate(0.5, 1200)) == "50.0% (95% CI 47.2–52.8%, n = 1,200)"
    assert rate_text(None) == "-"


def cell(analysis: str, key: str, verdict: Verdict) -> Cell:
    (column,) = [c for c in get_analysis(analysis).columns if c.key == key]
    return Cell(analysis, column, verdict)


def test_card_cells_show_the_number_its_floors_and_the_verdict() -> None:
    probe = judge(Measured([0.95, 0.95, 0.95], n_cases=159, chance=0.0056, rand=[0.6] * 3), Measured([0.55] * 3))
    bag = judge(Measured([0.55] * 3, n_cases=159, chance=0.0056), Measured([0.55] * 3))
    (key,) = [c.key for c in get_analysis("probe").columns]
    row = CardRow("clevr", "m-text", cells={key: cell("probe", key, probe)})
    shown = cell_html(row.cells[key])
    assert "95.0%" in shown and "95% CI 90.4–97.4%" in shown and "n = 159" in shown and "data-n='159'" in shown
    assert "bag of concepts 55.0%, +rand 60.0%, chance 0.6%" in shown and "data-verdict='binds'" in shown
    assert "data-verdict='no_binding'" in cell_html(cell("probe", key, bag))
    assert cell_html(None) == "<td class='missing'>-</td>"
    gone = Skip("probe", "clevr", "bag", "too few scenes", "raise max_scenes")
    skipped = Cell("probe", row.cells[key].column, skipped_verdict(), gone)
    assert "skipped" in cell_html(skipped) and "too few scenes" in cell_html(skipped)
    page = card_html([row, CardRow("clevr", "bag", cells={key: skipped})])
    heads = re.findall(r"<th>([^<]*)</th>", page)
    assert heads[:3] == ["dataset", "embeddings", "object probe, %"]
    assert re.findall(r"<a href='#(\w+)'>", page) == ["probe"]  # each column under its step of the story
    assert "objects recoverable beyond a bag of concepts: binds" in page and "to run it: raise max_scenes" in page
    table = card_table([row])
    assert {"n_cases", "ci_low", "ci_high", "verdict", "bag", "rand", "chance"} <= set(table.columns)
    assert table.loc[0, "verdict"] == "binds" and table.loc[0, "n_cases"] == 159


def verdict(simplest: str | None, f_star: float | None, **kw: object) -> ComplexitySummary:
    numbers = {
        "simplest_generalising": simplest,
        "f_star": f_star,
        "reliable": True,
        "unconverged": {},
        "decisive_fractions": [0.2, 0.5],
        "undetermined": {},
        "reading": "",
    }
    curve = {"0.2": Spread(mean=0.5, std=None, n=1), "0.5": Spread(mean=0.5, std=None, n=1)}
    return ComplexitySummary.model_construct(
        verdict=VerdictNumbers.model_construct(**(numbers | kw)), approximators={}, in_distribution=curve
    )


def test_the_complexity_verdict_in_words() -> None:
    assert card_words(verdict("mult_within_object", 0.2)) == "low: mult within object generalises from 20% seen"
    assert card_words(verdict("mlp(1024)", 0.5)).startswith("high: mlp(1024) generalises from 50% seen")
    assert card_words(verdict(None, None)) == "high: no family up to 50% seen"
    assert card_words(verdict(None, None, decisive_fractions=[0.2])).startswith("cannot tell: no family up to 50%")
    assert card_words(verdict(None, None, reliable=False)).startswith("unknown: no family up to 50% seen")
    assert card_words(verdict(None, None, undetermined={"mlp(1024)": "memorises"})).startswith(
        "high but for mlp(1024) (left open)"
    )
    assert "unreliable" in card_words(verdict("additive", 0.2, reliable=False))


def test_every_figure_an_analysis_writes_has_a_caption() -> None:
    """A figure file named in an analysis's code (``"<stem>.png"`` / ``.html``) must have a caption beside its
    plot code: a new figure without one fails here."""
    written: dict[str, set[str]] = {}
    for source in ANALYSES.glob("*/*.py"):
        stems = set(re.findall(r"[\"'](\w+)\.(?:png|html)[\"']", source.read_text()))
        if stems:
            written.setdefault(source.parent.name, set()).update(stems)
    assert {"complexity", "crossmodal", "intervene", "geometry"} <= set(written)
    for analysis, stems in written.items():
        captions = get_analysis(analysis).captions
        assert stems <= set(captions), (analysis, stems - set(captions))
    for name in list_analyses():
        assert all(len(c.split()) >= 8 and c.endswith(".") for c in get_analysis(name).captions.values())
    assert analyses_in_order() == ["probe", "decompose", "intervene", "complexity", "crossmodal", "geometry"]


def boxes_overlap(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])


def test_labels_of_crowded_points_do_not_overlap() -> None:
    rng = np.random.default_rng(0)
    anchors = rng.uniform(0, 40, size=(30, 2))  # 30 labels for points inside a 40-pixel square
    sizes = np.column_stack([rng.uniform(10, 45, 30), np.full(30, 9.0)])
    boxes = place_labels(anchors, sizes, marker=3.0)
    assert np.allclose(boxes[:, 2:] - boxes[:, :2], sizes)
    for a, b in itertools.combinations(boxes, 2):
        assert not boxes_overlap(a, b)
    for box in boxes:  # no label covers a point
        inside = (
            (anchors[:, 0] > box[0]) & (anchors[:, 0] < box[2]) & (anchors[:, 1] > box[1]) & (anchors[:, 1] < box[3])
        )
        assert not inside.any()
    assert np.array_equal(boxes, place_labels(anchors, sizes, marker=3.0))  # deterministic
    naive = np.column_stack([anchors, anchors + sizes])  # what labels at their points would do
    assert any(boxes_overlap(a, b) for a, b in itertools.combinations(naive, 2))


def test_the_mds_labels_as_drawn_do_not_overlap() -> None:
    from bindscope.core.figures import pyplot

    rng = np.random.default_rng(1)
    labels = ["B", "C", "R", "S", "BC", "BS", "RC", "RS", "BCRS", "BSRC", "BCRC", "BSRS", "B+C", "R+S", "BC + RS"]
    points = pd.DataFrame(rng.normal(scale=0.01, size=(len(labels), 3)), columns=["x", "y", "z"]).assign(label=labels)
    plt = pyplot()
    fig = plt.figure(figsize=(7, 6))
    ax = fig.add_subplot(projection="3d")
    ax.scatter(points.x, points.y, points.z)
    ax.set_xlim(-1, 1), ax.set_ylim(-1, 1), ax.set_zlim(-1, 1)  # the points crowd the middle
    fig.tight_layout()
    texts = label_points_3d(fig, ax, points, ["k"] * len(labels))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    extents = [t.get_window_extent(renderer) for t in texts]
    plt.close(fig)
    assert [t.get_text() for t in texts] == labels
    for a, b in itertools.combinations(extents, 2):
        assert not a.overlaps(b), (a, b)


def test_a_model_equal_to_its_rand_control_is_flagged_on_the_card(tmp_path: Path) -> None:
    from bindscope.analyses import AnalysisInputs, ProbeSettings, load_result, run_analysis
    from bindscope.pipeline.card import card_row
    from bindscope.space.concepts import ConceptSpace, SceneSet
    from bindscope.space.planted import planted_embeddings

    space = ConceptSpace.from_dict({"color": ["r", "g", "b"], "shape": ["x", "y", "z"]})
    scenes = SceneSet.enumerate(space, 2)
    y = planted_embeddings(scenes, "object_additive", dim=16, seed=0)
    other = planted_embeddings(scenes, "random", dim=16, seed=1)
    settings = ProbeSettings(optimizer="lbfgs", max_iter=50, seeds=(0,))
    rows = {}
    for name, control in (("same", y.copy()), ("nearly", y + 1e-6), ("other", other)):
        out = run_analysis("probe", AnalysisInputs(y, scenes, control=control), tmp_path / name, settings).path
        rows[name] = card_row("d", name, {"probe": load_result(out)})
    assert rows["same"].flags and "equal their +rand control" in rows["same"].flags[0]
    assert rows["nearly"].flags and rows["same"].flags[0] in rows["same"].readings
    assert not rows["other"].flags
    assert "class='flagged'" in card_html([rows["same"]]) and "class='flagged'" not in card_html([rows["other"]])


def test_a_wide_card_is_cut_into_tables_at_the_story_steps() -> None:
    from bindscope.pipeline.card import TABLE_COLUMNS, card_parts, columns_in_order

    columns = columns_in_order()
    parts = card_parts(columns)
    assert [c for part in parts for c in part] == columns  # every column once, in the story's order
    assert len(parts) > 1 and all(0 < len(part) <= TABLE_COLUMNS for part in parts)
    for part, following in itertools.pairwise(parts):
        assert part[-1][0] != following[0][0]  # cut between two steps, never inside one
    # a step with more columns than a table holds is cut inside it, and only there
    (column,) = get_analysis("probe").columns
    many = [("probe", column)] * 5 + [("decompose", column)] * 2
    assert [len(p) for p in card_parts(many, most=3)] == [3, 2, 2]
    assert [len(p) for p in card_parts(many, most=8)] == [7]


def full_card_rows(count: int) -> list[CardRow]:
    """``count`` rows with every declared card column, each cell as wide as a real one (a rate with its interval
    and n, three floors, a verdict), and one row of skipped cells with their reasons."""
    from bindscope.pipeline.card import columns_in_order

    rows = []
    for i in range(count):
        row = CardRow("scratch-small-f0.8", f"model-{i}-with-a-long-name-text")
        for analysis, column in columns_in_order():
            rand = [0.0000006] * 3 if column.unit != "r2" else [0.1] * 3
            number = Measured([0.913, 0.902, 0.931], n_cases=1_234, chance=0.0000006, rand=rand)
            row.cells[column.key] = Cell(analysis, column, judge(number, Measured([0.551] * 3)))
        rows.append(row)
    skip = Skip("crossmodal", "text", "minilm", "model minilm is a text model (st: no image tower)", "")
    skipped = CardRow("text", "minilm")
    for analysis, column in columns_in_order():
        skipped.cells[column.key] = Cell(analysis, column, skipped_verdict(), skip)
    return [*rows, skipped]


def test_a_card_with_every_column_fits_a_1400px_window(tmp_path: Path) -> None:
    from bindscope.pipeline.report import STYLE
    from browser import chromium, layout

    rows = full_card_rows(3)
    page = tmp_path / "card.html"
    for name, card in (("report", card_html(rows)), ("compare", card_html(rows, runs=["run-a", "run-b"] * 2))):
        page.write_text(
            f"<!doctype html><html><head><meta charset='utf-8'><style>{STYLE}</style></head><body>"
            f"<section id='card'>{card}</section></body></html>"
        )
        with chromium(tmp_path / f"chrome-{name}", 1400, 900) as driver:
            fit = layout(driver, page)
        assert len(fit["cards"]) > 1, fit  # the card is cut into tables
        assert fit["page"] <= fit["visible"] <= fit["window"] == 1400, (name, fit)
        assert all(box["content"] <= box["shown"] for box in fit["cards"]), (name, fit)
        assert not fit["scrolling"], (name, fit)
