"""The same work on a Ray cluster: a local Ray instance with 2 CPUs, started by these tests.

Ray's files, HOME and TMPDIR live in this module's temp folders; the instance listens on 127.0.0.1
only. Every result is compared with the local executor's on the same inputs; faults are injected
through ``BINDSCOPE_FAIL_DIR/plan`` (see :func:`bindscope.core.faults.fail_point`), which the
workers read at each unit.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bindscope.analyses import ComplexitySettings, load_result, run_analysis
from bindscope.analyses.complexity import Budget
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.core.errors import BindscopeError
from bindscope.core.executors import ExecutorChoice, RayExecutor, executing_on
from bindscope.core.faults import FAIL_DIR_ENV
from bindscope.data.datasets import build_dataset
from bindscope.estimators.probes import ProbeSet, soft_targets
from bindscope.space.planted import planted_embeddings
from cli_checks import assert_one_line_error
from tiny_scratch import tiny_scratch_yaml

if importlib.util.find_spec("ray") is None:  # ray is imported by the executor, after it sets its address
    pytest.skip("Ray is not installed (pip install 'bindscope[ray]')", allow_module_level=True)
# a Ray instance takes about 10 s to start on 2 cores: the module's tests share one, on one xdist worker
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The module's HOME, TMPDIR and fault folder, set before Ray starts (its workers inherit them)."""
    home = tmp_path_factory.mktemp("rayhome")
    with pytest.MonkeyPatch.context() as mp:
        for var, sub in (("HOME", ""), ("XDG_CACHE_HOME", ".cache"), ("HF_HOME", ".hf"), ("TMPDIR", "tmp")):
            (home / sub).mkdir(parents=True, exist_ok=True)
            mp.setenv(var, str(home / sub))
        mp.setenv(FAIL_DIR_ENV, str(home / "faults"))
        yield home


@pytest.fixture(scope="module", autouse=True)
def one_thread_like_the_workers(one_torch_thread: None) -> None:
    """Local runs on one torch thread, as Ray's 1-CPU workers (OMP_NUM_THREADS=1): results then agree bitwise."""


@pytest.fixture(scope="module")
def cluster(ray_home: Path) -> Iterator[RayExecutor]:
    """A Ray instance with 2 CPUs; its session folder is short (Ray's sockets need that) and removed after."""
    from bindscope.core.locks import writer

    session = tempfile.mkdtemp(prefix="bsr-", dir="/tmp")  # short: Ray's socket paths must stay under 108 bytes
    writer()  # the workers inherit this process's writer id, as a command's do (else the test depends on order)
    executor = RayExecutor(None, num_cpus=2, temp_dir=session, retries=2)
    try:
        warm_up(executor)
        yield executor
    finally:
        executor.close()
        shutil.rmtree(session, ignore_errors=True)


def warm_up(executor: RayExecutor) -> None:
    """Both workers import what the units run (torch, the analyses) at once, before the tests are timed: two
    units whose shared input is a function of the complexity sweep's module (unpickling it imports that)."""
    from bindscope.analyses.complexity.units import fit_unit
    from bindscope.core.executors import Unit

    done = executor.map([Unit(f"warm-{i}", f"warm-up {i}", callable) for i in range(2)], fit_unit)
    assert all(d.result for d in done)


@pytest.fixture
def faults(ray_home: Path) -> Iterator[Path]:
    """The fault folder, emptied before and after the test."""
    folder = ray_home / "faults"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def arm(folder: Path, plan: str) -> None:
    (folder / "plan").write_text(plan)


def passes(folder: Path) -> int:
    return len(list(folder.glob("unit.*")))


# -- inputs -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def planted_y(tmp_path_factory: pytest.TempPathFactory) -> AnalysisInputs:
    """Planted additive embeddings of the clevr scenes (no probes)."""
    folder = tmp_path_factory.mktemp("ds") / "clevr"
    scenes = build_dataset("clevr", folder, images=False).scenes
    y = planted_embeddings(scenes, "additive_concepts_objects", dim=16, noise=0.05, seed=0)
    return AnalysisInputs(y, scenes)


@pytest.fixture(scope="module")
def planted(planted_y: AnalysisInputs) -> AnalysisInputs:
    """The planted embeddings with probes fitted on them (the fast optimiser: any frozen probes will do)."""
    probes = ProbeSet("fast").fit(planted_y.embeddings, soft_targets(planted_y.scenes))
    return AnalysisInputs(planted_y.embeddings, planted_y.scenes, probes=probes)


