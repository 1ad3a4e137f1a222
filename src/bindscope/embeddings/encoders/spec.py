"""Model specs: one string that names a model, parsed once into a :class:`ModelSpec`.

Grammar (DESIGN.md "Model specs")::

    hf:<hub id or local path>[@revision]        transformers CLIP, SigLIP, DINOv2
    openclip:<arch>/<pretrained tag>            open_clip by name (e.g. ViT-B-32/openai)
    openclip:hf-hub:<org>/<repo>                open_clip from a hub repository
    openclip:local-dir:<path>                   open_clip from a folder (open_clip_config.json + weights)
    st:<name or path>                           sentence-transformers
    scratch:<checkpoint dir>                    a controlled model trained from scratch

Any of them may end in ``+rand`` (the same architecture with random weights, seed 0) or
``+rand:SEED``: the control every probing result needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from bindscope.core.errors import BindscopeError, closest

BACKENDS = ("hf", "openclip", "st", "scratch")
_RAND = re.compile(r"\+rand(?::(?P<seed>\d+))?$")
GRAMMAR = (
    "hf:<id or path>[@revision], openclip:<arch>/<pretrained>, openclip:hf-hub:<org>/<repo>, "
    "openclip:local-dir:<path>, st:<name or path>, scratch:<checkpoint dir>, each optionally ending in +rand"
)


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec.

    Attributes
    ----------
    backend : str
        ``hf``, ``openclip``, ``st`` or ``scratch``.
    target : str
        Hub id, architecture name or path (for openclip ``local-dir``/``hf-hub`` the path or repo).
    revision : str or None
        ``hf`` only: branch, tag or commit after ``@``.
    pretrained : str or None
        ``openclip`` by name only: the pretrained tag after ``/``.
    source : str
        ``openclip`` only: ``name``, ``hf-hub`` or ``local-dir``; ``id`` or ``path`` elsewhere.
    rand_seed : int or None
        Seed of the random weights for a ``+rand`` spec, else None.
    """

    backend: str
    target: str
    revision: str | None = None
    pretrained: str | None = None
    source: str = "id"
    rand_seed: int | None = None

    @property
    def random(self) -> bool:
        return self.rand_seed is not None

    @property
    def is_local(self) -> bool:
        """Whether the spec names a folder on this machine (so it loads offline)."""
        return self.source in ("path", "local-dir")

    def trained(self) -> ModelSpec:
        """The same spec without ``+rand``."""
        return ModelSpec(self.backend, self.target, self.revision, self.pretrained, self.source, None)

    def with_rand(self, seed: int = 0) -> ModelSpec:
        """The ``+rand`` control of this spec."""
        return ModelSpec(self.backend, self.target, self.revision, self.pretrained, self.source, seed)

    def __str__(self) -> str:
        if self.backend == "openclip":
            body = {
                "name": f"{self.target}/{self.pretrained}" if self.pretrained else self.target,
                "hf-hub": f"hf-hub:{self.target}",
                "local-dir": f"local-dir:{self.target}",
            }[self.source]
        else:
            body = self.target + (f"@{self.revision}" if self.revision else "")
        rand = "" if self.rand_seed is None else ("+rand" if self.rand_seed == 0 else f"+rand:{self.rand_seed}")
        return f"{self.backend}:{body}{rand}"


def model_paths(model: object) -> list[Path]:
    """The folder a model argument (a spec, its text, or a loaded encoder) loads from on this machine, as a
    list; empty for a hub id, a name, or a spec that does not parse (loading it says why)."""
    spec = getattr(model, "spec", model)
    try:
        parsed = parse_spec(spec) if isinstance(spec, (str, ModelSpec)) else None
    except BindscopeError:
        return []
    return [Path(parsed.target)] if parsed is not None and (parsed.is_local or parsed.backend == "scratch") else []


def parse_spec(text: str | ModelSpec, *, check_folders: bool = True) -> ModelSpec:
    """Parse a model spec string; a malformed or unknown one is a :class:`BindscopeError`.

    ``check_folders=False`` checks the grammar only: a path need not be a folder on this machine
    (a spec recorded for embeddings made elsewhere).

    Examples
    --------
    >>> parse_spec("hf:openai/clip-vit-base-patch32@main+rand")  # doctest: +NORMALIZE_WHITESPACE
    ModelSpec(backend='hf', target='openai/clip-vit-base-patch32', revision='main',
              pretrained=None, source='id', rand_seed=0)
    """
    if isinstance(text, ModelSpec):
        return text
    if not isinstance(text, str) or not text.strip():
        raise BindscopeError(f"empty model spec; give one of: {GRAMMAR}")
    raw = text.strip()
    backend, sep, body = raw.partition(":")
    if not sep or backend not in BACKENDS:
        hint = f" (did you mean hf:{raw}?)" if not sep and "/" in raw else ""
        if sep and not hint:  # a mistyped backend: opencilp:ViT-B-32
            close = closest(backend, BACKENDS)
            hint = f" (did you mean {close}:{body}?)" if close else ""
        raise BindscopeError(
            f"unknown model spec {raw!r}{hint}; a spec starts with hf:, openclip:, st: or scratch: "
            f"({GRAMMAR}); `bindscope models` lists them with examples"
        )
    rand_seed = None
    match = _RAND.search(body)
    if match:
        rand_seed = int(match.group("seed") or 0)
        body = body[: match.start()]
    elif "+rand" in body:
        raise BindscopeError(f"model spec {raw!r}: write the random-weights suffix as +rand or +rand:SEED, at the end")
    if not body:
        raise BindscopeError(f"model spec {raw!r} names no model after {backend}:; e.g. {_example(backend)}")
    parser = {"hf": _parse_hf, "openclip": _parse_openclip, "st": _parse_st, "scratch": _parse_scratch}[backend]
    return parser(body, raw, rand_seed, check_folders)


