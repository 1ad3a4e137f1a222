"""The registered ``geometry`` analysis on planted scene embeddings: known answers, files, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bindscope.analyses.geometry import GeometrySettings
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.analyses.registry import get_analysis, run_analysis
from bindscope.core.errors import BindscopeError
from bindscope.space.concepts import ConceptSpace, SceneSet

DIM = 48
FAST = {"fractions": (0.3, 0.6), "seeds": (0, 1), "labelled": (2, 8)}


def planted_space() -> ConceptSpace:
    sizes = {"size": ["small", "medium", "large"], "color": [f"c{i}" for i in range(6)]}
    return ConceptSpace.from_dict({**sizes, "shape": [f"s{i}" for i in range(5)]}, ordinal=["size"])


def planted_scenes(kind: str, seed: int = 0) -> AnalysisInputs:
    """2-object scenes whose embedding is first object + 0.8 x second object + noise; objects factorised
    in orthogonal subspaces (size along one axis, in rank order), or random vectors."""
    space = planted_space()
    rng = np.random.default_rng(seed)
    objects = space.all_objects()
    if kind == "factorised":
        basis = np.linalg.qr(rng.normal(size=(DIM, DIM)))[0]
        color = rng.normal(size=(6, 5)) @ basis[:, 1:6].T
        shape = rng.normal(size=(5, 4)) @ basis[:, 6:10].T
        x = 2.0 * objects[:, :1] * basis[:, 0] + color[objects[:, 1]] + shape[objects[:, 2]]
    else:
        x = rng.normal(size=(space.num_objects, DIM))
    x = x + 0.02 * rng.normal(size=x.shape)
    scenes = SceneSet.enumerate(space, 2)
    ids = scenes.object_ids()
    y = x[ids[:, 0]] + 0.8 * x[ids[:, 1]] + 0.01 * rng.normal(size=(len(scenes), DIM))
    return AnalysisInputs(y.astype(np.float32), scenes)


@pytest.fixture(scope="module")
def factorised(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("geometry") / "factorised"
    settings = GeometrySettings(attribute="color", noun="shape", **FAST)
    return run_analysis("geometry", planted_scenes("factorised"), out, settings)


def test_factorised_objects_have_the_planted_geometry(factorised) -> None:
    s = factorised.summary
    assert s["source"] == "pos-avg" and len(s["positions"]) == 2
    for p in s["positions"]:
        assert p["r2"] > 0.99 and p["held_out"]["0.3"]["r2_raw"]["mean"] > 0.98
        assert p["held_out"]["0.6"]["heads"]["object"]["mean"] > 0.95  # every concept right on unseen objects
        assert p["held_out"]["0.3"]["heads"]["object"]["mean"] > 0.7  # 27 seen objects for 90
        assert p["orthogonality"]["across"] < 0.1 and p["orthogonality"]["within"] > 0.1
        assert min(a["min_angle"] for a in p["orthogonality"]["angles"].values()) > 70  # noise tilts them a little
        assert p["concepts"]["color"]["numerical"] == 5 and p["concepts"]["shape"]["numerical"] == 4
        assert p["concepts"]["size"]["effective"] < 1.1  # one axis
        extremes = p["rank_axes"]["size"]["extremes"]
        assert min(int(n) for n in extremes) == 2 and extremes["2"]["spearman"]["mean"] > 0.8  # other concepts in it
        # the extremes' means (all 45 labelled): the other concepts average out, the order is perfect; Spearman
        # is at its ceiling below 1 (three tied groups of ranks)
        assert extremes["45"]["pairwise"]["mean"] > 0.99
        assert extremes["45"]["spearman"]["mean"] > 0.99 * extremes["45"]["spearman_ceiling"]["mean"]
        assert 0.9 < extremes["45"]["spearman_ceiling"]["mean"] < 0.96
    assert s["concepts"]["size"]["ordinal"] and not s["concepts"]["color"]["ordinal"]
    assert s["chance"]["object"] == pytest.approx(1 / 90)
    assert s["mds"]["composites"] == 10 and s["mds"]["points"] == 28 and s["mds"]["normalized_stress"] < 0.1


def test_random_objects_do_not_factorize_or_generalise(tmp_path: Path) -> None:
    settings = GeometrySettings(attribute="color", noun="shape", **FAST)
    s = run_analysis("geometry", planted_scenes("random"), tmp_path / "r", settings).summary
    for p in s["positions"]:
        assert p["held_out"]["0.3"]["r2_raw"]["mean"] < 0.0  # reported as is: worse than the training mean
        assert p["held_out"]["0.3"]["heads"]["object"]["mean"] < 0.1
        assert abs(p["rank_axes"]["size"]["least_squares"]["45"]["spearman"]["mean"]) < 0.4


def test_the_result_folder(factorised) -> None:
    folder = factorised.path
    assert {p.name for p in (folder / "plots").iterdir()} == {
        "factorization.png", "cosines.png", "spectra.png", "generalization.png", "rank_axes.png", "mds.png",
        "mds.html",
    }  # fmt: skip
    html = (folder / "plots" / "mds.html").read_text()
    assert '<div id="mds"' in html and "BCRS" in html and "plotly" in html
    quad = factorised.summary["mds"]["quad"]
    assert f"MDS of B = {quad[0]}, C = {quad[1]}, R = {quad[2]}, S = {quad[3]}" in html  # the letters explained
    points = pd.read_parquet(folder / "mds_points.parquet")
    assert set(points.category) == {"mean", "simple", "composite", "synthetic"} and len(points) == 28
    objects = pd.read_parquet(folder / "objects.parquet")
    assert len(objects) == 2 * 90 and set(objects.columns) >= {"position", "object", "size", "residual"}
    assert objects.residual.max() < 0.15
    spectra = pd.read_parquet(folder / "spectra.parquet")
    assert set(spectra.concept) == {"size", "color", "shape"}
    t = factorised.table
    assert set(t.columns[:7]) == {"analysis", "variant", "control", "group", "metric", "seed", "value"}
    assert {"position", "fraction", "labelled", "objects"} <= set(t.columns)
    assert set(t.variant) >= {"factorization", "raw", "whitened", "heads", "rank", "orthogonality", "mds"}
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["analysis"] == "geometry" and summary["settings"]["ordinal"] == []


def test_headline_and_notes(factorised) -> None:
    analysis = get_analysis("geometry")
    rows = analysis.headline(factorised.view)
    assert rows[0] == ("measure (± sd over 2 seeds)", "slot 1", "slot 2", "reference")
    labels = [r[0] for r in rows]
    assert labels.index("linear head object acc (f=0.6)") < labels.index("  color acc")
    assert "rank axis size Spearman, extremes" in labels and "MDS normalised stress" in labels
    notes = analysis.notes(factorised.view)
    assert notes[0].startswith("object vectors: position-averaged 2-object scenes (pos-avg); 90 objects")


def test_single_object_bank_and_ordinal_setting(tmp_path: Path) -> None:
    """Single-object embeddings as the bank (and as the scenes themselves), an ordinal concept named in the settings."""
    space = ConceptSpace.from_dict({"size": ["s", "m", "l", "xl"], "color": [f"c{i}" for i in range(8)]})
    rng = np.random.default_rng(1)
    ranks = space.all_objects()[:, 0]
    x = ranks[:, None] * rng.normal(size=DIM) + rng.normal(size=(8, DIM))[space.all_objects()[:, 1]]
    singles = (x + 0.05 * rng.normal(size=x.shape)).astype(np.float32)
    inputs = AnalysisInputs(singles, SceneSet.singles(space), singles=singles)
    settings = GeometrySettings(ordinal=("size",), **FAST)
    done = run_analysis("geometry", inputs, tmp_path / "s", settings)
    s = done.summary
    assert s["source"] == "single" and len(s["positions"]) == 1
    assert s["positions"][0]["rank_axes"]["size"]["extremes"]["2"]["spearman"]["mean"] > 0.9
    assert s["mds"]["composites"] == 0 and s["mds"]["points"] > 8
    notes = get_analysis("geometry").notes(done.view)
    assert any("0 composites (no 2-object scene embeddings given)" in n for n in notes)
    assert get_analysis("geometry").headline(done.view)[0] == ("measure (± sd over 2 seeds)", "objects", "reference")


def test_fractions_a_small_space_cannot_split_are_skipped_with_a_warning(tmp_path: Path) -> None:
    space = ConceptSpace.from_dict({"color": ["r", "g", "b"], "shape": ["x", "y"]})
    x = np.random.default_rng(0).normal(size=(6, 8)).astype(np.float32)
    inputs = AnalysisInputs(x, SceneSet.singles(space), singles=x)
    done = run_analysis("geometry", inputs, tmp_path / "f", GeometrySettings(fractions=(0.1, 0.5), seeds=(0,)))
    assert done.header.warnings == ["fractions 0.1 leave no seen or no unseen objects of 6; skipped"]
    assert list(done.summary["positions"][0]["held_out"]) == ["0.5"]
    notes = get_analysis("geometry").notes(done.view)
    assert any(n.startswith("rank axes: absent, no ordinal concept") for n in notes)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"ordinal": ("weight",)}, "ordinal concept 'weight' is not a concept; this space has size, color, shape"),
        ({"quad": ("c0", "s0", "c9", "s1"), "attribute": "color"}, "unknown value 'c9' for concept 'color'"),
        ({"fractions": (0.001,)}, r"no fraction of 0.001 splits 90 objects .* choose fractions in \[0.0111"),
        ({"attribute": "weight"}, "--attribute 'weight' is not a concept of this space"),
    ],
)
def test_bad_settings_are_refused(tmp_path: Path, settings: dict, message: str) -> None:
    with pytest.raises(BindscopeError, match=message):
        run_analysis("geometry", planted_scenes("random"), tmp_path / "x", GeometrySettings(**settings))
    assert not (tmp_path / "x").exists()


def test_settings_validation() -> None:
    with pytest.raises(BindscopeError, match="a rank axis needs at least 2 labelled objects"):
        GeometrySettings(labelled=(1, 8))
    with pytest.raises(BindscopeError, match="quad"):
        GeometrySettings(quad=("a", "b", "c"))  # type: ignore[arg-type]
    assert GeometrySettings(labelled=(32, 2, 8)).labelled == (2, 8, 32)


def test_without_object_vectors_the_error_says_what_to_give(tmp_path: Path) -> None:
    space = planted_space()
    scenes = SceneSet.sample(space, 3, 50)
    y = np.zeros((len(scenes), 4), dtype=np.float32)
    with pytest.raises(BindscopeError, match="geometry needs object vectors: give the single-object bank"):
        run_analysis("geometry", AnalysisInputs(y, scenes), tmp_path / "n")


def test_the_typed_summary_reads_folders_written_before_undetermined_was_counted(factorised, tmp_path: Path) -> None:
    from bindscope.analyses import load_result
    from bindscope.analyses.geometry import GeometrySummary

    assert isinstance(factorised.typed, GeometrySummary) and factorised.typed.numbers() == factorised.numbers
    summary = json.loads((factorised.path / "summary.json").read_text())
    for position in summary["positions"]:
        for node in position["held_out"].values():
            del node["undetermined"]
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "results.parquet").write_bytes((factorised.path / "results.parquet").read_bytes())
    older = load_result(tmp_path, "geometry")
    assert older.typed.positions[0].held_out["0.3"].undetermined == 0.0
    assert get_analysis("geometry").headline(older.view) == get_analysis("geometry").headline(factorised.view)
