"""The registered ``geometry`` analysis (docs/method.md §8): the shape of object embeddings.

On object vectors per slot (the single-object bank when given, else the position-averaged vectors of
the 2-object scenes): linear factorization (all objects, held-out objects, raw and whitened),
orthogonality and rank of the concepts' components, compositional generalisation of linear heads,
rank axes of ordinal concepts, and the research code's 3-D MDS picture of one quadruple.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field, field_validator

from bindscope.analyses.base import Analysis, Progress, Result, Rows, RunContext
from bindscope.analyses.geometry.compute import SweepSettings, composite_means, scene_parts, simple_grid, slot_geometry
from bindscope.analyses.geometry.heads import chance
from bindscope.analyses.geometry.mds import Picture, composite_keys, quad_picture
from bindscope.analyses.geometry.structure import RANK_TOLERANCE
from bindscope.analyses.geometry.sweeps import row
from bindscope.analyses.geometry.vectors import object_vectors
from bindscope.analyses.inputs import AnalysisInputs
from bindscope.analyses.results import ResultFiles
from bindscope.core.errors import BindscopeError
from bindscope.core.tidy import spread, tidy
from bindscope.core.validation import MAX_ITEMS, MAX_SCENE_COUNT, Seeds, Settings, short_repr
from bindscope.estimators.metrics import format_spread
from bindscope.estimators.scene_index import concept_roles
from bindscope.space.concepts import ConceptSpace, SceneSet
from bindscope.space.splits import DEFAULT_SEEDS, check_fractions, fraction_count

EXTRA_COLUMNS = ("position", "fraction", "labelled", "objects")
FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
LABELLED = (2, 8, 32)
#: The fraction the terminal reports held-out numbers at (the nearest one run).
HEADLINE_FRACTION = 0.5
TABLES = ("objects", "spectra", "cosines")


class GeometrySettings(Settings):
    """Object-level fractions and seeds of the held-out sweep, the ordinal concepts, the MDS quadruple.

    ``fractions`` x ``seeds``: object-level splits (covering order) of the held-out factorization and
    the linear heads. ``whitening_ridge``: times the mean eigenvalue, added before whitening.
    ``head_c``: inverse L2 strength of the linear heads. ``rank_tolerance``: singular values below
    it times the largest do not count in the numerical rank. ``ordinal``: concepts to treat as ordinal
    (values in the space's order) besides those the dataset marks. ``labelled``: how many labelled
    objects give a rank axis (and all of them). ``attribute`` / ``noun`` and ``quad`` (value names of
    attribute i, noun j, attribute k, noun l; default the first two of each): the MDS picture.
    """

    fractions: tuple[float, ...] = FRACTIONS
    seeds: Seeds = DEFAULT_SEEDS
    whitening_ridge: float = Field(0.1, ge=0)
    head_c: float = Field(10.0, gt=0)
    rank_tolerance: float = Field(RANK_TOLERANCE, gt=0, lt=1)
    ordinal: tuple[str, ...] = ()
    labelled: tuple[int, ...] = LABELLED
    attribute: str | None = None
    noun: str | None = None
    quad: tuple[str, ...] | None = None
    mds: bool = True

    @field_validator("quad")
    @classmethod
    def _quad(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is not None and len(v) != 4:
            raise ValueError(
                f"name attribute i, noun j, attribute k, noun l: 4 value names, e.g. red,cube,blue,sphere; got {len(v)}"
            )
        return v

    @field_validator("fractions")
    @classmethod
    def _fractions(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        return tuple(sorted(check_fractions(v)))

    @field_validator("labelled")
    @classmethod
    def _labelled(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if any(n < 2 for n in v):
            raise ValueError(f"a rank axis needs at least 2 labelled objects, got {short_repr(list(v))}")
        if any(n > MAX_SCENE_COUNT for n in v):
            raise ValueError(f"labelled counts must be at most {MAX_SCENE_COUNT}, got {short_repr(list(v))}")
        if len(v) > MAX_ITEMS:
            raise ValueError(f"give at most {MAX_ITEMS} labelled counts, got {len(v)}")
        return tuple(sorted(set(v)))

    def sweep(self, fractions: tuple[float, ...]) -> SweepSettings:
        return SweepSettings(
            fractions, tuple(self.seeds), self.labelled, self.whitening_ridge, self.head_c, self.rank_tolerance
        )


def usable_fractions(fractions: tuple[float, ...], objects: int) -> tuple[tuple[float, ...], list[str]]:
    """The fractions that leave objects on both sides, and a warning for each that does not."""
    keep = tuple(f for f in fractions if 0 < fraction_count(f, objects) < objects)
    dropped = [f for f in fractions if f not in keep]
    warnings = (
        [f"fractions {', '.join(f'{f:g}' for f in dropped)} leave no seen or no unseen objects of {objects}; skipped"]
        if dropped
        else []
    )
    if not keep:
        raise BindscopeError(
            f"no fraction of {', '.join(f'{f:g}' for f in fractions)} splits {objects} objects into seen and unseen "
            f"ones; choose fractions in [{1 / objects:.3g}, {(objects - 1) / objects:.3g}]"
        )
    return keep, warnings


def resolve_quad(space: ConceptSpace, roles: dict[str, str], quad: tuple[str, ...] | None) -> tuple[int, ...]:
    """Value indices (attribute i, noun j, attribute k, noun l) of the quadruple's names, or the default."""
    a, o = roles["attribute"], roles["noun"]
    if quad is None:
        sizes = [space.sizes[space.concept_index(c)] for c in (a, o)]
        return (0, 0, min(1, sizes[0] - 1), min(1, sizes[1] - 1))
    return tuple(space.value_index(c, v) for c, v in zip((a, o, a, o), quad))


def mds_roles(space: ConceptSpace, settings: GeometrySettings, noun: str | None) -> tuple[dict[str, str] | None, str]:
    """The attribute and noun of the picture, or why there is none."""
    if not settings.mds:
        return None, "not asked for (--no-mds)"
    if space.num_concepts < 2:
        return None, "the space has one concept; the picture needs an attribute and a noun"
    if settings.attribute is None and space.num_concepts > 2:
        return None, f"the space has {space.num_concepts} concepts; name the picture's --attribute (and --noun)"
    scenes = SceneSet.singles(space)
    return concept_roles(scenes, settings.attribute, settings.noun or noun), ""


def picture_parts(
    inputs: AnalysisInputs, vectors: np.ndarray, present: np.ndarray, roles: dict[str, str], quad: tuple[int, ...]
) -> tuple[Picture, int]:
    """The MDS picture of the quadruple, and how many composites had 2-object scenes.

    With 2-object scene embeddings, the simple objects and the means come from them as in the research
    code; from single-object embeddings alone, the simple objects are those and there are no composites.
    """
    space, scenes = inputs.scenes.space, inputs.scenes
    keys = composite_keys(quad)  # type: ignore[arg-type]
    means: tuple[np.ndarray, np.ndarray] | None = None
    composites: dict = {}
    rows = scenes.full() if scenes.max_objects == 2 else np.arange(0)
    if len(rows):  # 2-object scene embeddings (a single-object folder has 1-object scenes)
        y, two = np.asarray(inputs.embeddings)[rows], scenes.subset(rows)
        simple, attr, noun = scene_parts(y, two, roles)
        means = (attr, noun)
        composites = composite_means(y, two, roles, keys)
    else:
        simple = simple_grid(vectors, present, space, roles)
    i, j, k, m = quad
    needed = [simple[i, j], simple[k, m], simple[i, m], simple[k, j]]
    if means is not None:
        needed += [means[0][i], means[0][k], means[1][j], means[1][m]]
    if any(np.isnan(v).any() for v in needed):
        raise BindscopeError("the MDS quadruple names an object no scene holds; choose another --quad")
    return quad_picture(simple, composites, quad, means), len(composites)  # type: ignore[arg-type]


def geometry_analysis(inputs: AnalysisInputs, settings: GeometrySettings, progress: Progress | None = None) -> Result:
    """Every measure on every slot's object vectors, then the MDS picture."""
    space = inputs.scenes.space.with_ordinal(settings.ordinal)
    scenes = SceneSet(space, inputs.scenes.scenes)
    bank = object_vectors(np.asarray(inputs.embeddings), scenes, inputs.singles)
    fractions, warnings = usable_fractions(settings.fractions, space.num_objects)
    sweep = settings.sweep(fractions)
    roles, why = mds_roles(space, settings, inputs.noun)  # bad names fail before the work
    quad = resolve_quad(space, roles, settings.quad) if roles is not None else None
    total, done = 2 * bank.positions + 1, 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total)

    rows: list[dict[str, Any]] = []
    tables: dict[str, list[pd.DataFrame]] = {name: [] for name in TABLES}
    for p in range(bank.positions):
        present = np.flatnonzero(bank.present[p])
        if len(present) < 2:
            raise BindscopeError(f"slot {p} has {len(present)} object vector(s); the geometry needs at least two")
        slot = slot_geometry(bank.vectors[p], space, present, sweep, tick)
        rows += [{**r, "position": p} for r in slot.rows]
        for name in TABLES:
            part = getattr(slot, name)
            part.insert(0, "position", p)
            tables[name].append(part)
    rows += [{**row("chance", g, "accuracy", 0, v), "position": -1} for g, v in chance(space).items()]
    parts: dict[str, Any] = {
        "source": bank.source,
        "positions": bank.positions,
        "dim": int(np.shape(inputs.embeddings)[1]),
        "space": space,
        "fractions": fractions,
        "mds": None,
    }
    if roles is None or quad is None:
        parts["mds_absent"] = why
    else:
        every = np.flatnonzero(bank.present.any(axis=0))
        mean_vectors = np.nanmean(np.where(bank.present[..., None], bank.vectors, np.nan), axis=0)
        picture, composites = picture_parts(inputs, np.nan_to_num(mean_vectors), every, roles, quad)
        rows.append({**row("mds", "all", "stress", 0, picture.stress), "position": -1})
        rows.append({**row("mds", "all", "normalized_stress", 0, picture.normalized_stress), "position": -1})
        names = [space.values[space.concept_index(roles[r])][i] for r, i in zip(("attribute", "noun") * 2, quad)]
        parts["mds"] = {"picture": picture, "roles": roles, "quad": names, "composites": composites}
    tick()
    table = tidy(rows, EXTRA_COLUMNS)
    table["position"] = table["position"].astype("int64")
    out_tables = {name: pd.concat(parts_, ignore_index=True) for name, parts_ in tables.items()}
    if parts["mds"] is not None:
        out_tables["mds_points"] = mds_points(parts["mds"]["picture"])
    return Result(table, out_tables, warnings, parts)


