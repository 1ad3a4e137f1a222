"""The top-level Python API as a user meets it: ``import bindscope as bs`` in a saved script, run as a user runs one.

Each function runs on tiny data (planted embeddings, a tiny saved CLIP) and its outputs are checked against what
the command line gives on the same folders; the bad inputs are refused with one line that says what to do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from bindscope.core.errors import BindscopeError

HEAVY = ("torch", "transformers", "pandas", "matplotlib", "sklearn", "numpy", "pyarrow", "pydantic")


#: Environment switches that turn the model libraries' bars off for good: the test scripts run without them.
QUIET_SWITCHES = ("HF_HUB_DISABLE_PROGRESS_BARS", "TQDM_DISABLE")


def run_script(folder: Path, code: str) -> subprocess.CompletedProcess:
    """``python script.py`` in ``folder``, as a user runs a saved script (the test's isolated caches)."""
    script = folder / "script.py"
    script.write_text(textwrap.dedent(code))
    env = {k: v for k, v in os.environ.items() if k not in QUIET_SWITCHES}  # the library defaults a user has
    env["BINDSCOPE_PROGRESS_SECONDS"] = "0"  # a progress line at every update, were one shown
    done = subprocess.run([sys.executable, str(script)], cwd=folder, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def last_json(done: subprocess.CompletedProcess) -> dict:
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory, clevr_dir: Path) -> Path:
    """An embedding folder of clevr captions whose binding is known: each scene the sum of its objects' vectors."""
    from bindscope.data.datasets import load_dataset
    from bindscope.embeddings.store import import_embeddings
    from bindscope.space.planted import planted_embeddings

    folder = tmp_path_factory.mktemp("planted")
    y = planted_embeddings(load_dataset(clevr_dir).scenes, "object_additive", dim=64, noise=0.5, seed=0)
    np.save(folder / "y.npy", y)
    import_embeddings(clevr_dir, folder / "y.npy", name="planted", modality="text", out=folder / "emb" / "planted")
    return folder / "emb" / "planted"


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import save_tiny_clip

    return save_tiny_clip(tmp_path_factory.mktemp("models") / "clip")


# -- the top level ----------------------------------------------------------------------------------------------------
def test_import_bindscope_is_light_and_names_the_api(tmp_path: Path) -> None:
    done = run_script(
        tmp_path,
        f"""
        import json, sys
        import bindscope as bs

        heavy = sorted(m for m in {HEAVY!r} if m in sys.modules)
        names = ["build_dataset", "embed", "analyze", "load_result", "run", "load_run", "load_embeddings"]
        listed = [n for n in names if n in bs.__all__ and n in dir(bs)]
        found = {{n: getattr(bs, n).__module__ for n in ("embed", "analyze", "run", "build_dataset")}}
        print(json.dumps({{"heavy": heavy, "listed": listed, "found": found}}))
        """,
    )
    got = last_json(done)
    assert got["heavy"] == [], "import bindscope imported a heavy library"
    assert got["listed"] == ["build_dataset", "embed", "analyze", "load_result", "run", "load_run", "load_embeddings"]
    assert got["found"] == {
        "embed": "bindscope.api",
        "analyze": "bindscope.api",
        "run": "bindscope.api",
        "build_dataset": "bindscope.data.datasets",
    }
    with pytest.raises(AttributeError, match="no attribute 'embedd'"):
        import bindscope

        bindscope.embedd  # noqa: B018


# -- embed ------------------------------------------------------------------------------------------------------------
def test_embed_writes_the_model_and_its_control_and_prints_no_library_bar(
    tmp_path: Path, clevr_dir: Path, tiny_clip: Path
) -> None:
    """bs.embed is silent: no "Loading weights" bar from transformers while bindscope loads the model. The script
    loads the same folder with transformers afterwards, to show the bar would appear and that its switch was put
    back as it was."""
    done = run_script(
        tmp_path,
        f"""
        import json, sys
        import bindscope as bs

        emb = bs.embed({str(clevr_dir)!r}, "hf:{tiny_clip}", out="emb/clip", control=True)
        control = bs.load_embeddings("emb/clip+rand")
        print("EMBEDDED", file=sys.stderr, flush=True)

        from transformers import CLIPModel
        from transformers.utils import logging
        from huggingface_hub.utils import are_progress_bars_disabled

        restored = [logging.is_progress_bar_enabled(), not are_progress_bars_disabled()]
        CLIPModel.from_pretrained({str(tiny_clip)!r})
        print(json.dumps({{
            "shape": list(emb.array.shape), "spec": emb.manifest["model_spec"], "folder": str(emb.root),
            "control": control.manifest["model_spec"], "control_name": control.name, "restored": restored,
            "differ": bool((abs(control.array - emb.array) > 1e-3).any()),
        }}))
        """,
    )
    got = last_json(done)
    assert got["shape"] == [576, 24] and got["spec"] == f"hf:{tiny_clip}" and got["folder"] == "emb/clip"
    assert got["control"] == f"hf:{tiny_clip}+rand" and got["control_name"] == "clip+rand" and got["differ"]
    assert got["restored"] == [True, True]
    before, after = done.stderr.split("EMBEDDED\n")
    assert before == "", before  # nothing at all while bindscope embedded: no bar, no line
    assert "Loading weights" in after  # the library's own bar, back for the script's own load


def test_the_embed_command_prints_no_library_bar(run_cli, tmp_path: Path, clevr_dir: Path, tiny_clip: Path) -> None:
    done = run_cli("embed", clevr_dir, "--model", f"hf:{tiny_clip}", "--modality", "text", "--out", tmp_path / "e")
    assert done.returncode == 0, done.stderr
    assert "Loading weights" not in done.stderr and "Loading weights" not in done.stdout
    assert "embedded 576 rows" in done.stdout


def test_embed_refuses_a_control_of_a_control(tmp_path: Path, clevr_dir: Path) -> None:
    import bindscope as bs

    with pytest.raises(BindscopeError, match=r"is a \+rand control already; drop control=True"):
        bs.embed(clevr_dir, "st:all-MiniLM-L6-v2+rand", out=tmp_path / "e", control=True)
    assert not (tmp_path / "e").exists()


# -- analyze ----------------------------------------------------------------------------------------------------------
def test_analyze_gives_the_numbers_of_the_command(tmp_path: Path, planted: Path, run_cli) -> None:
    """bs.analyze("probe", ...) on planted object-additive embeddings: the objects are read on every test scene
    (a known answer), with the numbers `bindscope probe` writes for the same folder and settings."""
    done = run_script(
        tmp_path,
        f"""
        import json
        import bindscope as bs

        result = bs.analyze("probe", {str(planted)!r}, out="api", seeds=[0], optimizer="lbfgs")
        back = bs.load_result("api", "probe")
        print(json.dumps({{
            "test": result.summary["test"], "verdict": result.typed.verdicts["objects recoverable"].answer,
            "same": back.summary == result.summary, "settings": back.header.settings,
        }}))
        """,
    )
    got = last_json(done)
    assert done.stderr == "", done.stderr  # library use prints nothing
    assert got["test"]["object_acc"]["mean"] == 1.0 and got["verdict"] == "binds"
    assert got["same"] and got["settings"]["optimizer"] == "lbfgs" and got["settings"]["seeds"] == [0]
    cli = run_cli("probe", planted, "--out", tmp_path / "cli", "--seeds", "0", "--optimizer", "lbfgs")
    assert cli.returncode == 0, cli.stderr
    from bindscope.analyses.results import load_result

    assert load_result(tmp_path / "cli").summary["test"] == got["test"]


def test_analyze_takes_settings_as_keywords_a_mapping_or_an_object() -> None:
    """The three ways to give settings are one: keywords over a mapping or a settings object, all validated."""
    from bindscope.analyses import ProbeSettings
    from bindscope.api import analysis_settings_of

    wanted = ProbeSettings(seeds=(0,), optimizer="lbfgs")
    assert analysis_settings_of("probe", None, {"seeds": [0], "optimizer": "lbfgs"}) == wanted
    assert analysis_settings_of("probe", {"seeds": [0], "optimizer": "lbfgs"}, {}) == wanted
    assert analysis_settings_of("probe", {"seeds": [5], "optimizer": "lbfgs"}, {"seeds": [0]}) == wanted
    assert analysis_settings_of("probe", ProbeSettings(optimizer="lbfgs"), {"seeds": [0]}) == wanted
    assert analysis_settings_of("probe", wanted, {}) is wanted
    budget = analysis_settings_of("complexity", None, {"budget": "cpu"}).budget
    assert budget == analysis_settings_of("complexity", None, {"budget": {"name": "cpu"}}).budget


def test_analyze_names_the_closest_analysis(tmp_path: Path, planted: Path) -> None:
    import bindscope as bs

    with pytest.raises(BindscopeError) as info:
        bs.analyze("probes", planted, out=tmp_path / "r")
    assert "unknown analysis 'probes'" in str(info.value) and "(did you mean probe?)" in str(info.value)
    assert "\n" not in str(info.value) and not (tmp_path / "r").exists()


def test_analyze_names_the_closest_setting(tmp_path: Path, planted: Path) -> None:
    import bindscope as bs

    with pytest.raises(BindscopeError, match=r"unknown keys \['seed'\] \(did you mean seeds\?\); allowed: "):
        bs.analyze("probe", planted, out=tmp_path / "r", seed=[0])
    assert not (tmp_path / "r").exists()


def test_analyze_refuses_another_analysis_settings(tmp_path: Path, planted: Path) -> None:
    import bindscope as bs
    from bindscope.analyses import DecomposeSettings

    with pytest.raises(BindscopeError, match="probe takes ProbeSettings .or a mapping of its fields., got Decompose"):
        bs.analyze("probe", planted, out=tmp_path / "r", settings=DecomposeSettings())


# -- run --------------------------------------------------------------------------------------------------------------
def test_run_from_a_config_mapping(tmp_path: Path, planted: Path) -> None:
    """A run of the planted folder from a mapping: quiet by default, its steps to a logger or ``say``; the Run
    it returns is the folder read back, with the analysis's own numbers and the card's readings."""
    done = run_script(
        tmp_path,
        f"""
        import json, logging
        import bindscope as bs

        config = {{
            "name": "planted", "seeds": [0], "embeddings": [{{"path": {str(planted)!r}}}],
            "analyses": {{"probe": {{"optimizer": "lbfgs"}}}},
        }}
        run = bs.run(config, out="run")
        lines = []
        again = bs.run(config, out="run", say=lines.append)  # finished steps are reused
        loaded = bs.load_run("run")
        key, = run.results
        try:
            run.result(key + "s")
        except bs.BindscopeError as error:
            wrong = str(error)
        print(json.dumps({{
            "status": run.status, "keys": list(run.results), "report": run.report is not None,
            "readings": loaded.readings(), "said": lines, "repr": repr(run),
            "object_acc": run.result(key).summary["test"]["object_acc"], "wrong": wrong,
            "same": loaded.results == run.results and again.summaries() == run.summaries(),
            "table": sorted(set(run.card_table()["column"])), "config": run.config().name,
        }}))
        """,
    )
    got = last_json(done)
    assert done.stderr == "", done.stderr
    assert got["status"] == "complete" and got["keys"] == ["clevr/planted-text/probe"] and got["report"]
    assert got["object_acc"]["mean"] == 1.0 and got["same"] and got["config"] == "planted"
    assert list(got["readings"]) == ["clevr / planted-text"]
    assert any("objects recoverable" in line for line in got["readings"]["clevr / planted-text"])
    assert any(line.startswith("probe") and "reused" in line for line in got["said"]), got["said"]
    assert "(did you mean clevr/planted-text/probe?)" in got["wrong"]
    assert got["repr"] == "Run('run', status='complete', 1 results, report='run/report.html')"
    assert "objects recoverable" in got["table"]


def test_run_from_models(tmp_path: Path, clevr_dir: Path, tiny_clip: Path) -> None:
    """The one-liner's run, from models: the model and its +rand control embedded, the analysis run on the model
    beside its control."""
    done = run_script(
        tmp_path,
        f"""
        import json
        import bindscope as bs

        run = bs.run(models=["tiny=hf:{tiny_clip}"], datasets="clevr", analyses="probe", modality="text", quick=True,
                     out="run")
        control = run.result("clevr/tiny-text/probe").header.inputs["control"]["model_spec"]
        print(json.dumps({{"status": run.status, "keys": list(run.results), "seeds": run.manifest["seeds"],
                          "control": control}}))
        """,
    )
    got = last_json(done)
    assert done.stderr == "", done.stderr
    assert got["status"] == "complete" and got["seeds"] == [0]
    assert got["keys"] == ["clevr/tiny-text/probe"]
    assert got["control"].startswith("hf:") and got["control"].endswith(f"/{tiny_clip.name}+rand")  # (path shortened)


def test_run_needs_a_config_or_models(tmp_path: Path) -> None:
    import bindscope as bs

    with pytest.raises(BindscopeError, match=r"give a run config \(a RunConfig, a mapping, .*\) or models=\[SPEC"):
        bs.run(out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_run_refuses_a_config_and_models(tmp_path: Path) -> None:
    import bindscope as bs

    with pytest.raises(BindscopeError, match="give a run config or models=.*, not both: models=, quick= belong"):
        bs.run("demo-quick", models=["st:all-MiniLM-L6-v2"], quick=True, out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_run_names_the_closest_config_key(tmp_path: Path) -> None:
    import bindscope as bs

    with pytest.raises(BindscopeError, match=r"invalid run config \(the mapping given\): .*nme: unknown key \(did you"):
        bs.run({"nme": "x"}, out=tmp_path / "run")
    with pytest.raises(BindscopeError, match="config must be a RunConfig, a mapping, a YAML file .*, got int"):
        bs.run(3, out=tmp_path / "run")  # type: ignore[arg-type]
    assert not (tmp_path / "run").exists()


def test_load_run_refuses_a_folder_that_is_no_run(tmp_path: Path, planted: Path) -> None:
    import bindscope as bs

    with pytest.raises(BindscopeError, match="is not a run folder .no manifest.json.; give the out folder of a run"):
        bs.load_run(tmp_path)
    with pytest.raises(BindscopeError, match="is not a bindscope run manifest"):
        bs.load_run(planted)  # an embedding folder: its manifest is not a run's
