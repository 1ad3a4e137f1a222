"""A griffe extension: Sphinx-style roles in docstrings become cross-references on the API pages.

Docstrings name other objects the way IDEs and Sphinx read them, ``:func:`load_inputs```,
``:class:`~bindscope.space.concepts.SceneSet```, ``:data:`.KINDS```. mkdocstrings would show those roles as
literal text, so once a package is loaded this extension rewrites each one into an autorefs reference:

* the target is an absolute dotted path, or a name resolved the way Python would from the docstring's
  place (its class, its module, what the module imports); a target with leading dots is first read as a
  relative import (``.card``: a module beside this one), then as the one object of the package whose path
  ends with it (Sphinx's rule);
* the link text is the target as written, or only its last part after ``~`` (Sphinx's rule);
* the reference is *optional*: where the target is documented on the site it becomes a link, elsewhere
  (a private helper, numpy) it stays plain code, and ``mkdocs build --strict`` does not fail on it.

Only the rendered text changes: the source keeps its roles. ``mkdocs.yml`` loads this file
(``extensions:`` of the python handler); ``tests/docs/test_api_reference.py`` checks that no role is left.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import griffe

#: the Python-domain roles rewritten (``:py:func:`` and friends too)
ROLES = ("func", "class", "data", "mod", "meth", "attr", "obj", "exc", "const", "type")
#: an inline code span (left as it is: a role quoted inside one is an example) or a role with its target,
#: which is ``target`` or ``text <target>``
_ROLE = re.compile(
    r"(?P<code>``.+?``)"
    r"|:(?:py:)?(?P<role>" + "|".join(ROLES) + r"):`(?P<body>[^`]+)`",
    re.S,
)
#: any role-like markup: what must not reach a rendered page
ANY_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`[^`]*`")
_TITLED = re.compile(r"(?P<text>.*?)\s*<(?P<target>[^<>]+)>", re.S)


def _lookup(obj: griffe.Object | griffe.Alias, path: str) -> str | None:
    """``path``'s canonical path if the collection holds it (a re-export leads to where it is defined)."""
    try:
        found = obj.modules_collection.get_member(path)
    except (KeyError, ValueError, griffe.AliasResolutionError):
        return None
    try:
        return found.canonical_path
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return path


def _in_scope(obj: griffe.Object, name: str) -> str | None:
    """``name`` (dotted) resolved in ``obj``'s scope: its members, its parents', what its module imports."""
    first, _, rest = name.partition(".")
    try:
        base = obj.resolve(first)
    except griffe.NameResolutionError:
        return None
    full = f"{base}.{rest}" if rest else base
    return _lookup(obj, full) or full


def _by_suffix(obj: griffe.Object, name: str) -> str | None:
    """The one object of ``obj``'s package whose path ends with ``.name``, if exactly one does."""
    suffix = "." + name
    found = {
        canonical
        for member in walk(obj.package)
        if member.path.endswith(suffix) and (canonical := _lookup(obj, member.path))
    }
    return found.pop() if len(found) == 1 else None


def _relative(obj: griffe.Object, target: str) -> str | None:
    """A target with leading dots read as a relative import from ``obj``'s module (``.card``: a sibling)."""
    dots = len(target) - len(target.lstrip("."))
    module = obj.module
    package: griffe.Object | None = module if module.is_init_module else module.parent
    for _ in range(dots - 1):
        package = package.parent if package is not None else None
    return _lookup(obj, f"{package.path}.{target[dots:]}") if package is not None else None


def resolve(obj: griffe.Object, target: str) -> str:
    """The dotted path a role's ``target`` names, seen from the docstring of ``obj``.

    A target that cannot be resolved is returned as written (without leading dots): its reference then
    renders as plain code.
    """
    target = target.removesuffix("()")
    name = target.lstrip(".")
    if target.startswith("."):  # Sphinx's rule: relative, in scope, then the one object with that suffix
        found = _relative(obj, target) or _in_scope(obj, name) or _by_suffix(obj, name)
    else:
        found = _lookup(obj, name) or _in_scope(obj, name)
    return found or name


def reference(obj: griffe.Object, body: str) -> str:
    """The autorefs markup for one role's ``body`` (``target``, ``~target`` or ``text <target>``)."""
    titled = _TITLED.fullmatch(body.strip())
    if titled:
        text, target = titled["text"], titled["target"].lstrip("~")
    else:
        target = body.strip()
        shown = target.lstrip("~").lstrip(".")
        text = shown.rsplit(".", 1)[-1] if target.startswith("~") else shown
    identifier = html.escape(resolve(obj, target.lstrip("~")), quote=True)
    return f'<autoref identifier="{identifier}" optional><code>{html.escape(text)}</code></autoref>'


def rewrite(obj: griffe.Object, text: str) -> str:
    """``text`` (a docstring of ``obj``) with every Python role made a cross-reference."""
    return _ROLE.sub(lambda m: m["code"] or reference(obj, m["body"]), text)


def walk(obj: griffe.Object | griffe.Alias) -> Iterator[griffe.Object]:
    """``obj`` and every object defined under it (re-exports are skipped: their docstring is their target's)."""
    if obj.is_alias:
        return
    assert isinstance(obj, griffe.Object)
    yield obj
    for member in obj.members.values():
        yield from walk(member)


def rewrite_package(pkg: griffe.Module) -> None:
    """Rewrite the roles of every docstring under ``pkg`` in place."""
    for obj in walk(pkg):
        docstring = obj.docstring
        if docstring is None or not _ROLE.search(docstring.value):
            continue
        docstring.value = rewrite(obj, docstring.value)
        docstring.__dict__.pop("parsed", None)  # parsed again from the new text


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles into optional autorefs cross-references once a package is loaded."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        rewrite_package(pkg)
