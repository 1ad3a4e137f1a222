"""The approximator families (docs/method/06-complexity.md): function families that map a scene's concept values to its
embedding, their parameters, their forward pass, and what a family of a given width can memorise.

Slot ``s = (object k, concept c)``, ``S = K * C`` slots; slot s looks its value up in a learned
table, ``e_s = E_s[x_s]`` (``N(0, 1)`` initialisation, width ``d``, by default the embedding
width D). The families:

``additive``             ``W sum_s e_s + b``                       the linear baseline
``mult``                 ``W (e_1 * e_2 * ... * e_S) + b``          product over every slot
``mult_within_object``   ``W sum_k prod_c e_{k,c} + b``             product inside an object, sum across
``sum_mult``             ``W [prod_s e_s ; sum_s f_s] + b``         product plus separate additive tables
``mlp(h)``               ``W2 relu(W1 concat(e_1..e_S) + b1) + b2``  one hidden ReLU layer of width h
                         (W1 is stored as its per-slot blocks ``w1.{s}``, ``[h, d]`` each)

Everything here works on a *stack* of G independent models: every parameter has a leading
model axis and every call handles all G at once (batched matmuls, one gather per step). A
linear map that directly follows a table lookup is folded into the table, ``W e_s =
(E_s W^T)[x_s]``: the same function and the same gradients, computed once per table row
instead of once per scene (for ``additive``, ``sum_mult``'s additive half, ``mlp``'s first
layer, and ``mult_within_object``'s per-object products when objects are fewer than scenes).
"""

from __future__ import annotations

import functools
import math
import operator
import re
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from bindscope.core.errors import BindscopeError
from bindscope.core.validation import MAX_WIDTH
from bindscope.estimators.additive import design_columns
from bindscope.space.concepts import SceneSet

FAMILIES = ("additive", "mult", "mult_within_object", "sum_mult", "mlp")
DEFAULT_HIDDEN = 1024
# Polynomial degree of each family in its table entries: the order in which "simplest" is read.
SIMPLICITY = ("additive", "mult_within_object", "mult", "sum_mult", "mlp")
Params = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Family:
    """One approximator family; ``hidden`` is the MLP width (None for the others)."""

    name: str
    hidden: int | None = None

    def __post_init__(self) -> None:
        if self.name not in FAMILIES:
            raise BindscopeError(
                f"unknown approximator {self.name!r}; choose from {', '.join(FAMILIES)} (mlp as mlp(H))"
            )
        if (self.name == "mlp") != (self.hidden is not None):
            raise BindscopeError("give a hidden width for mlp only, e.g. mlp(1024)")
        if self.hidden is not None and self.hidden < 1:
            raise BindscopeError(f"mlp hidden width must be at least 1, got {self.hidden}")
        if self.hidden is not None and self.hidden > MAX_WIDTH:
            raise BindscopeError(f"mlp hidden width must be at most {MAX_WIDTH}, got {self.hidden}")

    @property
    def label(self) -> str:
        """``additive``, ..., ``mlp(1024)``."""
        return f"mlp({self.hidden})" if self.name == "mlp" else self.name

    @property
    def simplicity(self) -> tuple[int, int]:
        """Sort key: family degree, then MLP width."""
        return SIMPLICITY.index(self.name), self.hidden or 0

    @classmethod
    def parse(cls, text: str, default_hidden: int = DEFAULT_HIDDEN) -> Family:
        """``"additive"``, ``"mlp"`` (width ``default_hidden``) or ``"mlp(256)"``."""
        text = text.strip()
        match = re.fullmatch(r"mlp\((\d+)\)", text)
        if match:
            return cls("mlp", int(match.group(1)))
        if text == "mlp":
            return cls("mlp", default_hidden)
        return cls(text)


@dataclass(frozen=True)
class Layout:
    """How scenes index the flat table: slot rows, object rows, and the sizes of things.

    The table of every family stacks the slots' tables: slot ``s = k * C + c`` owns rows
    ``offset_s .. offset_s + V_c``; ``R = K * sum_c V_c`` rows in all.
    """

    num_slots: int  # K objects per scene
    sizes: tuple[int, ...]  # V_c
    object_rows: np.ndarray  # [K, U, C]: the rows of object u's values in object slot k

    @property
    def num_concepts(self) -> int:
        return len(self.sizes)

    @property
    def num_rows(self) -> int:
        return self.num_slots * sum(self.sizes)

    @property
    def num_objects(self) -> int:
        return self.object_rows.shape[1]

    @classmethod
    def of(cls, scenes: SceneSet) -> Layout:
        space, k = scenes.space, scenes.max_objects
        values = space.all_objects().astype(np.int64)  # [U, C]
        offsets = np.cumsum([0, *space.sizes[:-1]])
        width = int(sum(space.sizes))
        rows = np.stack([values + offsets + slot * width for slot in range(k)])
        return cls(k, tuple(space.sizes), rows)


