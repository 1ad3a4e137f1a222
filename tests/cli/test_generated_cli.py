"""The analyses' commands are generated from their settings: each field kind becomes its option, the help is
the fields' descriptions, lists keep the one comma convention, ``--settings`` < ``--set`` < the options given, and
every registered analysis's command has an option for every settings field."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from pydantic import Field

from bindscope.analyses import get_analysis, list_analyses, register, unregister
from bindscope.analyses.base import Analysis, Result
from bindscope.analyses.results import Summary
from bindscope.cli.fields import nested_model, option_name, settings_options
from bindscope.cli.generate import analysis_command, resolve_settings
from bindscope.cli.group import BUILTIN
from bindscope.cli.hooks import HOOKS, Hooks, hooks_of
from bindscope.core.errors import BindscopeError
from bindscope.core.validation import Seeds, Settings
from cli_checks import run_in_process as cli


class Inner(Settings):
    """A nested settings model: the command line offers what it names."""

    OPTION_NAMES: ClassVar[dict[str, str]] = {"name": "inner"}
    OVERRIDES: ClassVar[tuple[str, ...]] = ("depth",)

    name: str = Field("plain", description="The inner model's name.")
    depth: int = Field(2, ge=1, description="How deep.")
    hidden: int = 5  # neither named nor an override: --set inner.hidden only


class Small(Settings):
    """One field of each kind."""

    OPTION_NAMES: ClassVar[dict[str, str]] = {"rate_s": "rate"}

    mode: Literal["a", "b"] = Field("a", description="The mode.")
    seeds: Seeds = Field((0, 1), description="Seeds, comma-separated.")
    flag: bool = Field(False, description="A switch.")
    size: int = Field(3, ge=1, description="A size.")
    rate_s: float = 0.5
    label: str | None = None
    ks: tuple[float, ...] = (1.0,)
    inner: Inner = Field(default_factory=Inner)


class SmallAnalysis(Analysis):
    name = "small-gen"
    title = "A small analysis whose command is generated."
    Settings = Small
    Summary = Summary

    def compute(self, inputs: Any, settings: Any, progress: Any = None) -> Result:
        raise NotImplementedError

    def summarize(self, result: Any, settings: Any) -> Summary:
        return Summary()

    def headline(self, summary: Any) -> list:
        return [("a",)]


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """``small-gen`` registered, its command's run replaced by recording the settings it would run with."""

    seen: list[Any] = []
    monkeypatch.setitem(HOOKS, "small-gen", Hooks(run=lambda name, settings, values: seen.append(settings)))
    register(SmallAnalysis)
    try:
        yield seen
    finally:
        unregister("small-gen")


def test_each_field_kind_becomes_its_option() -> None:
    options = {o.key: o for o in settings_options(Small)}
    assert [o.option for o in options.values()] == [
        "--mode", "--seeds", "--flag", "--size", "--rate", "--label", "--ks", "--inner", "--depth",
    ]  # fmt: skip
    assert options["mode"].default.value == "a" and options["mode"].convert(options["mode"].default) == "a"
    assert options["seeds"].default == "0,1" and options["seeds"].convert("3,4") == (3, 4)
    assert options["ks"].convert("0.5,2") == (0.5, 2.0)
    assert options["size"].default == 3 and options["label"].default is None
    assert options["inner.name"].default is None and options["inner.depth"].default is None  # the model's, not shown


def test_the_command_has_the_derived_options_and_help(small: list, monkeypatch: pytest.MonkeyPatch) -> None:
    params = {p.name: p for p in analysis_command("small-gen").params}
    assert params["opt_flag"].opts == ["--flag"] and params["opt_flag"].secondary_opts == ["--no-flag"]
    assert params["opt_rate_s"].opts == ["--rate"] and params["opt_seeds"].default == "0,1"
    assert params["opt_mode"].help == "The mode." and params["opt_rate_s"].help is None
    assert {"--set", "--settings", "--out", "--dataset", "--overwrite", "--quiet", "--wait"} <= {
        o for p in params.values() for o in p.opts
    }
    assert "executor" not in params and "control" not in params  # not declared, not taken
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("TERM", "dumb")
    code, out, _ = cli("small-gen", "--help")
    assert code == 0
    for text in ("A small analysis whose command is generated.", "The mode.", "<a|b>", "--no-flag", "[default: 0,1]"):
        assert text in out
    code, out, _ = cli("--help")
    assert code == 0 and "small-gen" in out and "probe" in out


def test_options_given_reach_the_settings_and_the_rest_keep_the_defaults(small: list, tmp_path: Path) -> None:
    code, _, err = cli("small-gen", tmp_path, "--out", tmp_path / "o", "--mode", "b", "--flag", "--ks", "2,0.5")
    assert code == 0, err
    assert small[-1] == Small(mode="b", flag=True, ks=(2.0, 0.5))
    code, _, err = cli("small-gen", tmp_path, "--out", tmp_path / "o", "--inner", "deep", "--depth", "4")
    assert code == 0, err
    assert small[-1].inner == Inner(name="deep", depth=4)


