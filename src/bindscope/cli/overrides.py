"""``--settings FILE.yaml`` and ``--set KEY=VALUE``: an analysis's settings as a mapping, before its options.

Both give the same mapping a run config's ``analyses: {name: {...}}`` section does (validated by one function,
:func:`bindscope.pipeline.config.analysis_settings`). A dotted KEY reaches into a nested settings model
(``budget.epochs=100``); a VALUE is read as YAML (``0.5``, ``true``, ``[0, 1]``), and a list setting also takes
the options' comma-separated form (``seeds=0,1``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bindscope.cli.common import parse_list
from bindscope.cli.fields import list_item, nested_model
from bindscope.core.errors import BindscopeError
from bindscope.core.validation import one_line


def merge(base: dict[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated with ``more``; mappings under one key are merged, key by key (``more`` wins)."""
    out = dict(base)
    for key, value in more.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def nest(key: str, value: Any) -> dict[str, Any]:
    """``a.b`` = v as ``{"a": {"b": v}}``."""
    head, _, rest = key.partition(".")
    return {head: nest(rest, value) if rest else value}


def check_key(settings: type[BaseModel], key: str, where: str, owner: str) -> type[BaseModel]:
    """Refuse a KEY that is no field of ``settings`` (``owner``'s; dotted: of its nested model); the model that
    holds it."""
    model, parts = settings, key.split(".")
    for depth, part in enumerate(parts):
        fields = model.model_fields
        if part not in fields:
            holder = ".".join(parts[:depth]) or owner
            raise BindscopeError(
                f"{where}: {holder} has no setting {part!r}; choose one of {', '.join(sorted(fields))}"
            )
        inner = nested_model(fields[part].annotation)
        if depth < len(parts) - 1:
            if inner is None:
                raise BindscopeError(f"{where}: {'.'.join(parts[: depth + 1])} holds no settings; set it as a whole")
            model = inner
    return model


def parse_set(settings: type[BaseModel], item: str, owner: str) -> dict[str, Any]:
    """One ``--set KEY=VALUE`` of ``owner``'s settings as a (nested) mapping."""
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise BindscopeError(f"--set takes KEY=VALUE, e.g. --set seeds=0,1 or --set budget.epochs=100; got {item!r}")
    model = check_key(settings, key, f"--set {key}", owner)
    value = yaml_value(text, f"--set {key}")
    field = model.model_fields[key.rsplit(".", 1)[-1]]
    if list_item(field.annotation) is not None and value is not None and not isinstance(value, list):
        value = parse_list(text, yaml_scalar, f"--set {key}", "0,1") if isinstance(value, str) else [value]
    return nest(key, value)


def yaml_value(text: str, where: str) -> Any:
    """VALUE read as YAML (a scalar or a list); a malformed one is one line naming ``where``."""
    import yaml

    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, ValueError) as exc:
        problem = one_line(getattr(exc, "problem", None) or exc, 120)
        raise BindscopeError(
            f"{where}: {text!r} is not a YAML value ({problem}); quote text, write lists as [a, b]"
        ) from None


def yaml_scalar(text: str) -> Any:
    """One comma-separated item read as YAML (``1`` a number, ``red`` text; text where YAML reads none)."""
    try:
        return yaml_value(text, "an item")
    except BindscopeError:
        return text


def read_settings_file(settings: type[BaseModel], path: Path, owner: str) -> dict[str, Any]:
    """``--settings FILE.yaml``: a mapping of ``owner``'s settings, keys checked (nested mappings too)."""
    from bindscope.core.io import read_yaml

    data = read_yaml(Path(path), "settings file")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BindscopeError(
            f"settings file {path} must be a mapping of settings (KEY: VALUE lines), got {type(data).__name__}"
        )
    check_mapping(settings, data, "", f"settings file {path}", owner)
    return data


def check_mapping(settings: type[BaseModel], data: Mapping[str, Any], prefix: str, where: str, owner: str) -> None:
    """Refuse unknown keys anywhere in ``data`` (a mapping under a nested model's field is checked too)."""
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        model = check_key(settings, dotted, f"{where}, {dotted}", owner)
        inner = nested_model(model.model_fields[str(key)].annotation)
        if inner is not None and isinstance(value, Mapping):
            check_mapping(settings, value, f"{dotted}.", where, owner)