def scene_rows(scenes: SceneSet) -> np.ndarray:
    """Table rows of each scene's slots, int64 ``[N, K * C]`` (scenes must have all K objects)."""
    if (scenes.num_objects() != scenes.max_objects).any():
        raise BindscopeError("approximators take scenes with all K objects; drop the smaller scenes first")
    cols, _ = design_columns(scenes, "concept_additive")
    return cols[:, 1:] - 1  # drop the intercept column


def scene_objects(scenes: SceneSet) -> np.ndarray:
    """Object-slot rows ``k * U + id_k`` of each scene, int64 ``[N, K]``."""
    u = scenes.space.num_objects
    return scenes.object_ids().astype(np.int64) + u * np.arange(scenes.max_objects)


# -- parameters -------------------------------------------------------------------------------------
def _uniform(gen: torch.Generator, shape: tuple[int, ...], fan_in: int) -> torch.Tensor:
    """``nn.Linear``'s default initialisation, U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    return (torch.rand(shape, generator=gen) * 2 - 1) / math.sqrt(fan_in)


def _init_one(family: Family, layout: Layout, width: int, dim: int, seed: int) -> Params:
    gen = torch.Generator().manual_seed(int(seed))
    rows, slots = layout.num_rows, layout.num_slots * layout.num_concepts
    p = {"table": torch.randn(rows, width, generator=gen)}
    if family.name == "mlp":
        h = family.hidden
        assert h is not None  # an mlp family always has a width
        w1 = _uniform(gen, (h, slots * width), slots * width)
        p.update(
            {f"w1.{s}": block.contiguous() for s, block in enumerate(w1.split(width, dim=1))}
        )  # W1's block per slot
        p["b1"] = _uniform(gen, (h,), slots * width)
        p["w"] = _uniform(gen, (dim, h), h)
        p["b"] = _uniform(gen, (dim,), h)
        return p
    fan_in = width
    if family.name == "sum_mult":
        p["table_add"] = torch.randn(rows, width, generator=gen)
        fan_in = 2 * width
    p["w"] = _uniform(gen, (dim, fan_in), fan_in)
    p["b"] = _uniform(gen, (dim,), fan_in)
    return p


def init_params(family: Family, layout: Layout, width: int, dim: int, seeds: list[int], device: str = "cpu") -> Params:
    """Stacked parameters of ``len(seeds)`` models; model i is initialised from ``seeds[i]`` alone."""
    if width < 1 or dim < 1:
        raise BindscopeError(f"table width and embedding width must be at least 1, got {width} and {dim}")
    ones = [_init_one(family, layout, width, dim, s) for s in seeds]
    return {k: torch.stack([p[k] for p in ones]).to(device) for k in ones[0]}


def num_parameters(family: Family, layout: Layout, width: int, dim: int) -> int:
    """Trainable parameters of one model."""
    return sum(int(v.numel()) for v in _init_one(family, layout, width, dim, 0).values())


# -- the forward pass ---------------------------------------------------------------------------------
def gather_rows(table: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``table[g, rows[g, ...]]``: ``[G, R, w]`` x ``[G, ...]`` -> ``[G, ..., w]``."""
    g, r, w = table.shape
    offsets = (torch.arange(g, device=rows.device) * r).view(g, *[1] * (rows.dim() - 1))
    return F.embedding(rows + offsets, table.reshape(g * r, w))


#: Tables of at most this many rows are summed per scene by a matmul with the scenes' row counts: its
#: gradient is a dense product, where an embedding bag's scatters every scene into the few rows.
ONE_HOT_ROWS = 256


