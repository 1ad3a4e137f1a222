"""The CLIP-in-miniature study's table (docs/guides/clip-in-miniature.md), read from a finished run of
``configs/clip-study.yaml``.

``python scripts/docs/clip_study.py RUN`` reads every scratch model of the run (its training summary, the
probe summaries of its image and text embeddings) and writes one row per condition, over its seeds,
between the page's markers. A condition is a group of scratch entries whose names differ only in their
``-sN`` suffix.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "clip-in-miniature.md"
START, END = "<!-- clip-study:start -->", "<!-- clip-study:end -->"
DATASET = "clevr2d"
#: The tension: a bag-like similarity (held-out attribute swap within this of 50%) while the image probe beats
#: the bag of concepts by at least this much.
BAG_LIKE, BEATS = 0.05, 0.05
#: Config fields that differ within a condition (the seed) or say nothing of it (the name, the dataset folder).
NOT_CONDITION = ("seed", "name", "dataset")


def conditions(run: Path) -> dict[str, list[str]]:
    """The run's scratch entries grouped into conditions, in the run config's order.

    Parameters
    ----------
    run
        A finished ``bindscope run`` folder.

    Returns
    -------
    dict
        ``{condition: [entry name, ...]}``, the condition being an entry's name without its ``-sN`` suffix.
    """
    entries = yaml.safe_load((run / "config.yaml").read_text())["scratch"]
    out: dict[str, list[str]] = {}
    for entry in entries:
        out.setdefault(re.sub(r"-s\d+$", "", entry["name"]), []).append(entry["name"])
    return out


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file, with the path in the error when it is missing (an unfinished run)."""
    if not path.is_file():
        raise SystemExit(f"{path} is missing: is the run finished? (rerun `bindscope run` on it)")
    return json.loads(path.read_text())


def changes(run: Path, name: str) -> str:
    """What an entry's training config changes from its built-in config (``clip-tiny``), e.g. ``batches: natural``."""
    from bindscope.scratch.config import load_config

    config = read_json(run / "scratch" / name / "model" / "config.json")["config"]
    base = load_config(config["name"]).to_dict()
    diff = [f"{k}: {_plain(v)}" for k, v in config.items() if k not in NOT_CONDITION and base.get(k) != v]
    return ", ".join(diff) or "none"


def _plain(value: Any) -> str:
    """A config value as YAML writes it (``false``, not ``False``)."""
    return json.dumps(value) if isinstance(value, bool) else str(value)


def probe_column(run: Path, label: str) -> tuple[float, float, float]:
    """The probe card column "objects recoverable" of an embedding folder: its value, bag and ``+rand`` floors."""
    summary = read_json(run / "results" / DATASET / label / "probe" / "summary.json")
    verdict = summary["verdicts"]["objects recoverable"]
    floors = {f["name"]: f["value"] for f in verdict["floors"]}
    return verdict["value"], floors["bag of concepts"], floors.get("+rand", float("nan"))


def seed_row(run: Path, name: str) -> dict[str, float]:
    """Every number of one trained model (one seed of a condition), as fractions (seconds for ``seconds``)."""
    training = read_json(run / "scratch" / name / "model" / "summary.json")
    row = {k: float(v) for k, v in training["selected"].items()}
    row["strict_bag"] = float(training["floors"]["heldout_strict_at_1"]["bag"])
    row["seconds"] = float(training["seconds"])
    for tower in ("image", "text"):
        row[f"{tower}_probe"], row[f"{tower}_bag"], row[f"{tower}_rand"] = probe_column(run, f"{name}-{tower}")
    return row


def holds_tension(row: dict[str, float], towers: Sequence[str] = ("image",)) -> bool:
    """Whether one model holds the tension: a bag-like held-out attribute swap while the object probe of each of
    ``towers`` beats the bag of concepts (``("image", "text")``: the paper's, where both embeddings carry the
    objects)."""
    bag_like = abs(row["heldout_swap_attribute"] - 0.5) <= BAG_LIKE
    return bag_like and all(row[f"{t}_probe"] - row[f"{t}_bag"] >= BEATS for t in towers)


def mean_sd(values: Sequence[float], scale: float = 100.0, spread: bool = False, digits: int = 1) -> str:
    """``mean ± sd`` (sample sd over seeds) of ``values`` times ``scale``, with ``(min–max)`` when ``spread``."""
    x = np.asarray(values, dtype=float) * scale
    sd = x.std(ddof=1) if len(x) > 1 else 0.0
    text = f"{x.mean():.{digits}f} ± {sd:.{digits}f}"
    return f"{text} ({x.min():.{digits}f}–{x.max():.{digits}f})" if spread else text


