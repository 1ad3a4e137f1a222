"""Reference tables generated from bindscope's pydantic models: run configs, scratch configs, presets,
analysis settings and the summaries the analyses write (every key, its type, default and description)."""

from __future__ import annotations

import importlib
import inspect
import re
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

_ROLE = re.compile(r":[a-z:]+:`~?([^`]+)`")  # Sphinx roles in docstrings (:data:`X`) -> `X`
_MODULE_PREFIX = re.compile(r"\b(?:[a-z_][a-z0-9_]*\.)+([A-Za-z_][A-Za-z0-9_]*)")


def load_model(target: str) -> type[BaseModel]:
    """``package.module:ClassName`` -> the class."""
    module, _, name = target.partition(":")
    model = getattr(importlib.import_module(module), name)
    if not (inspect.isclass(model) and issubclass(model, BaseModel)):
        raise TypeError(f"{target} is not a pydantic model")
    return model


def _plain(annotation: Any) -> str:
    """A type as code: ``tuple[int, ...]``, ``dict[str, Spread]``, ``'a' | 'b'`` (validators dropped)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _plain(args[0])
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_plain(a) for a in args)
    if annotation is type(None):
        return "None"
    if annotation is Ellipsis:
        return "..."
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_plain(a) for a in args)}]"
    if inspect.isclass(annotation):
        return annotation.__name__
    return _MODULE_PREFIX.sub(r"\1", repr(annotation).replace("typing.", ""))


def _type_name(annotation: Any) -> str:
    return "`" + _plain(annotation).replace("|", "\\|") + "`"


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:  # a factory that takes the validated data
            return "computed"
    else:
        value = field.default
    if value is PydanticUndefined:
        return ""
    if isinstance(value, BaseModel):
        return f"`{type(value).__name__}` defaults"
    text = repr(value) if not isinstance(value, str) or not value else value
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}...`"


def _nested(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's type names (inside tuples, dicts, unions)."""
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += [m for m in _nested(arg) if m not in found]
    return found


def _description(model: type[BaseModel]) -> str:
    doc = inspect.cleandoc(model.__dict__.get("__doc__") or "")
    return _markdown(doc.split("\n\n")[0].replace("\n", " "))


def _markdown(text: str) -> str:
    """A docstring phrase as a markdown table cell: rst literals and roles as code, pipes escaped."""
    return _ROLE.sub(r"`\1`", text.replace("``", "`")).replace("|", "\\|")


def model_tables(model: type[BaseModel], heading: str = "###") -> str:
    """Markdown: a table of ``model``'s fields, then one for every model nested in them (once each)."""
    seen: list[type[BaseModel]] = []
    queue = [model]
    blocks = []
    while queue:
        current = queue.pop(0)
        if current in seen:
            continue
        seen.append(current)
        lines = [f"{heading} `{current.__name__}`", ""]
        if _description(current):
            lines += [_description(current), ""]
        lines += ["| key | type | default | description |", "|---|---|---|---|"]
        for name, field in current.model_fields.items():
            key = field.alias or name
            text = _markdown(" ".join((field.description or "").split()))
            lines.append(f"| `{key}` | {_type_name(field.annotation)} | {_default(field)} | {text} |")
            queue += [m for m in _nested(field.annotation) if m not in seen]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def summary_tables() -> str:
    """The ``summary.json`` numbers of every registered analysis, after the common header."""
    from bindscope.analyses import get_analysis, list_analyses
    from bindscope.analyses.results import SUMMARIES, ResultHeader

    parts = ["## The common header", "", model_tables(ResultHeader, "###")]
    for name in list_analyses():
        analysis = get_analysis(name)
        parts += [f"## `{name}`", "", analysis.title, "", model_tables(SUMMARIES[name], "###")]
    return "\n".join(parts)


def settings_tables() -> str:
    """Every registered analysis's settings: the keys of a run config's ``analyses.<name>`` and of
    ``--settings`` / ``--set``."""
    from bindscope.analyses import get_analysis, list_analyses

    parts = []
    for name in list_analyses():
        parts += [f"### `analyses.{name}`", "", model_tables(get_analysis(name).Settings, "####")]
    return "\n".join(parts)