def _gather_sum(table: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``sum_s table[g, rows[g, i, s]]`` -> ``[G, n, w]`` (a matmul with row counts for small tables,
    else one embedding-bag call)."""
    g, r, w = table.shape
    n, s = rows.shape[1:]
    if r <= ONE_HOT_ROWS:
        counts = torch.zeros(g, n, r, dtype=table.dtype, device=table.device)
        counts.scatter_add_(2, rows, torch.ones(rows.shape, dtype=table.dtype, device=table.device))
        return torch.bmm(counts, table)
    flat = rows + (torch.arange(g, device=rows.device) * r)[:, None, None]
    return F.embedding_bag(flat.reshape(g * n, s), table.reshape(g * r, w), mode="sum").view(g, n, w)


def _linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``x @ w^T + b`` per model: ``[G, n, i]``, ``[G, o, i]``, ``[G, o]`` -> ``[G, n, o]``."""
    return torch.baddbmm(b[:, None, :], x, w.transpose(1, 2))


def prepare(family: Family, params: Params, layout: Layout, num_scenes: int) -> Params:
    """Per-table-row precomputation (differentiable) for predicting ``num_scenes`` scenes."""
    name = family.name
    if name == "additive":
        return {"folded": torch.bmm(params["table"], params["w"].transpose(1, 2))}
    out: Params = {}
    if name == "sum_mult":
        d = params["table"].shape[-1]
        out["folded"] = torch.bmm(params["table_add"], params["w"][:, :, d:].transpose(1, 2))
    if name == "mlp":
        blocks = params["table"].split(list(layout.sizes) * layout.num_slots, dim=1)  # slot s's rows, in order
        w1 = [params[f"w1.{s}"] for s in range(len(blocks))]  # separate leaves: no gradient copies per slot
        return {"folded": torch.cat([torch.bmm(b, w.transpose(1, 2)) for b, w in zip(blocks, w1)], dim=1)}
    if name == "mult_within_object" and layout.num_slots * layout.num_objects < num_scenes:
        return {"folded": torch.bmm(_object_products(params["table"], layout), params["w"].transpose(1, 2))}
    if name in ("mult", "sum_mult") and layout.num_slots * layout.num_objects < num_scenes:
        return {**out, "objects": _object_products(params["table"], layout)}
    return out


def _object_products(table: torch.Tensor, layout: Layout) -> torch.Tensor:
    """``prod_c E_{k,c}[v_c(u)]`` for every object slot k and object u: ``[G, K * U, d]``."""
    rows = torch.as_tensor(layout.object_rows, device=table.device).reshape(-1, layout.num_concepts)
    return _product([table[:, rows[:, c]] for c in range(layout.num_concepts)])


def _product(factors: list[torch.Tensor]) -> torch.Tensor:
    """Elementwise product, written out (autograd's ``prod`` backward is far slower)."""
    out = factors[0]
    for f in factors[1:]:
        out = out * f
    return out


def _product_of(table: torch.Tensor, rows: torch.Tensor, columns: range) -> torch.Tensor:
    """``prod_j table[g, rows[g, i, j]]`` over the given columns of ``rows``: ``[G, n, w]``."""
    return _product([gather_rows(table, rows[..., j]) for j in columns])


def _all_slots_product(params: Params, prep: Params, rows: torch.Tensor, objects: torch.Tensor) -> torch.Tensor:
    """``prod_s e_s`` per scene: from per-object products when prepared, else slot by slot."""
    if "objects" in prep:
        return _product_of(prep["objects"], objects, range(objects.shape[-1]))
    return _product_of(params["table"], rows, range(rows.shape[-1]))


def predict(
    family: Family, params: Params, prep: Params, rows: torch.Tensor, objects: torch.Tensor, layout: Layout
) -> torch.Tensor:
    """Predicted embeddings ``[G, n, D]`` from slot rows ``[G, n, S]`` and object rows ``[G, n, K]``."""
    name = family.name
    if name == "additive":
        return _gather_sum(prep["folded"], rows) + params["b"][:, None, :]
    if name == "mlp":
        hidden = torch.relu(_gather_sum(prep["folded"], rows) + params["b1"][:, None, :])
        return _linear(hidden, params["w"], params["b"])
    if name == "mult_within_object":
        if "folded" in prep:
            return _gather_sum(prep["folded"], objects) + params["b"][:, None, :]
        c = layout.num_concepts
        per_object = [_product_of(params["table"], rows, range(k * c, (k + 1) * c)) for k in range(layout.num_slots)]
        return _linear(functools.reduce(operator.add, per_object), params["w"], params["b"])
    z = _all_slots_product(params, prep, rows, objects)
    if name == "mult":
        return _linear(z, params["w"], params["b"])
    d = z.shape[-1]  # sum_mult
    return _linear(z, params["w"][:, :, :d], params["b"]) + _gather_sum(prep["folded"], rows)


# -- capacity -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Memorises:
    """A table family wide enough to give every object (or every scene) any vector: table width ``width`` is
    at least the ``count`` of ``holds``."""

    width: int
    count: int
    holds: Literal["objects", "scenes"]


def memorising_families(families: list[Family], layout: Layout, width: int, num_scenes: int) -> dict[str, Memorises]:
    """The table families wide enough to give every object (or every scene) any vector at all.

    With table width ``d >= U`` (the number of objects), ``mult_within_object`` holds one product
    term per object (``e_{k,c}[v][j] = 1`` iff object j has value v): ``W`` then lists a free vector
    per object. With ``d`` at least the number of distinct scenes, ``mult`` and ``sum_mult`` hold one
    term per scene. Such a family can fit the seen objects without tying unseen ones to their
    concepts, so what it predicts for them is the optimiser's implicit bias, not the family's form.
    """
    out = {}
    for family in families:
        if family.name == "mult_within_object" and width >= layout.num_objects:
            out[family.label] = Memorises(width, layout.num_objects, "objects")
        elif family.name in ("mult", "sum_mult") and width >= num_scenes:
            out[family.label] = Memorises(width, num_scenes, "scenes")
    return out
