"""The paper-scale and scaling benchmark scripts' own logic: the spaces, the exponent, the targets, the child
processes they time (the timings themselves are the scripts' business, not the tests')."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import paper_scale  # noqa: E402
import scaling  # noqa: E402
from paper_scale import Outcome  # noqa: E402
from scaling import Measured, Space  # noqa: E402


@pytest.mark.parametrize(
    ("size", "space", "scenes"),
    [(1_000, Space(4, 8), 1_056), (10_000, Space(10, 10), 10_100), (100_000, Space(15, 21), 99_540)],
)
def test_the_space_closest_to_each_size(size: int, space: Space, scenes: int) -> None:
    assert scaling.space_for(size) == space
    assert space.scenes == scenes


def test_a_space_yaml_builds_its_scenes(tmp_path: Path) -> None:
    from bindscope.data.presets import load_preset_file

    path = tmp_path / "space.yaml"
    path.write_text(Space(2, 3).yaml())
    assert len(load_preset_file(path).build_scenes()) == 6 * 6 + 6


def measured(scenes: int, seconds: float, peak: float, status: str = "computed") -> Measured:
    return Measured("probe", scenes, Space(1, scenes), status, seconds, seconds, peak)  # Space(1, n): n^2 + n scenes


def test_the_exponent_is_the_log_log_slope_over_the_finished_sizes() -> None:
    points = [measured(n, 3e-4 * (n * n + n) ** 2, 400 + 0.01 * (n * n + n)) for n in (10, 30, 100)]
    assert scaling.exponent(points) == pytest.approx(2.0)
    assert scaling.memory_growth(points) == pytest.approx(10.0)  # 0.01 MB per scene
    over = [*points[:2], measured(100, 600.0, 9000.0, status=paper_scale.OVER)]
    assert scaling.exponent(over) == pytest.approx(2.0)  # from the two that finished
    assert scaling.exponent(points[:1]) is None
    assert scaling.memory_growth(points[:1]) is None


def test_an_analysis_over_the_limit_is_not_run_at_the_larger_sizes() -> None:
    done = [measured(10, 5.0, 400), Measured("decompose", 10, Space(1, 10), paper_scale.OVER, 600, 600, 900)]
    skipped = scaling.not_run(["probe", "decompose", "geometry"], 10_000, done)
    assert [(m.analysis, m.status, m.note) for m in skipped] == [
        ("decompose", paper_scale.NOT_RUN, "over the limit at 110 scenes")
    ]
    assert skipped[0].space == scaling.space_for(10_000)


@pytest.mark.parametrize(("text", "message"), [("10,x", "is not a comma-separated list"), ("4", "at least 6 scenes")])
def test_bad_sizes_are_refused(text: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        scaling.parse_sizes(text)


def test_an_unknown_analysis_is_refused() -> None:
    with pytest.raises(SystemExit, match=r"--analyses: unknown \['probes'\]"):
        scaling.parse_list("probes", scaling.ANALYSES, "analyses")


def test_a_child_past_its_time_is_killed_and_its_peak_read() -> None:
    slow = paper_scale.run_child([sys.executable, "-c", "import time; time.sleep(60)"], {}, timeout=0.5)
    assert slow.returncode is None
    assert slow.wall_seconds < 30
    done = paper_scale.run_child([sys.executable, "-c", "print('hello'); x = bytearray(200 * 2**20)"], {}, timeout=60)
    assert (done.returncode, done.output.strip()) == (0, "hello")
    assert done.peak_mb > 200
    assert 0 < done.cpu_seconds <= done.wall_seconds * 4


def test_a_terminated_script_stops_the_step_it_is_running(tmp_path: Path) -> None:
    """SIGTERM (``timeout``, a scheduler) to the script stops its running step's session too: it is not left running
    (the step's own session would otherwise outlive the script)."""
    pid_file = tmp_path / "child.pid"
    step = tmp_path / "step.py"
    step.write_text(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n")
    script = (
        f"import sys; sys.path.insert(0, {str(BENCHMARKS)!r}); import paper_scale; paper_scale.stop_on_sigterm(); "
        f"paper_scale.run_child([sys.executable, {str(step)!r}], {{}}, 300)"
    )
    parent = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the step never started"
        time.sleep(0.1)
    child = int(pid_file.read_text())
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=60) == 128 + signal.SIGTERM
    deadline = time.monotonic() + 30
    while _alive(child):
        assert time.monotonic() < deadline, "the step outlived the script"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie (ended, not reaped yet) is not running
        return stat.read().split()[2] != "Z"


def outcome(step: str, seconds: float, peak: float, status: str = "computed") -> Outcome:
    return Outcome(step, "bindscope run x", status, seconds, seconds + 5, peak)


def test_the_analyses_together_are_held_to_ten_minutes_and_4_gb() -> None:
    analyses = ["probe", "decompose"]
    within = paper_scale.analyses_total(
        [outcome("embed", 9000, 1000), outcome("probe", 300, 3000), outcome("decompose", 200, 2000)], analyses
    )
    assert within is not None
    assert (within.seconds, within.peak_mb, within.status) == (500, 3000, "computed")
    assert paper_scale.judged(within)[1] == "yes"
    slow = paper_scale.analyses_total([outcome("probe", 500, 3000), outcome("decompose", 200, 2000)], analyses)
    assert slow is not None and paper_scale.judged(slow)[1] == "no"
    partial = paper_scale.analyses_total([outcome("probe", 100, 3000)], analyses)
    assert partial is not None and partial.status == "incomplete" and "without decompose" in partial.note
    assert paper_scale.judged(partial)[1] == "no"
    assert paper_scale.judged(outcome("embed", 10, 5000))[1] == "no"
    assert paper_scale.judged(outcome("probe", 10, 900, status=paper_scale.OVER))[1] == "no"
    assert paper_scale.judged(outcome("probe", 0, 0, status=paper_scale.NOT_RUN))[1] == "-"


def test_a_step_whose_inputs_did_not_finish_is_not_run() -> None:
    analyses = ["probe", "decompose", "intervene", "geometry"]
    probe_over = [outcome("embed", 10, 900), outcome("probe", 1200, 900, status=paper_scale.OVER)]
    assert paper_scale.blocked("decompose", probe_over, analyses) is None
    assert paper_scale.blocked("intervene", probe_over, analyses) == "needs probe, which did not finish"
    assert paper_scale.blocked("report", probe_over, analyses) == "needs probe, which did not finish"
    embed_failed = [outcome("embed", 10, 900, status=paper_scale.FAILED)]
    assert paper_scale.blocked("embed-control", embed_failed, analyses) == "needs embed, which did not finish"
    assert paper_scale.blocked("geometry", embed_failed, analyses) == "needs embed, which did not finish"


@pytest.mark.parametrize(
    ("spec", "name"),
    [("st:all-MiniLM-L6-v2", "all-MiniLM-L6-v2"), ("hf:openai/clip-vit-base-patch32+rand", "clip-vit-base-patch32")],
)
def test_a_model_folder_name_from_its_spec(spec: str, name: str) -> None:
    assert paper_scale.model_name(spec) == name


@pytest.mark.parametrize(
    ("printed", "status"),
    [
        ("x already holds these embeddings (content key a6216bc778cc); nothing to do", "reused"),
        ("reused from the cache (a6216bc778cc): 2,400 rows linked, nothing embedded", "cached"),
        ("embedded 2,400 rows in 69.1 s (35 rows/s)", "computed"),
    ],
)
def test_what_an_embed_step_did(printed: str, status: str) -> None:
    assert paper_scale.embed_status(printed) == status