# two families at two fractions: two units (a stack of models each), few ALS sweeps (equality holds at any size)
SWEEP = ComplexitySettings(
    approximators=("additive", "mult_within_object"),
    fractions=(0.4, 0.8),
    seeds=(0,),
    description_length=False,
    second_fit=False,
    budget=Budget(sweeps=5),
)


def complexity_table(inputs: AnalysisInputs, out: Path, settings: ComplexitySettings = SWEEP) -> pd.DataFrame:
    return load_result(run_analysis("complexity", inputs, out, settings).path, "complexity").table


def assert_same_table(a: pd.DataFrame, b: pd.DataFrame, atol: float) -> None:
    """The same rows in the same order; values equal within ``atol`` (0: bitwise, NaN where NaN)."""
    keys = [c for c in a.columns if c != "value"]
    pd.testing.assert_frame_equal(a[keys], b[keys])
    np.testing.assert_allclose(a["value"].to_numpy(float), b["value"].to_numpy(float), rtol=0, atol=atol)


# -- tests ------------------------------------------------------------------------------------------------
@pytest.mark.duration_limit(
    40, reason="the first test of the module: it is charged the module's Ray start and its two workers' torch import"
)
def test_the_local_instance_has_two_cpus_on_loopback(cluster: RayExecutor) -> None:
    info = cluster.describe()
    assert info["executor"] == "ray" and info["cpus"] == 2 and info["nodes"] == 1
    assert all(n["NodeManagerAddress"] == "127.0.0.1" for n in cluster.ray.nodes())


