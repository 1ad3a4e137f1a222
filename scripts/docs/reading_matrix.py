"""The reading matrix (docs/method/verdicts.md): planted embeddings whose binding function is known, each through
every analysis, and the verdict of every card column.

``python scripts/docs/reading_matrix.py`` computes it and writes the table between the page's markers;
``tests/analyses/test_reading_matrix.py`` computes it again and asserts every cell against the page.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

PAGE = Path(__file__).resolve().parents[2] / "docs" / "method" / "verdicts.md"
START, END = "<!-- reading-matrix: start -->", "<!-- reading-matrix: end -->"
SEEDS = (0, 1, 2)
DIM = 32


COLORS = ["red", "blue", "green", "gray", "pink", "brown"]
SHAPES = ["cube", "ball", "cone", "star", "ring", "disk"]
#: The concept space's size per analysis: complexity reads scenes of unseen objects whose binding swaps are unseen
#: too, which a 4 x 4 space has too few of (under 10 per seed) to judge.
SIZES = {"complexity": 6}


def scenes(analysis: str | None = None) -> Any:
    """Every ordered pair of objects of a 4 x 4 concept space (256 scenes, 144 of them need binding; 6 x 6 for
    complexity, :data:`SIZES`)."""
    from bindscope.space.concepts import ConceptSpace, SceneSet

    size = SIZES.get(analysis or "", 4)
    space = ConceptSpace.from_dict({"color": COLORS[:size], "shape": SHAPES[:size]})
    return SceneSet.enumerate(space, 2)


def random_transformer(scenes: Any, seed: int = 0) -> np.ndarray:
    """The ``+rand`` of a tiny model: a one-layer scene transformer with random weights over each scene's tokens."""
    import torch

    from bindscope.embeddings.encoders.scratch.config import ScratchConfig
    from bindscope.embeddings.encoders.scratch.model import build_model
    from bindscope.embeddings.encoders.scratch.vocabulary import Vocabulary

    vocab = Vocabulary.for_space(scenes.space, scenes.max_objects)
    concepts = {c: list(v) for c, v in zip(scenes.space.concepts, scenes.space.values)}
    config = ScratchConfig(concepts=concepts, d_model=DIM, ff=2 * DIM, d_out=DIM, layers=1, heads=2)
    model = build_model(config, vocab, seed=seed).eval()
    with torch.no_grad():
        return model.scene(vocab.scene_tokens(torch.as_tensor(np.array(scenes.scenes)))).numpy().astype(np.float32)


def families() -> dict[str, Callable[[Any], np.ndarray]]:
    """Each planted family: a function from scenes to embeddings ``[N, D]``."""
    from bindscope.analyses.card import bag_counts
    from bindscope.estimators.floors import bag_embeddings
    from bindscope.space.planted import planted_embeddings

    return {
        "bag of concepts (counts)": bag_counts,
        "bag of concepts (multi-hot)": bag_embeddings,
        "+rand tiny transformer": random_transformer,
        "object-additive": lambda s: planted_embeddings(s, "object_additive", dim=DIM, noise=0.05, seed=1),
        "within-object product": lambda s: planted_embeddings(s, "mult_within_object", dim=DIM, noise=0.05, seed=1),
        "random lookup table": lambda s: planted_embeddings(s, "random", dim=DIM, seed=1),
    }


def second_tower(family: str, scenes: Any, first: np.ndarray) -> np.ndarray:
    """The other modality of a family, for the cross-modal tests: the planted binders and the bags are models whose
    two towers agree (the same embeddings); a random-weight model and a random table have towers drawn apart."""
    if family == "+rand tiny transformer":
        return random_transformer(scenes, seed=1)
    if family == "random lookup table":
        from bindscope.space.planted import planted_embeddings

        return planted_embeddings(scenes, "random", dim=DIM, seed=2)
    return first