def test_settings_file_then_set_then_options(small: list, tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("size: 5\nmode: b\nflag: true\nseeds: [7]\ninner: {depth: 3, hidden: 9}\n")
    args = ["small-gen", tmp_path, "--out", tmp_path / "o", "--settings", tmp_path / "s.yaml"]
    code, _, err = cli(*args, "--set", "size=7", "--set", "mode=a", "--set", "inner.depth=6", "--size", "9")
    assert code == 0, err
    assert small[-1] == Small(size=9, mode="a", flag=True, seeds=(7,), inner=Inner(depth=6, hidden=9))
    code, _, err = cli("small-gen", tmp_path, "--out", tmp_path / "o", "--set", "seeds=1,2", "--set", "ks=[3]")
    assert code == 0, err
    assert small[-1].seeds == (1, 2) and small[-1].ks == (3.0,)
    code, _, err = cli("small-gen", tmp_path, "--out", tmp_path / "o", "--set", "label=null", "--set", "seeds=4")
    assert code == 0, err
    assert small[-1].label is None and small[-1].seeds == (4,)


@pytest.mark.parametrize(
    ("args", "message", "status"),
    [
        (["--seeds", "0,,1"], "--seeds takes comma-separated values without empty items, e.g. 0,1,2; got '0,,1'", 1),
        (["--seeds", "x"], "--seeds takes comma-separated values, e.g. 0,1,2; got 'x'", 1),
        (["--ks", "1,y"], "--ks takes comma-separated values, e.g. 0.2,0.4; got '1,y'", 1),
        (["--mode", "c"], "Invalid value for '--mode': Value error, 'c' is not one of 'a', 'b'.", 2),
        (["--size", "0"], "invalid Small: size: must be at least 1, got 0", 1),
        (["--set", "size"], "--set takes KEY=VALUE, e.g. --set seeds=0,1", 1),
        (["--set", "=3"], "--set takes KEY=VALUE", 1),
        (["--set", "sise=3"], "--set sise: small-gen has no setting 'sise'; choose one of flag, inner, ks", 1),
        (["--set", "inner.deep=3"], "--set inner.deep: inner has no setting 'deep'; choose one of depth, hidden", 1),
        (["--set", "size.x=3"], "--set size.x: size holds no settings; set it as a whole", 1),
        (["--set", "size=[1"], "--set size: '[1' is not a YAML value", 1),
        (["--set", "size=big"], "invalid Small: size: Input should be a valid integer", 1),
        (["--set", "inner.depth=0"], "invalid Inner: depth: must be at least 1, got 0", 1),
    ],
)
def test_bad_values_are_one_line_naming_the_key(
    small: list, tmp_path: Path, args: list[str], message: str, status: int
) -> None:
    code, _, err = cli("small-gen", tmp_path, "--out", tmp_path / "o", *args)
    lines = err.strip().splitlines()
    assert code == status and len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not small


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]\n", "must be a mapping of settings (KEY: VALUE lines), got list"),
        ("sise: 3\n", "s.yaml, sise: small-gen has no setting 'sise'"),
        ("inner: {deep: 1}\n", "s.yaml, inner.deep: inner has no setting 'deep'"),
        ("size: [unclosed\n", "malformed YAML in"),
    ],
)
def test_bad_settings_files(small: list, tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "s.yaml").write_text(text)
    code, _, err = cli("small-gen", tmp_path, "--out", tmp_path / "o", "--settings", tmp_path / "s.yaml")
    assert code == 1 and message in err and len(err.strip().splitlines()) == 1, err


def test_a_field_whose_option_the_command_has_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:

    class Clash(Settings):
        out: int = 1

    class ClashAnalysis(SmallAnalysis):
        name = "clash-gen"
        Settings = Clash

    register(ClashAnalysis)
    try:
        with pytest.raises(BindscopeError, match="setting out would be the option --out.*OPTION_NAMES"):
            analysis_command("clash-gen")
    finally:
        unregister("clash-gen")


def test_every_registered_analysis_has_an_option_for_every_setting() -> None:
    for name in list_analyses():
        schema = get_analysis(name).Settings
        flags = {o for p in analysis_command(name).params for o in p.opts}
        for field, info in schema.model_fields.items():
            model = nested_model(info.annotation)
            wanted = option_name(schema, field) if model is None else option_name(model, "name")
            assert f"--{wanted}" in flags, f"{name}: no option for {field}"


def test_the_root_help_lists_the_shipped_analyses_without_importing_them() -> None:
    assert {n: get_analysis(n).title for n in BUILTIN} == BUILTIN
    assert set(BUILTIN) <= set(list_analyses())
    code = (
        "import sys; from bindscope.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'bindscope.analyses.registry' not in sys.modules, 'the root help imported the analyses'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    for name in BUILTIN:
        assert name in done.stdout


def test_complexity_budget_by_name_with_overrides_and_the_paper_parity() -> None:
    hooks = hooks_of("complexity")
    chosen = resolve_settings("complexity", hooks, None, ["budget=paper", "budget.epochs=20"], {})
    assert chosen.budget.name == "paper" and chosen.budget.epochs == 20
    paper = resolve_settings("complexity", hooks, None, [], {"parity": "paper", "budget": {"epochs": 30}})
    assert paper.budget.name == "paper" and paper.budget.epochs == 30 and paper.object_order == "random"
    exact = resolve_settings("complexity", hooks, None, [], {"parity": "paper", "budget": {"protocol": "exact"}})
    assert exact.budget.name == "cpu" and exact.budget.protocol == "exact"  # auto on a CPU
    capped = resolve_settings("complexity", hooks, None, ["budget.max_train_scenes=0"], {"budget": {"name": "cpu"}})
    assert capped.budget.max_train_scenes is None  # 0 switches the cap off, as --max-train-scenes 0