def mds_points(picture: Picture) -> pd.DataFrame:
    """The picture's points: label, category, 3-D coordinates."""
    x = picture.coords
    return pd.DataFrame(
        {"label": picture.labels, "category": picture.categories, "x": x[:, 0], "y": x[:, 1], "z": x[:, 2]}
    )


def headline_fraction(fractions: tuple[float, ...] | list[float]) -> float:
    """The fraction the terminal reports: 0.5, else the nearest one run."""
    return min(fractions, key=lambda f: (abs(f - HEADLINE_FRACTION), f))


def value(table: pd.DataFrame, variant: str, group: str, metric: str) -> float | None:
    part = table[(table.variant == variant) & (table.group == group) & (table.metric == metric)]
    return float(part["value"].iloc[0]) if len(part) else None


def position_summary(table: pd.DataFrame, space: ConceptSpace) -> dict[str, Any]:
    """The numbers of one slot position."""
    held = table[table.fraction.notna() & table.variant.isin(["raw", "whitened", "heads"])]
    held_out: dict[str, Any] = {}
    for f, part in held.groupby("fraction", sort=True):
        node: dict[str, Any] = {}
        for variant in ("raw", "whitened"):
            v = part[(part.variant == variant) & (part.metric == "r2_test")]["value"]
            node[f"r2_{variant}"] = spread(v) if len(v) else None
        heads = part[part.variant == "heads"]
        node["heads"] = {str(g): spread(h["value"]) for g, h in heads.groupby("group", sort=False)}
        node["objects"] = int(part[part.variant == "heads"]["objects"].iloc[0])  # the unseen objects
        left_out = part[(part.variant == "raw") & (part.metric == "undetermined")]["value"]
        node["undetermined"] = float(left_out.mean()) if len(left_out) else 0.0  # unseen objects left out, per seed
        held_out[f"{f:g}"] = node
    concepts = {
        c: {
            "numerical": value(table, "rank", c, "numerical_rank"),
            "effective": value(table, "rank", c, "effective_rank"),
            "max": value(table, "rank", c, "max_rank"),
            "share": value(table, "factorization", c, "share"),
            "share_whitened": value(table, "factorization_whitened", c, "share"),
        }
        for c in space.concepts
    }
    angles = table[table.variant == "angles"]
    axes = table[table.variant.str.startswith("rank_axis:")]
    rank_axes: dict[str, Any] = {}
    for key, part in axes.groupby(["group", "variant", "labelled", "metric"], sort=True):
        concept, variant, n, metric = (str(k) for k in key)
        method = variant.split(":", 1)[1]
        node = rank_axes.setdefault(concept, {}).setdefault(method, {}).setdefault(f"{int(float(n))}", {})
        node[metric] = spread(part["value"])
    return {
        "r2": value(table, "factorization", "all", "r2"),
        "r2_whitened": value(table, "factorization_whitened", "all", "r2"),
        "concepts": concepts,
        "orthogonality": {
            "within": value(table, "orthogonality", "within", "mean_abs_cos"),
            "across": value(table, "orthogonality", "across", "mean_abs_cos"),
            "angles": {
                str(pair): {str(m): float(v) for m, v in zip(part.metric, part.value)}
                for pair, part in angles.groupby("group", sort=False)
            },
        },
        "rank_sum": value(table, "rank", "all", "sum_rank"),
        "held_out": held_out,
        "rank_axes": rank_axes,
    }


