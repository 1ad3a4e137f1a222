"""The Python API pages (docs/reference/api/*.md, rendered by mkdocstrings) say what the code does: every
object they render that documents its parameters documents each one, under its own description, and no
Sphinx role (``:func:`x```) reaches a page as literal text.

The objects are found the way mkdocstrings finds them: the ``::: path`` directives of the pages, their
``members`` option, and the public members of what they render. Docstrings are read by griffe with the same
extension the site uses (scripts/docs/griffe_roles.py), and so are the signatures the pages show.
"""

from __future__ import annotations

import re
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import griffe
import griffe_roles
import pytest
import yaml

ROOT = Path(__file__).parents[2]
API_PAGES = sorted((ROOT / "docs" / "reference" / "api").glob("*.md"))
#: ``::: dotted.path`` and the indented options block under it
_DIRECTIVE = re.compile(r"^::: ([\w.]+)[ \t]*\n((?:[ \t]+\S.*\n?)*)", re.M)
#: the docstring sections that document parameters
_PARAMETER_SECTIONS = (griffe.DocstringSectionKind.parameters, griffe.DocstringSectionKind.other_parameters)


def load(name: str, search_path: Path) -> griffe.Module:
    """The package ``name`` as the site reads it: numpy docstrings, roles made cross-references."""
    return griffe.load(
        name,
        search_paths=[str(search_path)],
        docstring_parser=griffe.Parser.numpy,
        extensions=griffe.load_extensions(griffe_roles.SphinxRoles),
    )


def defined(obj: griffe.Object | griffe.Alias) -> griffe.Object:
    """The object itself, or the one a re-export names."""
    return obj.final_target if isinstance(obj, griffe.Alias) else obj


def directives(markdown: str) -> Iterator[tuple[str, list[str] | None]]:
    """Each ``::: path`` of a page with its ``members`` option (``None``: every public member)."""
    for match in _DIRECTIVE.finditer(markdown):
        options = (yaml.safe_load(textwrap.dedent(match.group(2))) or {}).get("options", {})
        yield match.group(1), options.get("members")


def public(obj: griffe.Object, members: list[str] | None) -> Iterator[griffe.Object]:
    """The members mkdocstrings renders under ``obj``: those named, or the public ones defined there (not
    imported names; not submodules, which ``show_submodules: false`` leaves out)."""
    if members is not None:
        for name in members:
            yield defined(obj.members[name])
        return
    for name, member in obj.members.items():
        if not name.startswith("_") and not member.is_alias and not member.is_module:
            yield member


def rendered(obj: griffe.Object, members: list[str] | None = None) -> Iterator[griffe.Object]:
    """``obj`` and everything rendered under it."""
    yield obj
    if obj.is_module or obj.is_class:
        for member in public(obj, members):
            yield from rendered(member)


def api_objects(package: griffe.Module, pages: list[Path]) -> dict[str, griffe.Object]:
    """Every object the pages render, by path."""
    found: dict[str, griffe.Object] = {}
    for page in pages:
        for path, members in directives(page.read_text()):
            target = defined(package.modules_collection.get_member(path))
            found.update((obj.path, obj) for obj in rendered(target, members))
    return found


def signature_parameters(obj: griffe.Object) -> list[str]:
    """The parameter names of ``obj``'s signature as the page shows it (``self`` / ``cls`` left out).

    This is griffe's reading of the source, which is the signature mkdocstrings renders above the table
    (for a class: its ``__init__``, dataclass fields included). It agrees with ``inspect.signature`` on every
    object the pages render except pydantic models, which document their fields, not parameters; reading
    the source also spares this test importing torch.
    """
    names = [parameter.name for parameter in obj.parameters]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def parameter_problems(obj: griffe.Object, signature: list[str]) -> list[str]:
    """What is wrong with ``obj``'s documented parameters, given its ``signature``'s names.

    An object without a Parameters section documents none and is not judged. One with a section must name
    every parameter and no other, each with a description of its own: two entries with the same text are
    one description copied (or ``a, b`` sharing one), which the rendered table shows as repeated rows.
    """
    entries = [
        (entry.name.lstrip("*"), " ".join(entry.description.split()))
        for section in (obj.docstring.parsed if obj.docstring else [])
        if section.kind in _PARAMETER_SECTIONS
        for entry in section.value
    ]
    if not entries:
        return []
    names = [name for name, _ in entries]
    problems = [f"{obj.path}: parameter {name!r} is not documented" for name in signature if name not in names]
    problems += [
        f"{obj.path}: documents {name!r}, which it has no parameter for" for name in names if name not in signature
    ]
    problems += [f"{obj.path}: {name!r} is documented twice" for name, n in Counter(names).items() if n > 1]
    problems += [f"{obj.path}: parameter {name!r} has no description" for name, text in entries if not text]
    shared = Counter(text for _, text in entries if text)
    problems += [
        f"{obj.path}: {', '.join(n for n, t in entries if t == text)} share one description ({text[:60]}...)"
        for text, count in shared.items()
        if count > 1
    ]
    return problems


