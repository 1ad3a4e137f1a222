"""Check that the layered package computes the same numbers as the flat one it was refactored from.

Runs one driver twice, in subprocesses: once on the old ``src/`` of ``--old-ref`` (extracted with
``git archive`` into a temporary folder, first on ``PYTHONPATH``) and once on this checkout's
``src/``. Each child builds the same inputs (the ``clevr`` preset's scenes, planted embeddings of
two kinds and a ``+rand`` control), runs probe, decompose and complexity on them and writes its
tables as parquet (and the solvers and the complexity summary as JSON). The parent maps the old
columns onto the new ones, matches rows by their keys and reports every number that differs by
more than 1e-12, and every row present on one side only.

Usage::

    .venv/bin/python scripts/compare_refactor.py [--old-ref 6b16185] [--quick]

Exit status: 0 when everything is identical, 1 on any difference, 2 when a run could not be made
(e.g. a child imported the wrong copy of bindscope).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OLD_REF = "6b16185"
TOLERANCE = 1e-12
SHOWN_PER_TABLE = 12  # differences printed per table before "... and N more"

# -- the inputs and settings both runs use ----------------------------------------------------------
PRESET = "clevr"
KINDS = ("object_additive", "bag_of_concepts")
DIM = 32
NOISE = 0.3
PROBE_SEEDS = (0, 1)
PROBE_STEPS = 2000
FROZEN_PROBE_ITERATIONS = 100
COMPLEXITY_FRACTIONS = (0.3, 0.6, 0.9)
COMPLEXITY_HIDDEN = (32,)
FULL = {"approximators": ("additive", "mult_within_object", "mlp"), "epochs": 200}
QUICK = {"approximators": ("additive", "mlp"), "epochs": 40}

#: Where each piece lives in the old (flat) and the new (layered) package.
MODULES = {
    "old": {
        "presets": "bindscope.presets",
        "planted": "bindscope.planted",
        "probe": "bindscope.suite",
        "decompose": "bindscope.suite",
        "probes": "bindscope.probes",
        "complexity": "bindscope.complexity",
    },
    "new": {
        "presets": "bindscope.data.presets",
        "planted": "bindscope.space.planted",
        "probe": "bindscope.analyses.probe",
        "decompose": "bindscope.analyses.decompose",
        "probes": "bindscope.analyses.probes",
        "complexity": "bindscope.analyses.complexity.sweep",
    },
}

NO_CONTROL = "none"
#: Old probe variants -> new (variant, control).
PROBE_VARIANTS = {
    "base": ("base", NO_CONTROL),
    "chance": ("chance", NO_CONTROL),
    "permuted_labels": ("base", "permuted_labels"),
    "rand": ("base", "rand"),
}
#: The per-fraction curves of the complexity summary (old: plain means; new: {mean, std, n}).
SUMMARY_CURVES = (
    "object_acc",
    "concept_acc",
    "mixed_object_acc",
    "validation_object_acc",
    "final_object_acc",
    "r2",
)


# == the child: one run of the driver on one copy of the package ==================================
def check_origin(module: ModuleType, expected_root: Path) -> None:
    """Fail loudly unless ``module`` was imported from under ``expected_root``."""
    origin = Path(module.__file__ or "").resolve()
    if not origin.is_relative_to(expected_root.resolve()):
        raise SystemExit(f"{module.__name__} was imported from {origin}, not from under {expected_root}")


def check_loaded_modules(expected_root: Path) -> None:
    """Every bindscope module loaded so far must come from ``expected_root`` (no mixing of copies)."""
    for name, module in sorted(sys.modules.items()):
        if (name == "bindscope" or name.startswith("bindscope.")) and getattr(module, "__file__", None):
            check_origin(module, expected_root)


def digest(array: np.ndarray) -> str:
    """A fingerprint of an array's dtype, shape and bytes (to show both runs had the same inputs)."""
    h = hashlib.sha256(f"{array.dtype}{array.shape}".encode())
    h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()[:16]


def write_json(path: Path, data: Any) -> None:
    """JSON with sorted keys; numpy scalars and other oddities as strings."""
    path.write_text(json.dumps(data, indent=1, sort_keys=True, default=str))


def run_probe(mods: Mapping[str, ModuleType], y: np.ndarray, scenes: Any, control: np.ndarray, out: Path) -> None:
    """Probes with chance and controls: the tidy table and the base run's per-scene correctness."""
    probe = mods["probe"]
    settings = probe.ProbeSettings(seeds=PROBE_SEEDS, steps=PROBE_STEPS)
    table, _run, per_scene = probe.probe_analysis(y, scenes, settings, control=control)
    table.to_parquet(out / "probe.parquet")
    per_scene.to_parquet(out / "per_scene.parquet")


