"""Names of a package imported on first use (PEP 562): the package's ``__getattr__`` and ``__dir__``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(
    package: str, where: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for the names ``where`` maps to the module defining each.

    Parameters
    ----------
    package
        The package's ``__name__`` (named in the error for an unknown name).
    where
        Name -> module: each name is imported from its module when first asked for, then kept in ``namespace``.
    namespace
        The package's ``globals()``.

    Examples
    --------
    >>> getattr_, dir_ = lazy_attributes("pkg", {"sqrt": "math"}, {})
    >>> getattr_("sqrt")(4.0), "sqrt" in dir_()
    (2.0, True)
    """

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