def geometry_summary(result: Result, settings: GeometrySettings) -> dict[str, Any]:
    """The main numbers of ``bindscope geometry``."""
    parts, table = result.parts, result.table
    space: ConceptSpace = parts["space"]
    mds = parts["mds"]
    return {
        "source": parts["source"],
        "dim": parts["dim"],
        "concepts": {c: {"values": n, "ordinal": c in space.ordinal} for c, n in zip(space.concepts, space.sizes)},
        "objects": space.num_objects,
        "fractions": list(parts["fractions"]),
        "headline_fraction": headline_fraction(parts["fractions"]),
        "chance": {str(g): float(v) for g, v in zip(*_chance(table))},
        "positions": [position_summary(table[table.position == p], space) for p in range(parts["positions"])],
        "mds": None
        if mds is None
        else {
            "roles": mds["roles"],
            "quad": mds["quad"],
            "points": len(mds["picture"].labels),
            "composites": mds["composites"],
            "stress": mds["picture"].stress,
            "normalized_stress": mds["picture"].normalized_stress,
        },
        "mds_absent": parts.get("mds_absent"),
    }


def _chance(table: pd.DataFrame) -> tuple[list[str], list[float]]:
    part = table[table.variant == "chance"]
    return list(part.group), list(part.value)


def number(v: float | None, digits: int = 3) -> str:
    return "-" if v is None or not np.isfinite(v) else f"{v:.{digits}f}"


