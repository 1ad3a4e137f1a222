"""Finished complexity fits are kept per (family, fraction, seed): a rerun with more approximators,
fractions or seeds fits only the new models, and its results equal a fresh run's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bindscope.analyses.complexity import ComplexitySettings, complexity_sweep, resolve_budget
from bindscope.analyses.complexity import units as units_module
from bindscope.core.executors import keeping_units
from bindscope.estimators.probes import ProbeSet, soft_targets
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.planted import planted_embeddings

SPACE = ConceptSpace.from_dict({"a": [f"a{i}" for i in range(5)], "b": [f"b{i}" for i in range(4)]})
BUDGET = resolve_budget("cpu", sweeps=30, epochs=30, eval_every=10, max_train_scenes=300, max_eval_scenes=200)
KEYS = ["variant", "group", "metric", "seed", "fraction", "checkpoint"]


@pytest.fixture(scope="module")
def data() -> tuple[SceneSet, np.ndarray, ProbeSet]:
    scenes = SceneSet.enumerate(SPACE, 2)
    y = planted_embeddings(scenes, "mult_within_object", dim=12, noise=0.05, seed=0)
    probes = ProbeSet("fast").fit(y, soft_targets(scenes))
    return scenes, y, probes


def _settings(**kw) -> ComplexitySettings:
    base = dict(approximators=("additive", "mult_within_object"), hidden=(8,), fractions=(0.5, 0.8), seeds=(0,))
    return ComplexitySettings(**{"second_fit": False, **base, **kw}, budget=BUDGET)


@pytest.fixture
def fitted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float, int]]:
    """Every model the test fits, as (family, fraction, seed), in order."""
    fitted: list[tuple[str, float, int]] = []
    real = units_module.fit_models

    def fit(settings, family, layout, data, members, *args, **kwargs):
        fitted.extend((family.label, p.fraction, p.seed) for p in members)
        return real(settings, family, layout, data, members, *args, **kwargs)

    monkeypatch.setattr(units_module, "fit_models", fit)
    return fitted


def _sorted(table: pd.DataFrame) -> pd.DataFrame:
    return table.sort_values(KEYS).reset_index(drop=True)


def test_growing_the_lists_fits_only_the_new_models(
    data: tuple[SceneSet, np.ndarray, ProbeSet], tmp_path: Path, fitted: list
) -> None:
    scenes, y, probes = data
    steps = [
        ({}, {(f, fr, 0) for f in ("additive", "mult_within_object") for fr in (0.5, 0.8)}),
        ({"approximators": ("additive", "mult_within_object", "mlp")}, {("mlp(8)", fr, 0) for fr in (0.5, 0.8)}),
        (
            {"approximators": ("additive", "mult_within_object", "mlp"), "seeds": (0, 1)},
            {(f, fr, 1) for f in ("additive", "mult_within_object", "mlp(8)") for fr in (0.5, 0.8)},
        ),
        (  # a fraction below the others: their next blocks (description length) stay as they were
            {"approximators": ("additive", "mult_within_object", "mlp"), "seeds": (0, 1), "fractions": (0.3, 0.5, 0.8)},
            {(f, 0.3, s) for f in ("additive", "mult_within_object", "mlp(8)") for s in (0, 1)},
        ),
    ]
    for i, (changes, new) in enumerate(steps):
        fitted.clear()
        with keeping_units(tmp_path / ".out.units" / f"run{i}"):  # each settings' own folder, as the registry does
            grown = complexity_sweep(y, scenes, probes, _settings(**changes))
        assert sorted(fitted) == sorted(new), f"step {i}"
    fitted.clear()
    fresh = complexity_sweep(y, scenes, probes, _settings(**steps[-1][0]))  # no store: every model fitted
    assert len(fitted) == 18
    a, b = _sorted(grown.table), _sorted(fresh.table)
    pd.testing.assert_frame_equal(a.drop(columns="value"), b.drop(columns="value"))
    np.testing.assert_allclose(a.value.to_numpy(float), b.value.to_numpy(float), rtol=1e-4, atol=1e-5)
    assert len(grown.history) == len(fresh.history)


def _sweep(data: tuple[SceneSet, np.ndarray, ProbeSet], units: Path, y: np.ndarray | None = None, **changes):
    """One additive sweep keeping its units in ``units`` (as the registry does, one folder per run)."""
    scenes, own, probes = data
    with keeping_units(units):
        settings = _settings(approximators=("additive",), **changes)
        return complexity_sweep(own if y is None else y, scenes, probes, settings)


def test_a_new_top_fraction_refits_the_one_below_whose_next_block_it_changes(
    data: tuple[SceneSet, np.ndarray, ProbeSet], tmp_path: Path, fitted: list
) -> None:
    units = tmp_path / ".out.units"
    _sweep(data, units / "a")
    fitted.clear()
    _sweep(data, units / "b", fractions=(0.5, 0.8, 0.9))
    assert sorted(fitted) == [("additive", 0.8, 0), ("additive", 0.9, 0)]
    _sweep(data, units / "c", description_length=False)
    fitted.clear()  # without description lengths no fit depends on the next fraction
    _sweep(data, units / "d", fractions=(0.5, 0.8, 0.9), description_length=False)
    assert fitted == [("additive", 0.9, 0)]


def test_other_data_or_settings_fit_afresh(
    data: tuple[SceneSet, np.ndarray, ProbeSet], tmp_path: Path, fitted: list
) -> None:
    units = tmp_path / ".out.units"
    _sweep(data, units / "a")
    for i, changes in enumerate([{"y": data[1] + 0.01}, {"validation_fraction": 0.2}, {"object_order": "random"}]):
        fitted.clear()
        _sweep(data, units / f"b{i}", **changes)
        assert len(fitted) == 2, i


def test_a_rerun_into_a_finished_result_reuses_its_fits(run_cli, tmp_path: Path, clevr_dir: Path) -> None:
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import import_embeddings

    y = planted_embeddings(load_dataset(clevr_dir).scenes, "additive_concepts_objects", dim=12, noise=0.05, seed=0)
    np.save(tmp_path / "y.npy", y)
    import_embeddings(clevr_dir, tmp_path / "y.npy", name="planted", modality="image", out=tmp_path / "emb")
    out = tmp_path / "cx"
    quick = ["--fractions", "0.5,0.9", "--seeds", "0", "--sweeps", "20", "--no-second-fit", "--quiet"]
    first = run_cli("complexity", tmp_path / "emb", "--out", out, "--approximators", "additive", *quick)
    assert first.returncode == 0, first.stderr
    assert len(list((out / "fits").glob("*.json"))) == 2
    again = run_cli(
        "complexity", tmp_path / "emb", "--out", out, "--approximators", "additive,mult", "--overwrite", *quick
    )
    assert again.returncode == 0, again.stderr
    assert "fits: 2 fitted, 2 reused" in again.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["fits"] == {"fitted": 2, "reused": 2} and len(list((out / "fits").glob("*.json"))) == 4
