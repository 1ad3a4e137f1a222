"""Validated, frozen settings: pydantic models whose errors are one readable line."""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from typing_extensions import Self

from bindscope.core.devices import check_device
from bindscope.core.errors import BindscopeError

BOUNDS = {
    "greater_than_equal": "at least",
    "greater_than": "greater than",
    "less_than_equal": "at most",
    "less_than": "less than",
}
BOUNDS_KEY = {"greater_than_equal": "ge", "greater_than": "gt", "less_than_equal": "le", "less_than": "lt"}


def format_validation(exc: ValidationError) -> str:
    """A pydantic error as one line: ``field: problem; ...``."""
    return "; ".join(format_error(err) for err in exc.errors())


def format_error(err: Any) -> str:
    """One of pydantic's errors (an item of ``ValidationError.errors()``) as ``field: problem``."""
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    ctx = err.get("ctx") or {}
    if err["type"] == "extra_forbidden":
        msg = "unknown setting; check its spelling"
    elif err["type"] in BOUNDS:
        msg = f"must be {BOUNDS[err['type']]} {ctx[BOUNDS_KEY[err['type']]]}, got {err['input']!r}"
    return f"{loc}: {msg}" if loc else msg


def check_fields(data: Mapping[str, Any], types: Mapping[str, type | tuple[type, ...]], where: str, fix: str) -> None:
    """Refuse a value of the wrong type among the keys of ``data`` named in ``types`` (absent keys pass).

    ``bool`` is not taken for ``int`` unless named; ``type(None)`` allows null. One line names the key.
    """
    for key, kind in types.items():
        if key not in data:
            continue
        value = data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
            continue
        shown = [k for k in kinds if not (k is int and float in kinds)]  # a number: int or float
        names = " or ".join("null" if k is type(None) else _TYPE_NAMES.get(k, k.__name__) for k in shown)
        raise BindscopeError(f"{where}: {key!r} must be {names}, got {short_repr(value)}; {fix}")


