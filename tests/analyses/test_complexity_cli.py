"""``bindscope complexity`` through the real command: its folder, reused probes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cli_checks import assert_one_line_error

QUICK = [
    "--fractions",
    "0.5,0.9",
    "--epochs",
    "40",
    "--eval-every",
    "10",
    "--hidden",
    "16",
    "--sweeps",
    "60",
    "--quiet",
]
SEEDS = ["--seeds", "0,1"]  # two seeds where only the cheap additive family runs: seeds are aggregated


@pytest.fixture(scope="module")
def emb(tmp_path_factory: pytest.TempPathFactory, clevr_dir: Path) -> Path:
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import import_embeddings
    from bindscope.space.planted import planted_embeddings

    root = tmp_path_factory.mktemp("cemb")
    y = planted_embeddings(load_dataset(clevr_dir).scenes, "additive_concepts_objects", dim=24, noise=0.05, seed=0)
    np.save(root / "y.npy", y)
    import_embeddings(clevr_dir, root / "y.npy", name="planted-additive", modality="image", out=root / "emb")
    return root / "emb"


@pytest.fixture(scope="module")
def probe_run(tmp_path_factory: pytest.TempPathFactory, emb: Path) -> Path:
    from bindscope.analyses import ProbeSettings, load_inputs, run_analysis

    out = tmp_path_factory.mktemp("probe") / "p"
    run_analysis(
        "probe", load_inputs("probe", emb), out, ProbeSettings(optimizer="lbfgs", seeds=(0, 1), max_iter=100)
    )  # the tests read files, splits
    return out


def test_complexity_writes_its_folder(run_cli, emb: Path, tmp_path: Path) -> None:
    out = tmp_path / "cx"
    # every family, one seed, in the embeddings as they are (24 dimensions: tables that can memorise)
    result = run_cli("complexity", emb, "--out", out, "--seeds", "0", "--max-target-dims", "0", *QUICK)
    assert result.returncode == 0, result.stderr
    assert "verdict:" in result.stdout and "budget: cpu, protocol exact (sweeps 60, epochs 40" in result.stdout
    assert "fitted in: the embeddings as they are" in result.stdout
    for label in ("additive", "mult", "mult_within_object", "sum_mult", "mlp(16)", "in-distribution"):
        assert label in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["approximators"]) == {"additive", "mult", "mult_within_object", "sum_mult", "mlp(16)"}
    for entry in summary["approximators"].values():
        assert set(entry["object_acc"]) == {"0.5", "0.9"} and 0 <= entry["auc"]["mean"] <= 1
        assert entry["object_acc"]["0.5"]["n_seeds"] == 1 and entry["auc"]["n_seeds"] == 1  # one per seed
        assert entry["f_star"] is None or entry["f_star"] in (0.5, 0.9)
        assert entry["description_length_bits"] is not None
    assert summary["budget"]["epochs"] == 40 and summary["budget"]["name"] == "cpu"
    assert summary["verdict"]["reading"] and summary["dropped_scenes"] == 0
    # 24-dimensional tables hold one product term per clevr object: the verdict must say so
    assert "values all fitted" in result.stdout and "capacity: mult_within_object's table width 24" in result.stdout
    assert summary["fitted_in"] is None and summary["budget"]["max_target_dims"] is None
    assert set(summary["coverage"]) == {"0.5", "0.9"} and "mult_within_object" in summary["capacity"]
    assert summary["settings"]["second_fit"] is True and summary["settings"]["object_order"] == "auto"
    for name in ("mult", "sum_mult"):
        assert set(summary["approximators"][name]["second_fit_disagreement"]) == {"0.5", "0.9"}
    for name in ("additive", "mult_within_object"):  # convex, or able to memorise: no second fit
        assert "second_fit_disagreement" not in summary["approximators"][name]
    assert "mult_within_object" in summary["verdict"]["undetermined"]
    table = pd.read_parquet(out / "results.parquet")
    assert list(table.columns) == [
        "analysis",
        "variant",
        "control",
        "group",
        "metric",
        "seed",
        "value",
        "n_cases",
        "ci_low",
        "ci_high",
        "dataset",
        "dataset_hash",
        "model",
        "modality",
        "layer",
        "fraction",
        "checkpoint",
        "budget",
        "selection",
    ]
    assert set(table.budget) == {"cpu"}
    rates = table[table.metric.isin(["object_acc", "swap_acc"]) & (table.variant != "chance")]
    assert rates.n_cases.notna().all() and table[table.metric == "r2"].n_cases.isna().all()
    # the evidence first: every fit scored on its own training scenes beside its held-out ones
    assert "train acc@0.9 %" in result.stdout and "train R²@0.9" in result.stdout and "\ncard: " in result.stdout
    assert set(summary["approximators"]["additive"]["train_object_acc"]) == {"0.5", "0.9"}
    assert summary["verdicts"]["generalises to unseen objects"]["floors"][0]["name"] == "bag of concepts"
    assert set(table.group) == {"train_only", "validation", "test_only", "mixed", "next_block"}
    assert set(table.checkpoint) == {"selected", "final", ""}
    fitted = table[(table.variant == "additive") & (table.checkpoint == "selected")]
    assert {"object_acc", "concept_acc", "concept_acc.color", "concept_acc.shape", "r2", "mse"} <= set(fitted.metric)
    assert len(pd.read_csv(out / "results.csv")) == len(table)
    history = pd.read_parquet(out / "training.parquet")
    assert set(history.approximator) == set(summary["approximators"])
    assert set(history.unit) == {"sweep", "epoch"}  # ALS sweeps for the table families, Adam epochs for the MLP
    assert history[history.unit == "epoch"].epoch.max() <= 40 and history[history.unit == "sweep"].epoch.max() <= 60
    assert set(history[history.unit == "epoch"].approximator) == {"mlp(16)"}
    png = (out / "plots" / "complexity.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert (out / "probes" / "seed0" / "object.npy").is_file()  # fitted here, kept for reuse
    assert summary["settings"]["budget"]["epochs"] == 40 and summary["analysis"] == "complexity"
    assert summary["probes"] == {
        "fitted_here": True,
        "folder": "probes/seed0",
        "seed": 0,
        "scored_scenes": "the 230 scenes the probes were fitted on are not scored in test_only, mixed or train_only",
    }
    assert summary["probe_scenes_unscored"] == 230 and "probe scenes: the 230 scenes" in result.stdout
    assert summary["inputs"]["probes"] is None and summary["inputs"]["embeddings"]["name"] == "planted-additive"


def test_complexity_reuses_frozen_probes(run_cli, emb: Path, probe_run: Path, tmp_path: Path) -> None:
    args = ["--approximators", "additive", "--no-description-length", "--no-second-fit", *SEEDS, *QUICK]
    by_run = run_cli("complexity", emb, "--out", tmp_path / "a", "--probes", probe_run, "--probe-seed", "1", *args)
    assert by_run.returncode == 0, by_run.stderr
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["inputs"]["probes"]["path"].endswith("seed1") and not (tmp_path / "a" / "probes").exists()
    assert summary["probes"]["fitted_here"] is False and summary["settings"]["second_fit"] is False
    # their probe.json records the split: the 230 scenes of seed 1's probes are not scored
    assert summary["probe_scenes_unscored"] == 230 and "the 230 scenes the probes were fitted on" in by_run.stdout
    assert "description_length_bits" not in summary["approximators"]["additive"]
    # the cpu budget's principal subspace: what it holds and how the probes read it, on the terminal too
    kept = summary["fitted_in"]
    assert kept["of"] == 24 and kept["dims"] < 24 and kept["variance_kept"] >= 0.999
    assert kept["object_acc_embeddings"] - kept["object_acc"] <= 0.01
    assert f"fitted in: the embeddings' leading {kept['dims']} of 24 principal components" in by_run.stdout
    additive = summary["approximators"]["additive"]
    assert additive["object_acc"]["0.5"]["n_seeds"] == 2 and additive["auc"]["n_seeds"] == 2  # two seeds
    by_folder = run_cli("complexity", emb, "--out", tmp_path / "b", "--probes", probe_run / "probes" / "seed1", *args)
    assert by_folder.returncode == 0, by_folder.stderr
    a = pd.read_parquet(tmp_path / "a" / "results.parquet")
    b = pd.read_parquet(tmp_path / "b" / "results.parquet")
    pd.testing.assert_frame_equal(a, b)  # same probes, same seeds: the same numbers
    bare = tmp_path / "bare"
    bare.mkdir()
    for f in (probe_run / "probes" / "seed1").iterdir():
        (bare / f.name).write_bytes(f.read_bytes())
    meta = json.loads((bare / "probe.json").read_text())
    (bare / "probe.json").write_text(json.dumps({k: v for k, v in meta.items() if k != "split"}))
    unknown = run_cli("complexity", emb, "--out", tmp_path / "u", "--probes", bare, *args)
    assert unknown.returncode == 0, unknown.stderr
    assert "record no training split" in unknown.stdout
    assert json.loads((tmp_path / "u" / "summary.json").read_text())["probe_scenes_unscored"] is None
    # the research code's random object order: at 0.5 some clevr test scenes hold unseen values
    by_random = run_cli(
        "complexity", emb, "--out", tmp_path / "r", "--probes", probe_run, "--object-order", "random", *args
    )
    assert by_random.returncode == 0, by_random.stderr
    random = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert random["settings"]["object_order"] == "random"
    covering = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert covering["coverage"]["0.5"]["mean"] == 1.0 > random["coverage"]["0.5"]["mean"]


@pytest.mark.parametrize(
    ("args", "message", "status"),
    [
        (["--approximators", "quadratic"], "unknown approximator 'quadratic'", 1),
        (["--approximators", "additive,"], "--approximators takes comma-separated values without empty items", 1),
        (["--fractions", "1.2"], "fraction must be in (0, 1)", 1),
        (["--fractions", "0.5,x"], "--fractions takes comma-separated values", 1),
        (["--seeds", ""], "--seeds takes comma-separated values without empty items", 1),
        (["--epochs", "0"], "epochs must be at least 1, got 0", 1),
        (["--patience", "-1"], "patience must be >= 0 (0 switches it off), got -1", 1),
        (["--max-train-scenes", "1"], "max_train_scenes: must be at least 2, got 1", 1),
        (["--budget", "huge"], "Invalid value for '--budget'", 2),
        (["--object-order", "sorted"], "Invalid value for '--object-order'", 2),
        (["--hidden", "0"], "give MLP hidden widths of at least 1", 1),
        (["--device", "cuda"], "no CUDA device is available", 1),
        (["--fractions", "0.02"], "leaves no train objects", 1),
    ],
)
def test_complexity_bad_options(run_cli, emb: Path, tmp_path: Path, args, message: str, status: int) -> None:
    if "cuda" in args:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    assert_one_line_error(run_cli("complexity", emb, "--out", tmp_path / "c", *args), message, status)
    assert not (tmp_path / "c").exists()


@pytest.mark.slow
def test_complexity_bad_probes(run_cli, emb: Path, probe_run: Path, tmp_path: Path, clevr_dir: Path) -> None:
    out = tmp_path / "c"
    assert_one_line_error(run_cli("complexity", emb, "--out", out, "--probes", tmp_path), "holds no probes")
    assert_one_line_error(
        run_cli("complexity", emb, "--out", out, "--probes", probe_run, "--probe-seed", "5"), "probes/seed5/"
    )
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in (probe_run / "probes" / "seed0").iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    meta = json.loads((bad / "probe.json").read_text())
    (bad / "probe.json").write_text(json.dumps({**meta, "dataset_hash": "0" * 64}))
    assert_one_line_error(run_cli("complexity", emb, "--out", out, "--probes", bad), "fitted on another dataset")
    (bad / "probe.json").write_text(json.dumps(meta))
    np.save(bad / "object.npy", np.zeros((24, 7), np.float32))
    assert_one_line_error(
        run_cli("complexity", emb, "--out", out, "--probes", bad), "must be 2-D [labels, dim] float arrays of one width"
    )
    np.save(bad / "object.npy", np.zeros((24, 24), np.float32))
    np.save(bad / "color.npy", np.full((8, 24), np.nan, np.float32))
    assert_one_line_error(run_cli("complexity", emb, "--out", out, "--probes", bad), "NaN or infinite")
    np.save(bad / "color.npy", np.zeros((8, 24), np.float32))
    np.save(bad / "object.npy", np.zeros((20, 24), np.float32))
    assert_one_line_error(run_cli("complexity", emb, "--out", out, "--probes", bad), "has 20 labels but")
    (bad / "probe.json").write_text("{not json")
    assert_one_line_error(run_cli("complexity", emb, "--out", out, "--probes", bad), "probe")
    assert not out.exists()


@pytest.mark.parametrize("budget", [["--protocol", "paper", "--epochs", "5"], ["--sweeps", "1"]], ids=["adam", "als"])
def test_an_unconverged_sweep_says_so(run_cli, emb: Path, probe_run: Path, tmp_path: Path, budget: list[str]) -> None:
    args = ["--approximators", "mult,mult_within_object", "--fractions", "0.5", "--seeds", "0", *budget]
    args += ["--probes", str(probe_run)]  # the module's probes, not fitted again
    result = run_cli("complexity", emb, "--out", tmp_path / "c", "--no-description-length", *args)
    assert result.returncode == 0, result.stderr
    assert "verdict: unreliable: fits did not converge" in result.stdout
    hint = "more --epochs, or the exact protocol" if "paper" in budget else "more --sweeps (table families)"
    assert hint in result.stdout
    assert "warning: fits that did not converge" in result.stderr
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["verdict"]["reliable"] is False and summary["warnings"]
    table = pd.read_parquet(tmp_path / "c" / "results.parquet")
    flags = table[(table.group == "train_only") & (table.metric == "converged")]
    assert len(flags) == 2 and (flags.value == 0).all()


def test_standardised_targets_are_an_option_recorded_with_the_budget(
    run_cli, emb: Path, probe_run: Path, tmp_path: Path
) -> None:
    args = ["--approximators", "additive", "--fractions", "0.5", "--seeds", "0", "--epochs", "30", "-q"]
    args += ["--probes", str(probe_run)]  # the module's probes, not fitted again
    result = run_cli("complexity", emb, "--out", tmp_path / "s", "--standardize", "--no-description-length", *args)
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert summary["budget"]["standardize"] is True and summary["settings"]["budget"]["standardize"] is True
    for flags in (["--no-standardize"], ["--protocol", "paper"]):  # on by default in the exact protocol
        plain = run_cli(
            "complexity", emb, "--out", tmp_path / "p", "--no-description-length", "--overwrite", *flags, *args
        )
        assert plain.returncode == 0, plain.stderr
        assert json.loads((tmp_path / "p" / "summary.json").read_text())["budget"]["standardize"] is False


def test_selection_on_test_needs_the_paper_protocol_and_is_marked_optimistic(
    run_cli, emb: Path, probe_run: Path, tmp_path: Path
) -> None:
    args = ["--approximators", "additive", "--fractions", "0.5", "--seeds", "0", "--no-description-length", "-q"]
    args += ["--probes", str(probe_run)]  # the module's probes, not fitted again
    refused = run_cli("complexity", emb, "--out", tmp_path / "r", "--selection", "test", *args)
    assert_one_line_error(refused, "runs under the paper protocol only; add --protocol paper")
    assert not (tmp_path / "r").exists()
    out = tmp_path / "t"
    result = run_cli(
        "complexity",
        emb,
        "--out",
        out,
        "--parity",
        "paper",
        "--selection",
        "test",
        "--epochs",
        "20",
        "--eval-every",
        "10",
        *args,
    )
    assert result.returncode == 0, result.stderr
    assert "selected on test (optimistic)" in result.stdout and "warning: optimistic" in result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["selection"] == "test (optimistic)" and any(w.startswith("optimistic") for w in summary["warnings"])
    assert summary["budget"]["name"] == "paper" and summary["budget"]["decay"] == "constant"
    cosine = run_cli(
        "complexity", emb, "--out", tmp_path / "c", "--parity", "paper", "--lr-decay", "cosine", "--epochs", "20", *args
    )
    assert cosine.returncode == 0, cosine.stderr
    assert json.loads((tmp_path / "c" / "summary.json").read_text())["budget"]["decay"] == "cosine"
    assert summary["settings"]["parity"] == "paper" and summary["settings"]["r2_centre"] == "scenes"
    assert set(pd.read_parquet(out / "results.parquet").selection) == {"test (optimistic)"}