def _parse_hf(body: str, raw: str, rand_seed: int | None, folders: bool = True) -> ModelSpec:
    if Path(body).expanduser().exists():
        return ModelSpec("hf", str(Path(body).expanduser()), source="path", rand_seed=rand_seed)
    target, at, revision = body.partition("@")
    if at and not revision:
        raise BindscopeError(
            f"model spec {raw!r}: nothing after '@'; give a revision (branch, tag or commit) or drop the '@'"
        )
    if at and Path(target).expanduser().exists():
        return ModelSpec("hf", str(Path(target).expanduser()), revision=revision, source="path", rand_seed=rand_seed)
    if _looks_like_path(target) and not folders:
        return ModelSpec("hf", target, revision=revision or None, source="path", rand_seed=rand_seed)
    if _looks_like_path(target):
        raise BindscopeError(
            f"model spec {raw!r}: folder {target} does not exist; give an existing folder "
            "saved with save_pretrained, or a hub id such as openai/clip-vit-base-patch32"
        )
    _check_hub_id(target, raw)
    return ModelSpec("hf", target, revision=revision or None, source="id", rand_seed=rand_seed)


def _parse_openclip(body: str, raw: str, rand_seed: int | None, folders: bool = True) -> ModelSpec:
    if body.startswith("local-dir:"):
        path = Path(body[len("local-dir:") :]).expanduser()
        if folders and path.is_file():
            raise BindscopeError(
                f"model spec {raw!r}: {path} is a file; openclip:local-dir: takes a folder with "
                "open_clip_config.json and the weights (a training checkpoint such as epoch_N.pt becomes one with "
                f"`bindscope models convert {path} --arch ARCH --out MODEL`)"
            )
        if not body[len("local-dir:") :] or (folders and not path.is_dir()):
            raise BindscopeError(
                f"model spec {raw!r}: folder {path} does not exist; openclip:local-dir: needs a "
                "folder with open_clip_config.json and the weights"
            )
        return ModelSpec("openclip", str(path), source="local-dir", rand_seed=rand_seed)
    if body.startswith("hf-hub:"):
        repo = body[len("hf-hub:") :]
        _check_hub_id(repo, raw)
        return ModelSpec("openclip", repo, source="hf-hub", rand_seed=rand_seed)
    arch, slash, tag = body.partition("/")
    if not arch or (slash and not tag) or "/" in tag:
        raise BindscopeError(f"model spec {raw!r}: write openclip:<arch>/<pretrained tag>, e.g. {_example('openclip')}")
    if not tag and rand_seed is None:
        raise BindscopeError(
            f"model spec {raw!r} names no pretrained weights; write openclip:{arch}/<tag> "
            f"(open_clip.list_pretrained() lists them) or openclip:{arch}+rand for random weights"
        )
    return ModelSpec("openclip", arch, pretrained=tag or None, source="name", rand_seed=rand_seed)


def _parse_st(body: str, raw: str, rand_seed: int | None, folders: bool = True) -> ModelSpec:
    path = Path(body).expanduser()
    if path.exists():
        return ModelSpec("st", str(path), source="path", rand_seed=rand_seed)
    if _looks_like_path(body) and not folders:
        return ModelSpec("st", body, source="path", rand_seed=rand_seed)
    if _looks_like_path(body):
        raise BindscopeError(
            f"model spec {raw!r}: folder {body} does not exist; give a saved sentence-transformers "
            "folder or a model name such as all-MiniLM-L6-v2"
        )
    _check_hub_id(body, raw)
    return ModelSpec("st", body, source="id", rand_seed=rand_seed)


def _parse_scratch(body: str, raw: str, rand_seed: int | None, folders: bool = True) -> ModelSpec:
    path = Path(body).expanduser()
    if folders and not path.is_dir():
        raise BindscopeError(
            f"model spec {raw!r}: checkpoint folder {path} does not exist; "
            "train one with `bindscope scratch train` or give its path"
        )
    return ModelSpec("scratch", str(path), source="path", rand_seed=rand_seed)


def _looks_like_path(text: str) -> bool:
    return text.startswith(("/", "./", "../", "~")) or text.count("/") > 1 or "\\" in text


_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


def _check_hub_id(text: str, raw: str) -> None:
    if not _HUB_ID.match(text) or ".." in text:
        raise BindscopeError(
            f"model spec {raw!r}: {text!r} is neither an existing folder nor a hub id "
            "(name or org/name of letters, digits, '.', '_' and '-')"
        )


def _example(backend: str) -> str:
    return {
        "hf": "hf:openai/clip-vit-base-patch32",
        "openclip": "openclip:ViT-B-32/openai",
        "st": "st:all-MiniLM-L6-v2",
        "scratch": "scratch:runs/scratch/model",
    }[backend]