def one_line(text: object, limit: int = 200) -> str:
    """``str(text)`` on one line (whitespace runs, newlines included, become one space), cut to ``limit``."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters for a one-line message."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        return "a number too large to print"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_printable(text: str, what: str) -> str:
    """``text`` when every character of it is printable, else a one-line :class:`BindscopeError` naming ``what``
    and the text (its repr): a newline, tab, NUL or other control character would end up in captions and CSV cells.

    Examples
    --------
    >>> check_printable("light blue", "value of concept 'color'")
    'light blue'
    """
    if not text.isprintable():
        bad = next(c for c in text if not c.isprintable())
        raise BindscopeError(
            f"{what} {short_repr(text)} holds {bad!r}, which is not printable; use printable text (no newline, tab, "
            "NUL or other control character)"
        )
    return text


#: The one rule for a name that becomes a folder or file name (datasets, models, scratch models, labels):
#: a letter or digit first (so never ``.``, ``..`` or a hidden name), then letters, digits, ``_ - + .``.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
MAX_NAME = 100
NAME_RULE = (
    f"use letters, digits, '_', '-', '+' and '.' only, starting with a letter or digit, at most {MAX_NAME} characters"
)


def is_name(value: object) -> bool:
    """Whether ``value`` is a name that can safely become one folder or file name (see :data:`NAME_RULE`)."""
    return isinstance(value, str) and len(value) <= MAX_NAME and NAME.fullmatch(value) is not None


def check_name(value: str, what: str) -> str:
    """``value`` when it is a safe folder name (:func:`is_name`), else a ``ValueError`` naming ``what`` it is.

    A ``ValueError`` so that pydantic validators can call it; the settings classes turn it into one line.

    Examples
    --------
    >>> check_name("clip-b32", "model name")
    'clip-b32'
    """
    if not is_name(value):
        size = f" (it has {len(value)})" if isinstance(value, str) and len(value) > MAX_NAME else ""
        raise ValueError(f"{what} {short_repr(value)} names a folder: {NAME_RULE}{size}")
    return value


_TYPE_NAMES = {
    int: "a whole number",
    float: "a number",
    str: "text",
    dict: "a mapping",
    list: "a list",
    bool: "true/false",
}


def validate_settings(schema: type[BaseModel], data: Any, origin: str) -> Any:
    """``schema.model_validate(data)`` with errors as one line naming ``origin``."""
    if not isinstance(data, dict):
        raise BindscopeError(f"{origin} must be a mapping of settings, got {type(data).__name__}")
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise BindscopeError(f"invalid {origin}: {format_validation(exc)}") from None


class Schema(BaseModel):
    """The one pydantic base of bindscope's schemas (settings, presets, run and scratch configs, result
    summaries): frozen, unknown keys refused, and one error wording (:meth:`parse`, :func:`format_validation`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def parse(cls, data: Any, origin: str) -> Self:
        """Validate ``data`` (a mapping); a bad value is one :class:`BindscopeError` line naming ``origin``."""
        return validate_settings(cls, data, origin)


class Settings(Schema):
    """Frozen settings, validated when made; a bad value is a :class:`BindscopeError` naming the field.

    Every range check lives in the settings class itself, so the CLI, the Python API and YAML
    files are refused the same way.
    """

    #: Command-line option names (without ``--``) of fields whose option is not the field's kebab-case name,
    #: e.g. ``{"exact_budget_s": "exact-budget"}`` (the CLI is generated from the fields; see ``bindscope.cli``).
    OPTION_NAMES: ClassVar[dict[str, str]] = {}

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise BindscopeError(f"invalid {type(self).__name__}: {format_validation(exc)}") from None

    def replace(self, **changes: Any) -> Self:
        """A validated copy with ``changes`` applied."""
        return type(self)(**{**self.model_dump(), **changes})

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-ready values."""
        return self.model_dump(mode="json")


#: The largest seed: every random generator bindscope seeds (numpy, torch) takes it.
MAX_SEED = 2**32 - 1

# Upper bounds on sizes: generous for research use, small enough that a typo is refused before it
# allocates (a settings field takes ``Field(le=...)``; a plain option calls :func:`check_size`).
#: Widths: MLP hidden units, table widths.
MAX_WIDTH = 65_536
#: Iterations: epochs, steps, ALS sweeps, optimiser iterations, and the intervals and patience counted in them.
MAX_STEPS = 1_000_000
#: Rows per batch or per chunk.
MAX_BATCH = 1_048_576
#: Worker processes.
MAX_WORKERS = 1_024
#: Items of a list setting: seeds, fractions, hidden widths, edit strengths, labelled counts.
MAX_ITEMS = 1_000
#: Scene counts and caps (the most scenes a dataset may hold).
MAX_SCENE_COUNT = 50_000_000


def check_size(value: int, name: str, low: int, high: int) -> int:
    """``value`` if ``low <= value <= high``; else a one-line :class:`BindscopeError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise BindscopeError(f"{name} must be a whole number, got {short_repr(value)}")
    if value < low:
        raise BindscopeError(f"{name} must be at least {low}, got {value}")
    if value > high:
        raise BindscopeError(f"{name} must be at most {high}, got {value}")
    return int(value)


def _whole_seed(value: Any) -> Any:
    """A seed as it was given: a whole number (an int or a numpy integer), never true/false, 1.5, 1.0 or "1"."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"a seed must be a whole number such as 0 or 42, got {short_repr(value)}")
    return int(value)


def check_seed(value: Any, name: str = "seed") -> int:
    """``value`` as a seed (a whole number in [0, :data:`MAX_SEED`]), else a one-line :class:`BindscopeError`."""
    try:
        _whole_seed(value)
    except ValueError as exc:
        raise BindscopeError(f"{name}: {exc}") from None
    return check_size(value, name, 0, MAX_SEED)


def check_seeds(seeds: tuple[int, ...]) -> tuple[int, ...]:
    """Seed ids: at least one, at most :data:`MAX_ITEMS`, non-negative, no repeats."""
    if not seeds:
        raise ValueError("give at least one seed")
    if len(seeds) > MAX_ITEMS:
        raise ValueError(f"give at most {MAX_ITEMS} seeds, got {len(seeds)}")
    if min(seeds) < 0:
        raise ValueError(f"seeds are non-negative, got {short_repr(list(seeds))}")
    if max(seeds) > MAX_SEED:
        raise ValueError(f"seeds are at most {MAX_SEED}, got {short_repr(list(seeds))}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds repeat: {short_repr(list(seeds))}")
    return seeds


def _device(device: str) -> str:
    check_device(device)
    return device


#: A whole number given as a seed: not true/false, 1.5, 1.0 or "1" (pydantic would take them as 1).
WholeSeed = Annotated[int, BeforeValidator(_whole_seed)]
#: A seed setting: a whole number in [0, MAX_SEED].
Seed = Annotated[int, BeforeValidator(_whole_seed), Field(ge=0, le=MAX_SEED)]
#: Settings fields shared by the analyses: seed ids, and a torch device that exists here.
Seeds = Annotated[tuple[WholeSeed, ...], AfterValidator(check_seeds)]
Device = Annotated[str, AfterValidator(_device)]


class ParitySettings(Settings):
    """Settings with a parity preset: ``parity="paper"`` fills every field of :attr:`PAPER` that
    was not given with the published research code's choice (docs/method/10-differences.md); fields given
    explicitly win. ``bindscope`` keeps the class defaults."""

    PAPER: ClassVar[dict[str, Any]] = {}
    parity: Literal["bindscope", "paper"] = "bindscope"

    @model_validator(mode="before")
    @classmethod
    def _paper_choices(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("parity") == "paper":
            return {**cls.PAPER, **data}
        return data
