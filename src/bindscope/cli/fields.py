"""Command-line options derived from the fields of a settings class: the analyses' commands are generated.

A field becomes ``--kebab-case-name`` (or its settings class's ``OPTION_NAMES`` entry): a ``Literal`` a
choice, a bool ``--x/--no-x``, a tuple a comma-separated list, an int, float or str itself; its
``Field(description=...)`` is the help and the settings default is shown. A nested settings model (complexity's
``budget``) offers the fields it names in ``OPTION_NAMES`` and ``OVERRIDES``, as ``budget.epochs`` keys.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from bindscope.cli.common import parse_list

#: The example a list option's error gives, by field name, where the field declares no ``examples``.
EXAMPLES = {
    "seeds": "0,1,2",
    "fractions": "0.2,0.4,0.6,0.8",
    "approximators": "additive,mult_within_object",
    "hidden": "128,1024",
    "banks": "obj-avg,pos-avg,single",
    "k": "0,0.5,1,1.5,2",
    "ordinal": "size,age",
    "labelled": "2,8,32",
    "quad": "red,cube,blue,sphere",
}
#: Examples of comma-separated values by item type, where a field's default and choices give none.
LIST_EXAMPLES: dict[type, str] = {int: "0,1,2", float: "0.2,0.4", str: "a,b"}
RICH_TAG = re.compile(r"(\[[a-z#/@][^[]*?])")


@dataclass(frozen=True)
class FieldOption:
    """One settings field as a command-line option.

    ``key``: the field, dotted below a nested model (``budget.epochs``); ``param``: the command function's
    parameter; ``option``: its flag; ``annotation`` and ``default``: what typer builds the option from;
    ``convert``: the given value as the settings take it.
    """

    key: str
    param: str
    option: str
    annotation: Any
    default: Any
    convert: Callable[[Any], Any]


def unwrap(annotation: Any) -> Any:
    """The type inside ``Annotated[...]`` and ``X | None``."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def list_item(annotation: Any) -> Any | None:
    """The item type of ``tuple[X, ...]`` or ``list[X]`` (None for any other type)."""
    if get_origin(annotation) in (tuple, list) and get_args(annotation):
        return unwrap(get_args(annotation)[0])
    return None


def nested_model(annotation: Any) -> type[BaseModel] | None:
    """The settings model a field holds (complexity's ``Budget``), else None."""
    inner = unwrap(annotation)
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


def option_name(model: type[BaseModel], field: str) -> str:
    """A field's option name without ``--``: the model's ``OPTION_NAMES`` entry, else its kebab-case name."""
    names: Mapping[str, str] = getattr(model, "OPTION_NAMES", {})
    return names.get(field, field.replace("_", "-"))


def offered_fields(model: type[BaseModel]) -> list[str]:
    """The fields of a nested model a command line offers: those it names in ``OPTION_NAMES`` or ``OVERRIDES``."""
    named = set(getattr(model, "OPTION_NAMES", {})) | set(getattr(model, "OVERRIDES", ()))
    return [f for f in model.model_fields if f in named]


def settings_options(
    settings: type[BaseModel],
    choices: Mapping[str, Sequence[str]] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> list[FieldOption]:
    """The options of every field of ``settings`` (nested models: the fields they offer, with no default shown
    unless ``defaults`` gives one); ``choices`` turns a dotted key's option into a choice of those values."""
    choices, defaults = choices or {}, defaults or {}
    out: list[FieldOption] = []
    for field, info in settings.model_fields.items():
        model = nested_model(info.annotation)
        if model is None:
            made = field_option(field, info, option_name(settings, field), choices.get(field), field_default(info))
            out += [made] if made is not None else []
            continue
        for sub in offered_fields(model):
            key = f"{field}.{sub}"
            made = field_option(
                key, model.model_fields[sub], option_name(model, sub), choices.get(key), defaults.get(key)
            )
            out += [made] if made is not None else []
    return out


def field_default(info: FieldInfo) -> Any:
    """A field's default (its factory's value), None when it has none."""
    value = info.get_default(call_default_factory=True)
    return None if value is PydanticUndefined else value


def field_option(
    key: str, info: FieldInfo, name: str, choices: Sequence[str] | None = None, default: Any = None
) -> FieldOption | None:
    """One field's option (None for a type no option takes: reachable with ``--set``)."""
    kind = unwrap(info.annotation)
    help_text = escape(info.description)
    param = "opt_" + key.replace(".", "__")
    flag = f"--{name}"
    if choices is not None or get_origin(kind) is Literal:
        values = list(choices) if choices is not None else list(get_args(kind))
        return choice_option(key, param, flag, values, help_text, default)
    if kind is bool:
        decl = typer.Option(f"--{name}/--no-{name}", help=help_text)
        return FieldOption(key, param, flag, Annotated[Optional[bool], decl], default, _same)
    item = list_item(kind)
    if item is not None:
        convert = item_converter(item)
        example = list_example(key, info, item, default)
        shown = ",".join(map(str, default)) if default else None
        decl = typer.Option(flag, help=help_text)

        def parse(text: str) -> Any:
            return parse_list(text, convert, flag, example)

        return FieldOption(key, param, flag, Annotated[Optional[str], decl], shown, parse)
    if kind in (int, float, str):
        return FieldOption(
            key, param, flag, Annotated[Optional[kind], typer.Option(flag, help=help_text)], default, _same
        )
    return None


def choice_option(
    key: str, param: str, flag: str, values: list[Any], help_text: str | None, default: Any
) -> FieldOption:
    """A choice among ``values`` (typer takes an Enum of their texts; the settings get the values back)."""
    by_text = {str(v): v for v in values}
    enum = Enum(f"Choice_{param}", [(t, t) for t in by_text], type=str)  # type: ignore[misc]
    shown = enum(str(default)) if default is not None and str(default) in by_text else None
    decl = typer.Option(flag, help=help_text)

    def convert(member: Enum) -> Any:
        return by_text[member.value]

    return FieldOption(key, param, flag, Annotated[Optional[enum], decl], shown, convert)


def item_converter(item: Any) -> Callable[[str], Any]:
    """How one comma-separated item is read: as a number where the items are numbers, else as text (a
    ``Literal`` item is checked by the settings class)."""
    if item in (int, float):
        return item
    if get_origin(item) is Literal:
        by_text = {str(v): v for v in get_args(item)}
        return lambda text: by_text.get(text, text)
    return str


def list_example(key: str, info: FieldInfo, item: Any, default: Any) -> str:
    """An example of a list option's values: the field's ``examples``, :data:`EXAMPLES`, its default (two items
    or more), its choices, else one by item type."""
    if info.examples:
        first = info.examples[0]
        return first if isinstance(first, str) else ",".join(map(str, first))
    if key in EXAMPLES:
        return EXAMPLES[key]
    if default is not None and len(default) > 1:
        return ",".join(map(str, default))
    if get_origin(item) is Literal:
        return ",".join(map(str, get_args(item)))
    return LIST_EXAMPLES.get(item, "a,b")


def escape(text: str | None) -> str | None:
    """Help text shown as written (typer's rich help would read ``[word]`` as markup)."""
    return None if text is None else RICH_TAG.sub(r"\\\1", text)


def _same(value: Any) -> Any:
    return value