def raw_roles(obj: griffe.Object) -> list[str]:
    """The Sphinx-style roles left in ``obj``'s docstring as it will be rendered."""
    return griffe_roles.ANY_ROLE.findall(obj.docstring.value) if obj.docstring else []


@pytest.fixture(scope="module")
def api() -> dict[str, griffe.Object]:
    return api_objects(load("bindscope", ROOT / "src"), API_PAGES)


def test_the_pages_render_the_objects_they_name(api) -> None:
    # the walk finds the pages' objects (a broken walk would make the checks below pass on nothing)
    for path in ("bindscope.analyses.registry.load_inputs", "bindscope.space.concepts.SceneSet.sample"):
        assert path in api
    assert len(api) > 150


def test_every_documented_parameter_list_matches_the_signature(api) -> None:
    problems = [
        problem
        for obj in api.values()
        if obj.is_function or obj.is_class
        for problem in parameter_problems(obj, signature_parameters(obj))
    ]
    assert not problems, "the API reference's parameter tables disagree with the code:\n" + "\n".join(problems)


def test_no_sphinx_role_is_rendered_as_text(api) -> None:
    left = {path: roles for path, obj in api.items() if (roles := raw_roles(obj))}
    assert not left, f"roles griffe_roles.py does not rewrite (use a Python role, e.g. :func:): {left}"


def test_the_site_loads_the_roles_extension() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    plugin = next(p["mkdocstrings"] for p in config["plugins"] if isinstance(p, dict) and "mkdocstrings" in p)
    assert "scripts/docs/griffe_roles.py" in plugin["handlers"]["python"]["options"]["extensions"]


# --- the checks themselves, on a package made for them --------------------------------------------------

TOY = '''
"""A toy package: :func:`good`, :class:`~toy.shapes.Box`, :mod:`.shapes`, ``:func:`quoted``` and :func:`nowhere`."""

from toy.shapes import Box


def good(a: int, b: int = 0) -> int:
    """Both documented.

    Parameters
    ----------
    a
        The first.
    b
        The second, see :class:`Box`.
    """
    return a + b


def missing(a: int, b: int) -> int:
    """One left out.

    Parameters
    ----------
    a
        The first.
    """
    return a + b


def shared(a: int, b: int, c: int) -> int:
    """Two under one description.

    Parameters
    ----------
    a, b
        Two numbers.
    c
        A third.
    """
    return a + b + c


def undocumented(a: int) -> int:
    """No Parameters section: nothing is claimed."""
    return a


def labelled() -> None:
    """A role the extension does not know: :ref:`somewhere`."""
'''


@pytest.fixture
def toy(tmp_path: Path) -> griffe.Module:
    package = tmp_path / "toy"
    package.mkdir()
    (package / "__init__.py").write_text(TOY)
    (package / "shapes.py").write_text('"""Shapes."""\n\n\nclass Box:\n    """A box."""\n')
    return load("toy", tmp_path)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("good", []),
        ("undocumented", []),
        ("missing", ["toy.missing: parameter 'b' is not documented"]),
        ("shared", ["toy.shared: a, b share one description (Two numbers....)"]),
    ],
)
def test_parameter_problems_known_answers(toy, name: str, expected: list[str]) -> None:
    obj = toy.members[name]
    assert parameter_problems(obj, signature_parameters(obj)) == expected


def test_a_parameter_the_code_does_not_have_is_reported(toy) -> None:
    problems = parameter_problems(toy.members["good"], ["a"])
    assert problems == ["toy.good: documents 'b', which it has no parameter for"]


def test_roles_become_optional_cross_references(toy) -> None:
    text = toy.docstring.value
    assert '<autoref identifier="toy.good" optional><code>good</code></autoref>' in text
    assert '<autoref identifier="toy.shapes.Box" optional><code>Box</code></autoref>' in text  # ~: last part
    assert '<autoref identifier="toy.shapes" optional><code>shapes</code></autoref>' in text  # relative
    assert "``:func:`quoted```" in text  # quoted in a code span: an example, left as written
    assert '<autoref identifier="nowhere" optional><code>nowhere</code></autoref>' in text  # plain code on the site
    # a name the docstring's module imports resolves to where it is defined, inside a Parameters table too
    description = toy.members["good"].docstring.parsed[1].value[1].description
    assert description == 'The second, see <autoref identifier="toy.shapes.Box" optional><code>Box</code></autoref>.'


def test_a_role_left_as_text_is_found(toy) -> None:
    assert raw_roles(toy.members["labelled"]) == [":ref:`somewhere`"]
    assert raw_roles(toy.members["good"]) == []