@pytest.fixture(scope="module")
def local_run(
    planted: AnalysisInputs, ray_home: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[pd.DataFrame, int]:
    """The sweep on the local executor, run once: its table and how many units passed the fail point."""
    folder = ray_home / "faults"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    arm(folder, "unit:raise:0")  # count, fail none
    table = complexity_table(planted, tmp_path_factory.mktemp("local") / "c")
    count = passes(folder)
    shutil.rmtree(folder)
    return table, count


@pytest.fixture(scope="module")
def local_sweep(local_run: tuple[pd.DataFrame, int]) -> pd.DataFrame:
    """The sweep's table on the local executor: the reference every Ray run of it is compared with."""
    return local_run[0]


@pytest.fixture(scope="module")
def sweep_units(local_run: tuple[pd.DataFrame, int]) -> int:
    """How many units the sweep has, counted on the local run (every unit passes the fail point once)."""
    count = local_run[1]
    assert count >= 2
    return count


def test_a_complexity_sweep_on_ray_equals_local(
    cluster: RayExecutor, planted: AnalysisInputs, local_sweep: pd.DataFrame, tmp_path: Path
) -> None:
    with executing_on(cluster):
        remote = complexity_table(planted, tmp_path / "ray")
    assert_same_table(local_sweep, remote, atol=0)
    assert not (tmp_path / ".ray.units").exists()  # the kept units go once the result is written


@pytest.mark.parametrize(
    "fault", ["unit:raise:1", "unit:kill:1"], ids=["a failed task is retried", "a killed worker's unit is redone"]
)
def test_a_unit_that_fails_once_is_run_again(
    cluster: RayExecutor,
    planted: AnalysisInputs,
    local_sweep: pd.DataFrame,
    sweep_units: int,
    faults: Path,
    tmp_path: Path,
    fault: str,
) -> None:
    arm(faults, fault)
    with executing_on(cluster):
        remote = complexity_table(planted, tmp_path / "ray")
    assert_same_table(local_sweep, remote, atol=0)
    assert passes(faults) == sweep_units + 1  # the failed unit ran again, no other unit twice


def test_a_failure_that_persists_is_reported_with_its_inputs(
    cluster: RayExecutor, planted: AnalysisInputs, faults: Path, tmp_path: Path
) -> None:
    arm(faults, "unit:raise:100")
    with executing_on(cluster), pytest.raises(BindscopeError) as err:
        complexity_table(planted, tmp_path / "ray")
    message = str(err.value)
    assert message.startswith("unit additive at f=0.4 seed 0") or "seed" in message
    assert "after 3 attempts" in message and "injected fault at unit" in message
    assert not (tmp_path / "ray").exists()


def test_probe_seeds_on_ray_equal_local(cluster: RayExecutor, planted: AnalysisInputs, tmp_path: Path) -> None:
    from bindscope.analyses import ProbeSettings

    settings = ProbeSettings(optimizer="lbfgs", seeds=(0, 1))
    inputs = AnalysisInputs(planted.embeddings, planted.scenes)
    local = run_analysis("probe", inputs, tmp_path / "local", settings).table
    with executing_on(cluster):
        remote = run_analysis("probe", inputs, tmp_path / "ray", settings).table
    assert_same_table(local, remote, atol=0)
    assert sorted(remote["seed"].unique()) == [0, 1]


def test_an_interrupted_sweep_resumes_without_redoing_finished_units(
    cluster: RayExecutor,
    planted: AnalysisInputs,
    local_sweep: pd.DataFrame,
    sweep_units: int,
    faults: Path,
    tmp_path: Path,
) -> None:
    no_retries = RayExecutor(None, retries=0)  # joins the running instance
    out = tmp_path / "sweep"
    arm(faults, "unit:raise:100:1")  # the first unit to start finishes, every later one fails
    with executing_on(no_retries), pytest.raises(BindscopeError, match="injected fault"):
        complexity_table(planted, out)
    # finished fits are kept per model (family, fraction, seed); a unit stacks one family's models
    models = len(list((tmp_path / ".sweep.units" / "fits").glob("*.json")))
    per_unit = len(SWEEP.fractions) * len(SWEEP.seeds)
    assert models % per_unit == 0  # a unit's models are kept together, when it finishes
    kept = models // per_unit
    assert 1 <= kept < sweep_units and not out.exists()
    shutil.rmtree(faults)
    faults.mkdir()
    arm(faults, "unit:raise:0")  # count the units that run; fail none
    with executing_on(no_retries):
        resumed = complexity_table(planted, out)
    assert passes(faults) == sweep_units - kept
    assert_same_table(local_sweep, resumed, atol=0)  # the same table as a fresh run
    assert not (tmp_path / ".sweep.units").exists()


def test_sharded_extraction_equals_local(cluster: RayExecutor, tmp_path: Path, tiny_clip: Path) -> None:
    from bindscope.embeddings.embed import embed_dataset

    ds = build_dataset("clevr", tmp_path / "ds", images=False)
    chunk = 96  # six chunks of the 576 scenes: several per worker, few units
    # the cache off: both sides compute (with it, the second would link the first's array)
    local = embed_dataset(ds, f"hf:{tiny_clip}", modality="text", out=tmp_path / "local", chunk_rows=chunk, cache=None)
    with executing_on(cluster):
        remote = embed_dataset(
            ds, f"hf:{tiny_clip}", modality="text", out=tmp_path / "ray", chunk_rows=chunk, cache=None
        )
    a, b = local.embeddings.array, remote.embeddings.array
    assert a.shape == b.shape and len(a) > chunk * 3  # several chunks, spread over the workers
    np.testing.assert_allclose(a, b, rtol=0, atol=0)
    assert remote.embeddings.manifest["source"]["executor"] == "ray"
    assert local.embeddings.manifest["source"].get("executor") is None
    assert not list(tmp_path.glob(".ray.embedding-*"))


def test_a_scratch_sweep_on_ray_equals_local(cluster: RayExecutor, tmp_path: Path) -> None:
    from bindscope.scratch.config import load_config
    from bindscope.scratch.sweep import SweepSettings, sweep

    (tmp_path / "tiny.yaml").write_text(tiny_scratch_yaml(steps=8, every=4))
    config = load_config(str(tmp_path / "tiny.yaml"))
    settings = SweepSettings(fractions=(0.3, 0.6), seeds=(0,))
    sweep(config, settings, tmp_path / "local")
    with executing_on(cluster):
        sweep(config, settings, tmp_path / "ray")
    a = load_result(tmp_path / "local", "scratch-sweep").table
    b = load_result(tmp_path / "ray", "scratch-sweep").table
    assert_same_table(a, b, atol=0)
    assert (tmp_path / "ray" / "runs" / "f0.3-s0" / "summary.json").is_file()


def test_memory_per_unit_is_requested_and_refused_beyond_the_cluster(
    cluster: RayExecutor, planted: AnalysisInputs, tmp_path: Path
) -> None:
    with executing_on(RayExecutor(None, memory_gb=0.25)):  # joins the running instance
        complexity_table(planted, tmp_path / "fits")
    with executing_on(RayExecutor(None, memory_gb=1e6)), pytest.raises(BindscopeError, match="GB of memory"):
        complexity_table(planted, tmp_path / "too-big")


def test_without_ray_installed_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(BindscopeError, match=r"pip install 'bindscope\[ray\]'"):
        ExecutorChoice("ray").make()


def test_an_address_without_the_ray_executor_is_refused() -> None:
    with pytest.raises(BindscopeError, match="--address is for --executor ray"):
        ExecutorChoice("local", address="auto").make()


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import save_tiny_clip

    return save_tiny_clip(tmp_path_factory.mktemp("models") / "clip")


@pytest.fixture
def short_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A short folder for the Ray a command starts (BINDSCOPE_RAY_TMPDIR), removed after the test."""
    folder = Path(tempfile.mkdtemp(prefix="bsr-", dir="/tmp"))
    monkeypatch.setenv("BINDSCOPE_RAY_TMPDIR", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.duration_limit(40, reason="the command starts, warms and shuts down a Ray of its own: what it checks")
def test_the_cli_runs_complexity_on_a_ray_it_starts(
    run_cli, planted_y: AnalysisInputs, short_tmp: Path, tmp_path: Path
) -> None:
    from bindscope.embeddings.store import import_embeddings

    ds = build_dataset("clevr", tmp_path / "ds", images=False)
    np.save(tmp_path / "y.npy", np.asarray(planted_y.embeddings, np.float32))
    import_embeddings(ds.root, tmp_path / "y.npy", name="planted", modality="image", out=tmp_path / "emb")
    out = tmp_path / "c"
    args = ("complexity", tmp_path / "emb", "--out", out, "--approximators", "additive", "--fractions", "0.5")
    options = (
        "--no-description-length",
        "--no-second-fit",
        "--sweeps",
        "5",
        "-q",
        "--executor",
        "ray",
        "--memory",
        "0.25",
    )
    result = run_cli(*args, "--seeds", "0", *options)
    assert result.returncode == 0, result.stderr
    assert (out / "summary.json").is_file() and not list(tmp_path.glob(".c.*"))
    assert list(short_tmp.iterdir()) == []  # the Ray it started lived there and was cleaned up


def test_the_cli_refuses_an_address_without_the_ray_executor(run_cli, tmp_path: Path) -> None:
    result = run_cli("complexity", tmp_path, "--out", tmp_path / "c", "--address", "auto")
    assert_one_line_error(result, "--address is for --executor ray")


RUN = """name: two-models
seeds: [0]
datasets:
  - {{name: clevr, preset: clevr}}
models:
  - {{spec: "hf:{clip}", name: clip, modalities: [text]}}
  - {{spec: "hf:{siglip}", name: siglip, modalities: [text]}}
analyses:
  probe: {{optimizer: lbfgs}}
  complexity: {{approximators: [additive], fractions: [0.5], budget: {{sweeps: 5}}}}
report: false
"""


@pytest.mark.duration_limit(30, reason="the same two-model run twice, locally and on Ray, to compare them")
def test_a_run_with_two_models_on_ray_equals_local(cluster: RayExecutor, tiny_clip: Path, tmp_path: Path) -> None:
    import yaml

    from bindscope.embeddings.cache import cache_off
    from bindscope.pipeline.config import parse_config
    from bindscope.pipeline.run import run_pipeline
    from tiny_models import save_tiny_siglip

    siglip = save_tiny_siglip(tmp_path / "siglip")
    config = parse_config(yaml.safe_load(RUN.format(clip=tiny_clip, siglip=siglip)))
    lines: list[str] = []
    with cache_off():  # both runs embed (with the cache, the second would link the first's arrays)
        local = run_pipeline(config, tmp_path / "local", say=lambda _: None)
        with executing_on(cluster):
            remote = run_pipeline(config, tmp_path / "ray", say=lines.append)
    assert set(local.summaries) == set(remote.summaries) and len(local.summaries) == 4  # 2 models x 2 analyses
    for key in local.summaries:
        a = load_result(tmp_path / "local" / "results" / key, key.rsplit("/", 1)[1]).table
        b = load_result(tmp_path / "ray" / "results" / key, key.rsplit("/", 1)[1]).table
        assert_same_table(a, b, atol=0)
    steps = {(r.kind, r.name, r.status) for r in remote.log.records}
    assert steps == {(r.kind, r.name, r.status) for r in local.log.records}
    assert any(line.startswith("embeddings   clevr/siglip-text") for line in lines)
    assert remote.sources == local.sources and {f"hf:{tiny_clip}", f"hf:{siglip}"} <= set(local.sources)