def run_decompose(mods: Mapping[str, ModuleType], y: np.ndarray, scenes: Any, control: np.ndarray, out: Path) -> None:
    """Additive R² with controls and the subtraction probes: the tidy table and the solvers used."""
    settings = mods["probe"].ProbeSettings(seeds=PROBE_SEEDS, steps=PROBE_STEPS)
    table, solvers = mods["decompose"].decompose_analysis(y, scenes, settings, control=control)
    table.to_parquet(out / "decompose.parquet")
    write_json(out / "solvers.json", solvers)


def run_complexity(mods: Mapping[str, ModuleType], y: np.ndarray, scenes: Any, out: Path, quick: bool) -> None:
    """The complexity sweep under frozen L-BFGS probes: table, training history and summary."""
    probes_mod, complexity = mods["probes"], mods["complexity"]
    probes = probes_mod.ProbeSet("lbfgs", max_iter=FROZEN_PROBE_ITERATIONS).fit(y, probes_mod.soft_targets(scenes))
    plan = QUICK if quick else FULL
    settings = complexity.ComplexitySettings(
        approximators=plan["approximators"],
        hidden=COMPLEXITY_HIDDEN,
        fractions=COMPLEXITY_FRACTIONS,
        seeds=PROBE_SEEDS,
        budget=complexity.resolve_budget("cpu", epochs=plan["epochs"]),
        description_length=True,
    )
    result = complexity.complexity_sweep(y, scenes, probes, settings)
    result.table.to_parquet(out / "complexity.parquet")
    result.history.to_parquet(out / "history.parquet")
    write_json(out / "summary.json", complexity.complexity_summary(result, settings))


def run_child(side: str, expected_root: Path, out: Path, quick: bool) -> None:
    """The driver both runs execute: build the inputs, run the three analyses, write the tables."""
    import bindscope

    check_origin(bindscope, expected_root)
    mods = {role: importlib.import_module(name) for role, name in MODULES[side].items()}
    planted = mods["planted"].planted_embeddings
    scenes = mods["presets"].get_preset(PRESET).build_scenes()
    control = planted(scenes, "random", dim=DIM, seed=1)
    meta: dict[str, Any] = {"bindscope": str(Path(bindscope.__file__).resolve()), "scenes": len(scenes)}
    meta["inputs"] = {"+rand": digest(control)}
    meta["seconds"] = {}
    steps: dict[str, Callable[[np.ndarray, Path], None]] = {
        "probe": lambda y, folder: run_probe(mods, y, scenes, control, folder),
        "decompose": lambda y, folder: run_decompose(mods, y, scenes, control, folder),
        "complexity": lambda y, folder: run_complexity(mods, y, scenes, folder, quick),
    }
    for kind in KINDS:
        y = planted(scenes, kind, dim=DIM, noise=NOISE, seed=0)
        meta["inputs"][kind] = digest(y)
        folder = out / kind
        folder.mkdir(parents=True)
        for name, step in steps.items():
            start = time.perf_counter()
            step(y, folder)
            meta["seconds"][f"{name} {kind}"] = round(time.perf_counter() - start, 2)
            print(f"  [{side}] {name} {kind}: {meta['seconds'][f'{name} {kind}']:.1f} s", file=sys.stderr, flush=True)
    check_loaded_modules(expected_root)
    write_json(out / "meta.json", meta)


# == the parent: extract the old source, run both sides ============================================
def git(*args: str) -> bytes:
    """Output of a read-only git command run in the repository root."""
    return subprocess.run(["git", "-C", str(REPO_ROOT), *args], check=True, capture_output=True).stdout


def extract_old_source(ref: str, into: Path) -> tuple[Path, str]:
    """``git archive REF src | tar -x -C into``; returns the extracted ``src`` folder and the commit."""
    try:
        commit = git("rev-parse", "--verify", f"{ref}^{{commit}}").decode().strip()
        archive = git("archive", ref, "src")
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"cannot read {ref!r} from git: {exc.stderr.decode().strip()}") from None
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    src = into / "src"
    if not (src / "bindscope" / "__init__.py").is_file():
        raise SystemExit(f"{ref} has no src/bindscope package")
    return src, commit