def held_r2(node: dict[str, Any], key: str) -> str:
    """A held-out R² cell: "undetermined" where the seen objects determine no unseen one."""
    if node.get(key) is None and node.get("undetermined"):
        return "undetermined"
    return format_spread(node.get(key))


def headline_rows(summary: dict[str, Any]) -> Rows:
    """Measures down, slot positions across, a reference last."""
    positions = summary["positions"]
    names = ["objects"] if len(positions) == 1 else [f"slot {p + 1}" for p in range(len(positions))]
    f = summary["headline_fraction"]
    key = f"{f:g}"
    rows: Rows = [("measure", *names, "reference")]

    def add(label: str, cells: list[str], ref: str) -> None:
        rows.append((label, *cells, ref))

    add("factorization R² (all objects)", [number(p["r2"]) for p in positions], "1 = exactly additive")
    add("  whitened", [number(p["r2_whitened"]) for p in positions], "")
    held = [p["held_out"].get(key, {}) for p in positions]
    add(f"held-out R² (f={f:g})", [held_r2(h, "r2_raw") for h in held], "<= 0: no better than the mean")
    add("  whitened", [held_r2(h, "r2_whitened") for h in held], "")
    chances = sorted(summary["chance"].items(), key=lambda kv: kv[0] != "object")  # the object first
    for group, ref in chances:
        label = f"linear head {group} acc (f={f:g})" if group == "object" else f"  {group} acc"
        add(label, [format_spread(h.get("heads", {}).get(group), 3) for h in held], f"chance {ref:.3f}")
    add("|cos| within concepts", [number(p["orthogonality"]["within"]) for p in positions], "")
    add("|cos| across concepts", [number(p["orthogonality"]["across"]) for p in positions], "0 = orthogonal")
    for c in summary["concepts"]:
        cells = [
            f"{number(p['concepts'][c]['numerical'], 0)} / {number(p['concepts'][c]['effective'], 1)}"
            for p in positions
        ]
        add(f"rank {c} (numerical / effective)", cells, f"max {summary['concepts'][c]['values'] - 1}")
    add("sum of concept ranks", [number(p["rank_sum"], 0) for p in positions], f"width D = {summary['dim']}")
    for c in [c for c, v in summary["concepts"].items() if v["ordinal"]]:
        for method in ("extremes", "least_squares"):
            cells, ceiling = [], None
            for p in positions:
                per_n = p["rank_axes"].get(c, {}).get(method, {})
                n = max(per_n, key=int) if method == "least_squares" and per_n else min(per_n, key=int, default=None)
                cells.append(format_spread(per_n[n]["spearman"]) + f" (n={n})" if n else "-")
                ceiling = ceiling or (per_n[n]["spearman_ceiling"]["mean"] if n else None)
            ref = f"perfect order: {ceiling:.3f}" if ceiling is not None else ""
            add(f"rank axis {c} Spearman, {method.replace('_', ' ')}", cells, ref)
    mds = summary["mds"]
    if mds:
        add("MDS normalised stress", [number(mds["normalized_stress"], 4)] + [""] * (len(positions) - 1), "0 = exact")
    return rows