def mean(values: Iterable[float], scale: float = 100.0) -> str:
    """The mean of a floor over seeds, as a percentage."""
    return f"{np.mean(list(values)) * scale:.1f}"


def column(rows: list[dict[str, float]], key: str) -> list[float]:
    """One number of every seed of a condition."""
    return [r[key] for r in rows]


def similarity_cells(rows: list[dict[str, float]]) -> list[str]:
    """The image-text similarity cells of a condition (training summaries, held-out scenes unless named)."""
    return [
        mean_sd(column(rows, "heldout_concept_at_1")),
        mean_sd(column(rows, "train_swap_attribute"), spread=True),
        mean_sd(column(rows, "heldout_swap_attribute"), spread=True),
        mean_sd(column(rows, "heldout_swap_noun"), spread=True),
        mean_sd(column(rows, "heldout_order_sensitivity")),
        f"{mean_sd(column(rows, 'heldout_strict_at_1'))} / {mean(column(rows, 'strict_bag'))}",
    ]


def probe_cell(rows: list[dict[str, float]], tower: str) -> str:
    """A tower's object probe over the seeds, then the means of its bag-of-concepts and ``+rand`` floors."""
    floors = " / ".join(mean(column(rows, f"{tower}_{floor}")) for floor in ("bag", "rand"))
    return f"{mean_sd(column(rows, f'{tower}_probe'))} / {floors}"


def tower_cells(rows: list[dict[str, float]]) -> list[str]:
    """The towers-on-their-own cells of a condition: each probe beside its floors, the tension count, seconds."""
    return [
        probe_cell(rows, "image"),
        probe_cell(rows, "text"),
        f"{sum(holds_tension(r) for r in rows)} of {len(rows)}",
        f"{sum(holds_tension(r, ('image', 'text')) for r in rows)} of {len(rows)}",
        mean_sd(column(rows, "seconds"), scale=1.0, digits=0),
    ]


SIMILARITY = (
    "concept@1",
    "attribute swap, trained on",
    "attribute swap",
    "noun swap",
    "order sensitivity",
    "strict top-1 / bag",
)
TOWERS = (
    "image probe / bag / +rand",
    "text probe / bag / +rand",
    "tension (seeds)",
    "tension, text too",
    "training s",
)


def markdown(header: Sequence[str], body: list[list[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in body)])


def tables(run: Path) -> str:
    """Both tables of the page, one row per condition: the similarity (from training) and the towers (probes)."""
    sim, towers = [], []
    for condition, names in conditions(run).items():
        rows = [seed_row(run, n) for n in names]
        label = [f"`{condition}`", changes(run, names[0])]
        sim.append([*label, *similarity_cells(rows)])
        towers.append([f"`{condition}`", *tower_cells(rows)])
    head = ("condition", "changes from clip-tiny")
    return f"{markdown((*head, *SIMILARITY), sim)}\n\n{markdown(('condition', *TOWERS), towers)}"


def write(body: str, page: Path = PAGE) -> None:
    """Write ``body`` between the page's markers (the rest of the page is kept)."""
    text = page.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    page.write_text(f"{head}{START}\n{body}\n{END}{tail}")


def per_seed(run: Path) -> str:
    """Every model's headline numbers, one line each (to read the seeds behind the means)."""
    keys = ("heldout_concept_at_1", "heldout_swap_attribute", "heldout_swap_noun", "heldout_order_sensitivity")
    lines = []
    for names in conditions(run).values():
        for name in names:
            row = seed_row(run, name)
            numbers = " ".join(f"{k.removeprefix('heldout_')}={row[k]:.3f}" for k in keys)
            probes = f"image={row['image_probe']:.3f} (bag {row['image_bag']:.3f}) text={row['text_probe']:.3f}"
            tension = f"tension={holds_tension(row)} text too={holds_tension(row, ('image', 'text'))}"
            lines.append(f"{name:<20} {numbers} {probes} {tension}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Read a finished study run and write its tables into the page (``--print`` only prints them)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished run of configs/clip-study.yaml")
    parser.add_argument("--page", type=Path, default=PAGE, help="the page to write (default: the guide)")
    parser.add_argument("--print", action="store_true", help="print the tables and every seed; write nothing")
    args = parser.parse_args(argv)
    body = tables(args.run)
    if args.print:
        print(f"{body}\n\n{per_seed(args.run)}")
        return
    write(body, args.page)
    print(body)


if __name__ == "__main__":
    main()