def settings(name: str) -> Any:
    """Each analysis's settings for the matrix: its defaults over three seeds, kept small where they are costly."""
    from bindscope.analyses import get_analysis, resolve_budget

    kind = get_analysis(name).Settings
    small = dict(SMALL.get(name, {}))
    if "budget" in small:
        small["budget"] = resolve_budget(small["budget"])
    fields = kind.model_fields
    return kind(**{k: v for k, v in {"seeds": SEEDS, **small}.items() if k in fields})


#: Settings that keep the matrix small: complexity's budget and fractions, a three-value strength grid for the
#: cross-validated probes of probe and decompose (the default has ten).
GRID = (1e-3, 1e-2, 1e-1)
SMALL: dict[str, dict[str, Any]] = {
    "probe": {"strengths": GRID},
    "decompose": {"strengths": GRID},
    "complexity": {"budget": "cpu", "fractions": (0.5, 0.6), "approximators": ("additive", "mult_within_object")},
}


def inputs_for(name: str, family: str, y: np.ndarray, sc: Any) -> Any:
    """The arrays an analysis takes: the embeddings, and for the cross-modal tests the family's other tower."""
    from bindscope.analyses import AnalysisInputs, get_analysis

    other = second_tower(family, sc, y) if "other" in get_analysis(name).needs else None
    return AnalysisInputs(y, sc, other=other)


def matrix(analyses: list[str] | None = None) -> dict[str, dict[str, tuple[str, str]]]:
    """``{family: {column: (answer, reason)}}`` of every family through every analysis."""
    from bindscope.analyses import list_analyses, run_analysis

    out: dict[str, dict[str, tuple[str, str]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for family, embed in families().items():
            row = out.setdefault(family, {})
            for name in analyses or list_analyses():
                sc = scenes(name)
                y = embed(sc)
                folder = Path(tmp) / re.sub(r"\W+", "-", family) / name
                result = run_analysis(name, inputs_for(name, family, y, sc), folder, settings(name))
                for column, v in result.typed.verdicts.items():
                    row[column] = (v.answer, v.reason)
    return out


def table(cells: dict[str, dict[str, tuple[str, str]]]) -> str:
    """The matrix as a Markdown table: a row per card column (in the order of the story, with its analysis), a
    column per family, ``answer (reason)`` cells."""
    from bindscope.analyses import get_analysis, list_analyses

    order = sorted(list_analyses(), key=lambda a: (get_analysis(a).order, a))
    columns = [(a, c.key) for a in order for c in get_analysis(a).columns if c.family is None]  # attribution spaces
    families = list(cells)
    lines = ["| analysis | column | " + " | ".join(families) + " |", "|---" * (len(families) + 2) + "|"]
    for analysis, column in columns:
        shown = [f"`{cells[f][column][0]}` ({cells[f][column][1]})" if column in cells[f] else "-" for f in families]
        lines.append(f"| {analysis} | {column} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


def read_table(text: str) -> dict[str, dict[str, tuple[str, str]]]:
    """The matrix as the page holds it (between its markers): ``{family: {column: (answer, reason)}}``."""
    body = text.split(START, 1)[1].split(END, 1)[0].strip().splitlines()
    if len(body) < 3:
        return {}
    families = [c.strip() for c in body[0].strip("|").split("|")][2:]
    out: dict[str, dict[str, tuple[str, str]]] = {f: {} for f in families}
    for line in body[2:]:
        _, column, *shown = [c.strip() for c in line.strip("|").split("|")]
        for family, cell in zip(families, shown):
            if m := re.fullmatch(r"`(\w+)` \((\w+)\)", cell):
                out[family][column] = (m[1], m[2])
    return out


def write(cells: dict[str, dict[str, tuple[str, str]]], page: Path = PAGE) -> None:
    """Write the table between the page's markers."""
    text = page.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    page.write_text(f"{head}{START}\n{table(cells)}\n{END}{tail}")


if __name__ == "__main__":
    computed = matrix(sys.argv[1:] or None)
    if sys.argv[1:]:  # some analyses: keep the page's other columns
        kept = read_table(PAGE.read_text())
        computed = {f: {**kept.get(f, {}), **row} for f, row in computed.items()}
    write(computed)
    print(table(computed))
