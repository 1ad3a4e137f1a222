"""The paper's intervention table from ``bindscope intervene`` result folders (``--table``).

Rows are dataset x model (x edit, when noun edits are present); columns are the group (shared or
different edited value; overall where a dataset has no split) x bank x metric (probe, retrieval), at
k = 1, in percent, mean over target seeds (± std with several). Written as Markdown and LaTeX.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bindscope.analyses.intervene import ALL, GROUPS, TABLE_K, AtK, InterveneSummary, at_k
from bindscope.analyses.results import LoadedResult, load_result
from bindscope.core.errors import BindscopeError
from bindscope.core.io import atomic_write_text, staged_dir
from bindscope.core.locks import writes
from bindscope.estimators.object_banks import BANKS

TABLE_METRICS = ("probe", "retrieval")
MISSING = "–"


def result_label(result: LoadedResult) -> tuple[str, str]:
    """(dataset, model) of a result folder, from its header."""
    inputs = result.header.inputs
    ds = inputs.get("dataset") or {}
    emb = inputs.get("embeddings") or {}
    dataset = ds.get("preset") or ("in-memory" if ds.get("in_memory") else "?")
    model = emb.get("model_spec") or emb.get("name") or "embeddings"
    if emb.get("modality"):
        model = f"{model} ({emb['modality']})"
    return str(dataset), str(model)


def cell(part: AtK | None, metric: str) -> str:
    """Percent, mean (± std over seeds), or a dash."""
    if part is None:
        return MISSING
    value = getattr(part, metric)
    text = f"{100 * value.mean:.1f}"
    return text + (f" ± {100 * value.std:.1f}" if value.std is not None else "")


def numbers_of(result: LoadedResult) -> InterveneSummary:
    """The typed numbers of an intervene result (validated when it was loaded)."""
    if not isinstance(result.typed, InterveneSummary):
        raise BindscopeError(f"{result.path} does not hold intervene numbers; run intervene again")
    return result.typed


def table_rows(results: Sequence[LoadedResult]) -> tuple[list[str], list[list[str]], list[str]]:
    """The groups shown, and one row per (dataset, model, edit): labels, then group x bank x metric cells."""
    seen: dict[tuple[str, ...], Path] = {}
    groups = list(GROUPS)
    numbers = {r.path: numbers_of(r) for r in results}
    if any(numbers[r.path].groups == [ALL] for r in results):
        groups.append(ALL)
    with_edit = any(e != "attribute" for r in results for e in numbers[r.path].edits)
    rows = []
    for r in results:
        s = numbers[r.path]
        edits, ks = s.edits, s.k
        if TABLE_K not in ks:
            raise BindscopeError(
                f"{r.path} was run at k = {', '.join(f'{k:g}' for k in ks)}; the table is at k = {TABLE_K:g}: "
                f"run it again with --k including {TABLE_K:g}"
            )
        with r.reading():
            dataset, model = result_label(r)
        for edit in edits:
            key = (dataset, model, edit)
            if key in seen:
                raise BindscopeError(
                    f"{seen[key]} and {r.path} both hold {dataset} x {model} ({edit}); give one of them"
                )
            seen[key] = r.path
            label = [dataset, model, edit] if with_edit else [dataset, model]
            cells = [cell(at_k(s, edit, bank, g, TABLE_K), m) for g in groups for bank in BANKS for m in TABLE_METRICS]
            rows.append(label + cells)
    labels = ["dataset", "model", "edit"] if with_edit else ["dataset", "model"]
    return groups, rows, labels


def markdown(groups: list[str], rows: list[list[str]], labels: list[str]) -> str:
    """A GitHub Markdown table, one header row naming group · bank · metric."""
    names = {ALL: "overall"}
    head = labels + [f"{names.get(g, g)} · {b} · {m}" for g in groups for b in BANKS for m in TABLE_METRICS]
    lines = [
        f"Interventions at k = {TABLE_K:g}: accuracy % "
        "(probe: joint concept probes; retrieval: top-1 among all scenes)",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join(["---"] * len(labels) + ["---:"] * (len(head) - len(labels))) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


LATEX_SPECIALS = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}"}


def latex_escape(text: str) -> str:
    """Text safe in LaTeX (backslashes first, so that the escapes added are not escaped again)."""
    out = text.replace("\\", "\x00")
    for char, escaped in LATEX_SPECIALS.items():
        out = out.replace(char, escaped)
    out = out.replace("~", r"\textasciitilde{}").replace("^", r"\^{}").replace("\x00", r"\textbackslash{}")
    return out.replace("±", r"$\pm$").replace(MISSING, "--")


def latex(groups: list[str], rows: list[list[str]], labels: list[str]) -> str:
    """A booktabs tabular: group and bank as spanning header rows."""
    names = {ALL: "overall"}
    n_lab, per_group = len(labels), len(BANKS) * len(TABLE_METRICS)
    spec = "l" * n_lab + ("r" * per_group) * len(groups)
    blank = " & ".join([""] * n_lab)
    group_head = (
        blank + " & " + " & ".join(rf"\multicolumn{{{per_group}}}{{c}}{{{names.get(g, g)}}}" for g in groups) + r" \\"
    )
    rules = "".join(
        rf"\cmidrule(lr){{{n_lab + 1 + i * per_group}-{n_lab + (i + 1) * per_group}}}" for i in range(len(groups))
    )
    bank_head = (
        blank
        + " & "
        + " & ".join(rf"\multicolumn{{{len(TABLE_METRICS)}}}{{c}}{{{latex_escape(b)}}}" for _ in groups for b in BANKS)
        + r" \\"
    )
    metric_head = " & ".join(labels + [m for _ in groups for _ in BANKS for m in TABLE_METRICS]) + r" \\"
    body = [" & ".join(latex_escape(c) for c in r) + r" \\" for r in rows]
    return (
        "\n".join(
            [
                f"% bindscope intervene --table: accuracy % at k = {TABLE_K:g}",
                rf"\begin{{tabular}}{{{spec}}}",
                r"\toprule",
                group_head,
                rules,
                bank_head,
                metric_head,
                r"\midrule",
                *body,
                r"\bottomrule",
                r"\end{tabular}",
            ]
        )
        + "\n"
    )


@writes("out", what="table folder", kind="table", reads=("folders",))
def write_tables(folders: Sequence[str | Path], out: str | Path, *, overwrite: bool = False) -> list[Path]:
    """Read ``intervene`` result folders and write ``table.md`` and ``table.tex`` into ``out``."""
    if not folders:
        raise BindscopeError("give at least one intervene result folder to tabulate")
    results = [load_result(f, "intervene") for f in folders]
    groups, rows, labels = table_rows(results)
    out = Path(out)
    with staged_dir(out, kind="table", overwrite=overwrite) as stage:
        atomic_write_text(stage / "table.md", markdown(groups, rows, labels))
        atomic_write_text(stage / "table.tex", latex(groups, rows, labels))
    return [out / "table.md", out / "table.tex"]
