"""The analysis contract: the registry, the common result header, and load_result's round trip and refusals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bindscope.analyses import (
    AnalysisInputs,
    ComplexitySettings,
    CrossmodalSettings,
    DecomposeSettings,
    GeometrySettings,
    InterveneSettings,
    ProbeSettings,
    get_analysis,
    list_analyses,
    load_result,
    resolve_budget,
    run_analysis,
    spread,
)
from bindscope.analyses.base import Analysis
from bindscope.analyses.registry import register
from bindscope.analyses.results import FORMAT_VERSION, HEADER_KEYS, content_key, schema_name, summary_schema
from bindscope.core.errors import BindscopeError
from bindscope.core.tidy import COMMON_COLUMNS, IDENTITY_COLUMNS, KEY_COLUMNS
from bindscope.data.presets import get_preset
from bindscope.space.planted import planted_embeddings

QUICK = {
    "probe": ProbeSettings(optimizer="lbfgs", seeds=(0, 1), max_iter=50),
    "decompose": DecomposeSettings(optimizer="lbfgs", seeds=(0,), max_iter=50),
    "complexity": ComplexitySettings(
        approximators=("additive",),
        fractions=(0.5, 0.9),
        seeds=(0,),
        budget=resolve_budget("cpu", epochs=5, eval_every=5),
        description_length=False,
    ),
    "intervene": InterveneSettings(k=(0.0, 1.0)),
    "crossmodal": CrossmodalSettings(fractions=(0.5,), seeds=(0,)),
    "geometry": GeometrySettings(fractions=(0.5,), seeds=(0,)),
}


@pytest.fixture(scope="module")
def arrays() -> AnalysisInputs:
    scenes = get_preset("clevr").build_scenes()
    y = planted_embeddings(scenes, "object_additive", dim=12, noise=0.2, seed=0)
    control = planted_embeddings(scenes, "random", dim=12, seed=1)
    text = planted_embeddings(scenes, "bag_of_concepts", dim=12, seed=2)
    return AnalysisInputs(y, scenes, control=control, other=text)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory, arrays: AnalysisInputs) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("results")
    return {name: run_analysis(name, arrays, root / name, QUICK[name]).path for name in list_analyses()}


def test_the_registry_lists_every_analysis_with_its_contract() -> None:
    assert list_analyses() == ["complexity", "crossmodal", "decompose", "geometry", "intervene", "probe"]
    for name in list_analyses():
        analysis = get_analysis(name)
        assert analysis.name == name and analysis.title
        assert "embeddings" in analysis.needs
        assert isinstance(analysis.Settings(), analysis.Settings)  # defaults are valid
    assert get_analysis("probe").uses == {"control"} and get_analysis("complexity").uses == {"probes"}
    assert get_analysis("intervene").uses == {"control", "probes", "singles"}
    assert get_analysis("crossmodal").needs == {"embeddings", "other"}
    assert get_analysis("crossmodal").uses == {"singles", "unimodal"}
    assert get_analysis("geometry").needs == {"embeddings"} and get_analysis("geometry").uses == {"singles"}


@pytest.mark.parametrize("name", list_analyses())
def test_every_analysis_writes_the_common_header(folders: dict[str, Path], name: str) -> None:
    summary = json.loads((folders[name] / "summary.json").read_text())
    assert list(summary)[: len(HEADER_KEYS)] == list(HEADER_KEYS)  # the header comes first
    assert summary["format"] == {"name": "bindscope-result", "version": FORMAT_VERSION}
    assert summary["analysis"] == name and summary["seeds"] == list(QUICK[name].seeds)
    assert summary["settings"] == QUICK[name].to_dict()
    assert summary["inputs"]["embeddings"]["in_memory"] and summary["inputs"]["embeddings"]["dim"] == 12
    assert len(summary["inputs"]["dataset"]["key"]) == 64
    assert summary["seconds"] > 0 and summary["versions"]["bindscope"] == summary["bindscope_version"]
    table = pd.read_parquet(folders[name] / "results.parquet")
    # the common columns first: the key columns, each rate's n and 95% Wilson interval, what was measured (the
    # writer adds them), then the analysis's own columns
    assert tuple(table.columns[: len(COMMON_COLUMNS)]) == COMMON_COLUMNS
    assert list(table.columns[len(COMMON_COLUMNS) :]) == [c for c in get_analysis(name).extra_columns if c != "n_cases"]
    assert table[list(IDENTITY_COLUMNS)].isna().all().all()  # arrays in memory: no dataset or model to name
    assert set(table.analysis) == {name} and table.value.notna().all()
    assert len(pd.read_csv(folders[name] / "results.csv")) == len(table)


@pytest.mark.parametrize("name", list_analyses())
def test_load_result_round_trips(folders: dict[str, Path], name: str) -> None:
    loaded = load_result(folders[name], name)
    assert loaded.analysis == name and loaded.path == folders[name]
    assert loaded.summary == json.loads((folders[name] / "summary.json").read_text())
    assert loaded.header.seeds == list(QUICK[name].seeds)
    assert not set(loaded.numbers) & set(HEADER_KEYS) and loaded.numbers
    pd.testing.assert_frame_equal(loaded.table, pd.read_parquet(folders[name] / "results.parquet"))
    # the numbers validate into the analysis's typed summary, which gives them back as written
    assert loaded.typed is not None and isinstance(loaded.typed, get_analysis(name).Summary)
    assert loaded.typed.numbers() == loaded.numbers
    # headline reads what was written
    rows = get_analysis(name).headline(loaded.view)
    assert len({len(r) for r in rows}) == 1 and len(rows) > 1


def test_extra_tables_are_read_by_name(folders: dict[str, Path]) -> None:
    per_scene = load_result(folders["probe"]).read_table("per_scene")
    assert set(per_scene.columns) == {"scene", "seed", "group", "probe", "correct"}
    assert not (folders["probe"] / "per_scene.csv").exists()  # large: parquet only
    with pytest.raises(BindscopeError, match="has no table 'training'; it has per_scene"):
        load_result(folders["probe"]).read_table("training")
    assert len(load_result(folders["complexity"]).read_table("training"))


def test_a_folder_of_another_analysis_is_refused(folders: dict[str, Path]) -> None:
    with pytest.raises(BindscopeError, match="holds a 'probe' result, not 'complexity'"):
        load_result(folders["probe"], "complexity")


@pytest.mark.parametrize("name", list_analyses())
def test_every_summary_fits_its_json_schema_as_the_docs_ship_it(folders: dict[str, Path], name: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = summary_schema(name)
    shipped = Path(__file__).parents[2] / "docs" / "reference" / "schemas" / schema_name(name)
    assert json.loads(shipped.read_text()) == schema, "run python scripts/docs/summary_schemas.py"
    summary = json.loads((folders[name] / "summary.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(summary)
    older = {**summary, "format": {"name": "bindscope-result", "version": 2}}
    with pytest.raises(jsonschema.ValidationError, match="3 was expected"):  # the schema names its version
        jsonschema.Draft202012Validator(schema).validate(older)
    with pytest.raises(jsonschema.ValidationError, match="'probe' was expected"):
        jsonschema.Draft202012Validator(summary_schema("probe")).validate({**summary, "analysis": "other"})


def version_2(folder: Path, copy: Path, inputs: dict[str, object]) -> None:
    """``folder`` as bindscope wrote it in format version 2: spreads' count ``n``, no identity columns, no interval
    columns where the analysis had no ``n_cases``; ``inputs`` as its header records them."""
    shutil.copytree(folder, copy)
    summary = json.loads((folder / "summary.json").read_text())
    summary["format"]["version"], summary["inputs"] = 2, inputs
    (copy / "summary.json").write_text(json.dumps(summary).replace('"n_seeds":', '"n":'))
    table = pd.read_parquet(folder / "results.parquet").drop(columns=list(IDENTITY_COLUMNS))
    table.to_parquet(copy / "results.parquet")


def test_a_folder_of_format_version_2_is_read_in_this_versions_terms(folders: dict[str, Path], tmp_path: Path) -> None:
    inputs = {
        "embeddings": {"path": "/old/emb", "model_spec": "st:all-MiniLM-L6-v2", "modality": "text", "key": "e"},
        "dataset": {"path": "/old/ds", "preset": "clevr", "hash": "ab" * 32, "key": "ab" * 32},
    }
    version_2(folders["probe"], tmp_path / "probe", inputs)
    assert '"n":' in (tmp_path / "probe" / "summary.json").read_text()
    old = load_result(tmp_path / "probe", "probe")
    new = load_result(folders["probe"], "probe")
    assert old.header.format.version == 2
    assert old.typed.test["object_acc"].n_seeds == 2 == new.typed.test["object_acc"].n_seeds
    assert old.numbers["test"]["object_acc"] == new.numbers["test"]["object_acc"]  # "n" read as "n_seeds"
    assert list(old.table.columns) == list(new.table.columns)  # the common columns, filled from the header
    assert set(old.table.dataset) == {"clevr"} and set(old.table.dataset_hash) == {"ab" * 32}
    assert set(old.table.model) == {"st:all-MiniLM-L6-v2"} and set(old.table.modality) == {"text"}
    assert old.table.layer.isna().all()
    pd.testing.assert_frame_equal(old.table[list(KEY_COLUMNS)], new.table[list(KEY_COLUMNS)])
    # a version 2 decompose table: intervals beside its n_cases as written, the rest filled
    version_2(folders["decompose"], tmp_path / "decompose", inputs)
    decompose = load_result(tmp_path / "decompose", "decompose")
    assert decompose.table.ci_low.notna().any() and decompose.typed is not None


def test_an_older_format_is_refused(folders: dict[str, Path], tmp_path: Path) -> None:
    for version, message in ((None, "written by an older bindscope"), (1, "has result format version 1")):
        copy = tmp_path / f"v{version}"
        copy.mkdir()
        summary = json.loads((folders["probe"] / "summary.json").read_text())
        if version is None:
            del summary["format"]
        else:
            summary["format"]["version"] = version
        (copy / "summary.json").write_text(json.dumps(summary))
        (copy / "results.parquet").write_bytes((folders["probe"] / "results.parquet").read_bytes())
        with pytest.raises(BindscopeError, match=message):
            load_result(copy)


def test_damaged_and_missing_folders_are_refused(folders: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(BindscopeError, match="is not an analysis folder"):
        load_result(tmp_path)
    summary = json.loads((folders["probe"] / "summary.json").read_text())
    (tmp_path / "summary.json").write_text(json.dumps({**summary, "seeds": "three"}))
    with pytest.raises(BindscopeError, match="summary.json is damaged: seeds"):
        load_result(tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(BindscopeError, match="no results.parquet"):
        load_result(tmp_path)


def test_run_analysis_refuses_wrong_settings_missing_inputs_and_unknown_names(
    arrays: AnalysisInputs, tmp_path: Path
) -> None:
    with pytest.raises(BindscopeError, match="probe takes ProbeSettings, got ComplexitySettings"):
        run_analysis("probe", arrays, tmp_path / "a", QUICK["complexity"])
    with pytest.raises(BindscopeError, match="unknown analysis 'interventions'; choose one of complexity"):
        run_analysis("interventions", arrays, tmp_path / "a")
    with pytest.raises(BindscopeError, match="100 embeddings but 576 scenes"):
        AnalysisInputs(arrays.embeddings[:100], arrays.scenes)
    assert not (tmp_path / "a").exists()


def test_registering_twice_or_with_unknown_inputs_is_refused() -> None:
    with pytest.raises(BindscopeError, match="'probe' is registered already"):
        register(type(get_analysis("probe")))

    class Odd(Analysis):
        name = "odd"
        title = "odd"
        Settings = ProbeSettings
        Summary = type(get_analysis("probe")).Summary
        needs = frozenset({"embeddings", "audio"})

    with pytest.raises(BindscopeError, match=r"odd names unknown input kinds \['audio'\]"):
        register(Odd)

    class Untyped(Analysis):
        name = "untyped"
        title = "untyped"
        Settings = ProbeSettings

    with pytest.raises(BindscopeError, match="untyped declares no Summary; give it one: a subclass of"):
        register(Untyped)
    assert "odd" not in list_analyses() and "untyped" not in list_analyses()


def test_content_keys_follow_inputs_and_settings() -> None:
    inputs = {"embeddings": {"key": "a", "path": "/x"}, "dataset": {"key": "d"}}
    moved = {"embeddings": {"key": "a", "path": "/elsewhere"}, "dataset": {"key": "d"}}
    settings = QUICK["probe"].to_dict()
    key = content_key("probe", inputs, settings)
    assert key == content_key("probe", moved, settings)  # the folder's place is not its content
    assert key != content_key("probe", {**inputs, "embeddings": {"key": "b"}}, settings)
    assert key != content_key("probe", inputs, QUICK["probe"].replace(seeds=(0,)).to_dict())
    assert key != content_key("decompose", inputs, settings)


def test_spread_is_mean_std_and_the_number_of_seeds() -> None:
    expected = {"mean": pytest.approx(0.6), "std": pytest.approx(np.std([0.5, 0.7], ddof=1)), "n_seeds": 2}
    assert spread([0.5, 0.7]) == expected
    assert spread([0.5]) == {"mean": 0.5, "std": None, "n_seeds": 1}
    with pytest.raises(BindscopeError, match="no values"):
        spread([])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ProbeSettings(seeds=()), "invalid ProbeSettings: seeds: give at least one seed"),
        (lambda: ProbeSettings(steps=0), "steps: must be at least 1, got 0"),
        (
            lambda: ProbeSettings(optimizer="adam"),
            "optimizer: Input should be 'regularised', 'fast', 'reference' or 'lbfgs'",
        ),
        (lambda: ProbeSettings(stepz=3), "stepz: unknown setting; check its spelling"),
        (lambda: DecomposeSettings(test_fraction=1.0), "test_fraction: test fraction must be in (0, 1)"),
        (lambda: ComplexitySettings(hidden=(0,)), "give MLP hidden widths of at least 1"),
        (lambda: ComplexitySettings(probe_seed=-1), "probe_seed: must be at least 0"),
    ],
)
def test_settings_refuse_bad_values_naming_the_field(make, message: str) -> None:
    with pytest.raises(BindscopeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_settings_are_frozen() -> None:
    settings = ProbeSettings()
    with pytest.raises(Exception, match="frozen"):
        settings.steps = 3  # type: ignore[misc]
    assert settings.replace(steps=3).steps == 3 and settings.steps == 10_000