def run_side(side: str, src: Path, out: Path, quick: bool) -> float:
    """Run the driver in a subprocess with ``src`` first on the path; returns its wall time."""
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    command = [sys.executable, str(Path(__file__).resolve()), "--child", side, "--expect", str(src), "--out", str(out)]
    if quick:
        command.append("--quick")
    print(f"running the {side} code from {src} ...", flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=out.parent)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the {side} run failed (exit status {done.returncode}); see its output above")
    return seconds


# == mapping the old tables onto the new columns ===================================================
def map_old_probe(table: pd.DataFrame) -> pd.DataFrame:
    """Old probe rows (variant base/chance/permuted_labels/rand, split) -> new (variant, control, group)."""

    def convert(row: pd.Series) -> pd.Series:
        variant, control = PROBE_VARIANTS.get(row["variant"], (row["variant"], "<unmapped>"))
        return pd.Series({"variant": variant, "control": control})

    out = table.rename(columns={"split": "group"})
    out[["variant", "control"]] = out.apply(convert, axis=1)
    return out


def map_old_decompose(table: pd.DataFrame) -> pd.DataFrame:
    """Old ``decompose`` rows (variant MODEL or MODEL|CONTROL) -> part additive; ``subtraction`` -> part subtraction."""

    def convert(row: pd.Series) -> pd.Series:
        if row["analysis"] == "decompose":
            model, _, control = row["variant"].partition("|")
            return pd.Series(
                {"analysis": "decompose", "variant": model, "control": control or NO_CONTROL, "part": "additive"}
            )
        if row["analysis"] == "subtraction":
            return pd.Series(
                {"analysis": "decompose", "variant": row["variant"], "control": NO_CONTROL, "part": "subtraction"}
            )
        return pd.Series({"analysis": row["analysis"], "variant": row["variant"], "control": "<unmapped>", "part": ""})

    out = table.rename(columns={"split": "group"})
    out[["analysis", "variant", "control", "part"]] = out.apply(convert, axis=1)
    return out


def map_old_per_scene(table: pd.DataFrame) -> pd.DataFrame:
    """Per-scene correctness: ``split`` was renamed ``group``."""
    return table.rename(columns={"split": "group"})


def map_old_complexity(table: pd.DataFrame) -> pd.DataFrame:
    """Complexity rows: ``approximator`` became ``variant``, and every row has control ``none``."""
    return table.rename(columns={"approximator": "variant"}).assign(control=NO_CONTROL)


def same_columns(table: pd.DataFrame) -> pd.DataFrame:
    """History: the columns did not change."""
    return table


# == comparing ======================================================================================
@dataclass
class Comparison:
    """One compared table: how many values were matched, the largest difference, what differs."""

    name: str
    compared: int = 0
    max_diff: float = 0.0
    differences: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences


def normalise_key(value: Any) -> Any:
    """Key cells made comparable across dtypes: numbers as float, everything else as str."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    return str(value)


def table_values(table: pd.DataFrame, value_columns: Iterable[str]) -> tuple[dict[tuple, float], list[str]]:
    """``{(key cells..., value column): value}`` and the key columns; repeated keys fail loudly."""
    value_columns = [c for c in value_columns if c in table.columns]
    keys = [c for c in table.columns if c not in value_columns]
    out: dict[tuple, float] = {}
    for record in table.to_dict("records"):
        key = tuple(normalise_key(record[c]) for c in keys)
        for column in value_columns:
            full = (*key, column)
            if full in out:
                raise SystemExit(f"internal: the key {dict(zip(keys, key))} repeats; rows cannot be matched")
            out[full] = float(record[column])
    return out, [*keys, "column"]


def describe_row(columns: list[str], key: tuple) -> str:
    """``column=value, ...`` of a row key (whole numbers without the ``.0`` that matching added)."""
    cells = (int(v) if isinstance(v, float) and v.is_integer() else v for v in key)
    return ", ".join(f"{c}={v}" for c, v in zip(columns, cells))


def distance(old: Any, new: Any) -> float:
    """0 for equal values (NaN matches NaN, None matches None), |old - new| for numbers, inf otherwise."""
    numbers = (int, float, np.integer, np.floating)
    both_numbers = isinstance(old, numbers) and isinstance(new, numbers)
    if both_numbers and not isinstance(old, bool) and not isinstance(new, bool):
        if math.isnan(old) and math.isnan(new):
            return 0.0
        diff = abs(float(old) - float(new))
        return math.inf if math.isnan(diff) else diff
    return 0.0 if old == new else math.inf


def compare_values(
    name: str, old: Mapping[Any, Any], new: Mapping[Any, Any], describe: Callable[[Any], str]
) -> Comparison:
    """Match two ``{key: value}`` maps: differences beyond the tolerance and keys on one side only."""
    result = Comparison(name)
    for key in sorted(old.keys() & new.keys(), key=repr):
        result.compared += 1
        diff = distance(old[key], new[key])
        if math.isfinite(diff):
            result.max_diff = max(result.max_diff, diff)
        if diff > TOLERANCE:
            result.differences.append(f"{describe(key)}: old {old[key]!r}, new {new[key]!r} (|diff| {diff:g})")
    for side, only in (("old", old.keys() - new.keys()), ("new", new.keys() - old.keys())):
        source = old if side == "old" else new
        for key in sorted(only, key=repr):
            result.differences.append(f"only in {side}: {describe(key)} = {source[key]!r}")
    return result


def compare_tables(
    name: str,
    old: pd.DataFrame,
    new: pd.DataFrame,
    map_old: Callable[[pd.DataFrame], pd.DataFrame],
    value_columns: Iterable[str] = ("value",),
) -> Comparison:
    """Map the old table onto the new columns, then match rows on every column but the values."""
    mapped = map_old(old)
    extra_old, extra_new = set(mapped.columns) - set(new.columns), set(new.columns) - set(mapped.columns)
    if extra_old or extra_new:
        result = Comparison(name)
        result.differences.append(
            f"columns differ after mapping: only old {sorted(extra_old)}, only new {sorted(extra_new)}"
        )
        return result
    value_columns = list(value_columns)
    old_values, keys = table_values(mapped[list(new.columns)], value_columns)
    new_values, _ = table_values(new, value_columns)
    return compare_values(name, old_values, new_values, lambda key: describe_row(keys, key))


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as ``{"a.b.c": leaf}`` (lists stay leaves)."""
    if not isinstance(data, dict):
        return {prefix: data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def old_summary_numbers(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The old complexity summary's numbers under the new summary's names (plain floats were means)."""
    out: dict[str, Any] = {}
    for reference in ("in_distribution", "chance"):
        out.update({f"{reference}[{f}].mean": v for f, v in summary[reference].items()})
    for label, entry in summary["approximators"].items():
        at = f"approximators.{label}"
        out[f"{at}.auc.mean"], out[f"{at}.auc.std"] = entry["auc"], entry["auc_std"]
        out.update({f"{at}.object_acc[{f}].std": v for f, v in entry["object_acc_std"].items()})
        for curve in SUMMARY_CURVES:
            out.update({f"{at}.{curve}[{f}].mean": v for f, v in entry[curve].items()})
        for key in ("f_star", "description_length_bits", "parameters"):
            out[f"{at}.{key}"] = entry.get(key)
    return {**out, **summary_common(summary)}


def new_summary_numbers(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The new complexity summary's numbers; spreads are ``{mean, std, n}`` (std None for one seed, old 0.0)."""

    def std(spread: Mapping[str, Any]) -> Any:
        return 0.0 if spread["std"] is None and spread["n"] == 1 else spread["std"]

    out: dict[str, Any] = {}
    for reference in ("in_distribution", "chance"):
        out.update({f"{reference}[{f}].mean": s["mean"] for f, s in summary[reference].items()})
    for label, entry in summary["approximators"].items():
        at = f"approximators.{label}"
        out[f"{at}.auc.mean"], out[f"{at}.auc.std"] = entry["auc"]["mean"], std(entry["auc"])
        out.update({f"{at}.object_acc[{f}].std": std(s) for f, s in entry["object_acc"].items()})
        for curve in SUMMARY_CURVES:
            out.update({f"{at}.{curve}[{f}].mean": s["mean"] for f, s in entry[curve].items()})
        for key in ("f_star", "description_length_bits", "parameters"):
            out[f"{at}.{key}"] = entry.get(key)
    return {**out, **summary_common(summary)}


def summary_common(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The summary entries whose shape did not change: verdict, baseline code, dropped scenes, budget."""
    verdict = summary["verdict"]
    return {
        "verdict.simplest_generalising": verdict.get("simplest_generalising"),
        "verdict.f_star": verdict.get("f_star"),
        "verdict.generalising": verdict.get("generalising"),
        "description_length_baseline_bits": summary.get("description_length_baseline_bits"),
        "dropped_scenes": summary.get("dropped_scenes"),
        **flatten(summary.get("budget", {}), "budget"),
    }


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def compare_kind(kind: str, old: Path, new: Path) -> list[Comparison]:
    """Every table of one planted kind, old against new."""
    o, n = old / kind, new / kind
    tables = (
        ("probe", "probe.parquet", map_old_probe, ("value",)),
        ("per_scene", "per_scene.parquet", map_old_per_scene, ("correct",)),
        ("decompose", "decompose.parquet", map_old_decompose, ("value",)),
        ("complexity", "complexity.parquet", map_old_complexity, ("value",)),
        ("history", "history.parquet", same_columns, ("train_mse", "val_mse")),
    )
    out = [
        compare_tables(f"{name} {kind}", pd.read_parquet(o / file), pd.read_parquet(n / file), mapping, values)
        for name, file, mapping, values in tables
    ]
    out.append(
        compare_values(
            f"solvers {kind}", flatten(read_json(o / "solvers.json")), flatten(read_json(n / "solvers.json")), str
        )
    )
    out.append(
        compare_values(
            f"complexity summary {kind}",
            old_summary_numbers(read_json(o / "summary.json")),
            new_summary_numbers(read_json(n / "summary.json")),
            str,
        )
    )
    return out


def compare_inputs(old_meta: Mapping[str, Any], new_meta: Mapping[str, Any]) -> Comparison:
    """Both runs must have built the same scenes and embeddings (fingerprints of the arrays)."""
    old = {"scenes": old_meta["scenes"], **{f"sha256 {k}": v for k, v in old_meta["inputs"].items()}}
    new = {"scenes": new_meta["scenes"], **{f"sha256 {k}": v for k, v in new_meta["inputs"].items()}}
    return compare_values("inputs", old, new, str)


# == reporting ======================================================================================
def report(comparisons: list[Comparison], walls: Mapping[str, float], commit: str, quick: bool) -> bool:
    """Print one line per table, the differences, the verdict and the wall times; True when identical."""
    print()
    mode = "quick" if quick else "full"
    print(f"old: {commit[:12]} (git archive)   new: {REPO_ROOT / 'src'} (working tree)   mode: {mode}")
    width = max(len(c.name) for c in comparisons)
    for c in comparisons:
        status = "" if c.identical else f"   DIFFERENT: {len(c.differences)} difference(s)"
        print(f"{c.name:<{width}}: {c.compared:>6} values, max |diff| {c.max_diff!r}{status}")
    different = [c for c in comparisons if not c.identical]
    for c in different:
        print(f"\n{c.name}:")
        for line in c.differences[:SHOWN_PER_TABLE]:
            print(f"  {line}")
        if len(c.differences) > SHOWN_PER_TABLE:
            print(f"  ... and {len(c.differences) - SHOWN_PER_TABLE} more")
    print()
    total = sum(c.compared for c in comparisons)
    if different:
        count = sum(len(c.differences) for c in different)
        print(f"DIFFERENT: {count} difference(s) in {len(different)} of {len(comparisons)} tables")
    else:
        print(f"IDENTICAL: all {total} numbers of {len(comparisons)} tables equal")
    print(f"wall time: old {walls['old']:.1f} s, new {walls['new']:.1f} s (informative only)")
    return not different


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-ref", default=DEFAULT_OLD_REF, help="git commit of the old code (default %(default)s)")
    parser.add_argument("--quick", action="store_true", help="a short complexity sweep (40 epochs, additive and mlp)")
    parser.add_argument("--child", choices=sorted(MODULES), help=argparse.SUPPRESS)
    parser.add_argument("--expect", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_child(args.child, args.expect, args.out, args.quick)
        return 0

    with tempfile.TemporaryDirectory(prefix="compare_refactor_") as tmp:
        work = Path(tmp)
        old_src, commit = extract_old_source(args.old_ref, work / "old-source")
        walls = {
            "old": run_side("old", old_src, work / "old", args.quick),
            "new": run_side("new", REPO_ROOT / "src", work / "new", args.quick),
        }
        old_meta, new_meta = read_json(work / "old" / "meta.json"), read_json(work / "new" / "meta.json")
        comparisons = [compare_inputs(old_meta, new_meta)]
        for kind in KINDS:
            comparisons += compare_kind(kind, work / "old", work / "new")
    return 0 if report(comparisons, walls, commit, args.quick) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(f"compare_refactor: {exc.code}", file=sys.stderr)
            sys.exit(2)
        raise