class GeometryAnalysis(Analysis):
    """``geometry``: linear factorization, orthogonality, rank, linear heads, rank axes and the MDS picture."""

    name = "geometry"
    title = "What shape do object embeddings have? Factorization, orthogonality, rank, linear heads, rank axes, MDS."
    Settings = GeometrySettings
    uses = frozenset({"singles"})
    reads_single_objects = True
    extra_columns = EXTRA_COLUMNS

    def compute(self, inputs: AnalysisInputs, settings: GeometrySettings, progress: Progress | None = None) -> Result:
        return geometry_analysis(inputs, settings, progress)

    def summarize(self, result: Result, settings: GeometrySettings) -> dict[str, Any]:
        return geometry_summary(result, settings)

    def headline(self, summary: dict[str, Any]) -> Rows:
        return headline_rows(summary)

    def notes(self, summary: dict[str, Any]) -> list[str]:
        source = {
            "single": "the single-object bank (each object alone)",
            "pos-avg": "position-averaged 2-object scenes (pos-avg)",
        }[summary["source"]]
        lines = [f"object vectors: {source}; {summary['objects']:,} objects, width {summary['dim']}"]
        ordinal = [c for c, v in summary["concepts"].items() if v["ordinal"]]
        if not ordinal:
            lines.append("rank axes: absent, no ordinal concept (mark one in the space, or pass --ordinal CONCEPT)")
        if summary["mds"] is None:
            lines.append(f"MDS picture: absent, {summary['mds_absent']}")
        else:
            m = summary["mds"]
            lines.append(
                f"MDS picture of ({', '.join(m['quad'])}): {m['points']} points, {m['composites']} composites"
                + ("" if m["composites"] else " (no 2-object scene embeddings given)")
            )
        return lines

    def files(self, result: Result, settings: GeometrySettings, context: RunContext) -> ResultFiles:
        from bindscope.analyses.geometry.plot import geometry_plots

        def extra(stage: Path) -> None:
            geometry_plots(result, stage / "plots", context.title)

        return ResultFiles(result.table, dict(result.tables), extra)
