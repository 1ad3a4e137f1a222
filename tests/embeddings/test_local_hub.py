"""Models downloaded over HTTP from a local stand-in for the hub (tests/helpers/local_hub.py), through the real CLI.

Every hub backend downloads, embeds and records the commit it loaded; a pinned revision is the one
loaded; a second run works from the cache with the hub gone; a missing repo, revision or file, an
unreachable hub and a download that breaks off are each one line that says what to do, and leave
no output behind. huggingface_hub reads HF_ENDPOINT and HF_HOME when it is imported, so every
download runs in a ``bindscope`` subprocess with the hub's environment: forked from a fork server that
imported the model libraries under that environment, or, for a command under other hub settings, from
the plain one. Each command runs once, in the first test that needs it, and each model is made and put
on the hub on first use, so that every test pays only for what it uses.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from cli_checks import assert_one_line_error
from forked_cli import MODEL_LIBRARIES, ForkServer, same_hub_settings
from local_hub import LocalHub
from tiny_models import save_tiny_bert, save_tiny_clip, save_tiny_dinov2, save_tiny_siglip
from tiny_openclip import save_tiny_openclip

Run = Callable[..., subprocess.CompletedProcess]

#: A 2 x 2 concept space with two objects per scene: 16 rows (12 scenes and 4 single objects), 32-pixel images.
TINY_SPACE = """\
name: tiny-hub
concepts:
  color: [red, blue]
  shape: [square, circle]
objects_per_scene: 2
modalities: [image, text]
renderer: flat2d
image: {width: 32, height: 32}
"""
ROWS = 16
#: What each backend test embeds: spec, modality and embedding width.
BACKENDS = {
    "clip": ("hf:org/clip@v1", "image", 24),
    "siglip": ("hf:org/siglip", "text", 32),
    "dinov2": ("hf:org/dinov2", "image", 32),
    "openclip": ("openclip:hf-hub:org/openclip", "image", 24),
    "st": ("st:org/st", "text", 32),
    "clip-no-tokenizer": ("hf:org/clip-no-tokenizer", "image", 24),
}
#: Bad input, and what its one-line error says.
ERRORS = {
    "missing-repo": ("hf:org/no-such-model", "no model 'org/no-such-model' on the hub at http://127.0.0.1:"),
    "missing-revision": ("hf:org/clip@v9", "org/clip has no revision 'v9'; give an existing branch, tag or commit"),
    "missing-config": ("hf:org/clip-no-config", "has no config.json; it is not a transformers model: for open_clip"),
    "missing-weights": ("hf:org/clip-no-weights", "has no weights at commit "),
    "not-open-clip": ("openclip:hf-hub:org/clip", "has no open_clip_config.json; it is not an open_clip model"),
    "unreachable": ("hf:org/never-downloaded", "could not be reached (ConnectError"),
}


def save_tiny_sentence(path: Path) -> Path:
    """A tiny BERT with mean pooling, saved with ``SentenceTransformer.save``."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    bert = save_tiny_bert(path.with_name(path.name + "-bert"))
    transformer = Transformer(str(bert))
    SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension())]).save(str(path))
    return path


#: The repos the hub serves: each is a list of (saved model, files left out, tags), oldest commit first.
REPOS: dict[str, list[tuple[str, list[str], list[str]]]] = {
    "org/clip": [("clip-v1", [], ["v1"]), ("clip", [], [])],
    **{f"org/{name}": [(name, [], [])] for name in ("siglip", "dinov2", "openclip", "st")},
    "org/clip-no-config": [("clip", ["config.json"], [])],
    "org/clip-no-weights": [("clip", ["model.safetensors"], [])],
    "org/clip-no-tokenizer": [("clip", ["tokenizer.json", "tokenizer_config.json"], [])],
    "org/clip-flaky": [("clip", [], [])],
}
#: How each saved model is made (two CLIPs: the older one is tagged v1).
SAVERS: dict[str, Callable[[Path], Path]] = {
    "clip-v1": lambda path: save_tiny_clip(path, seed=1),
    "clip": lambda path: save_tiny_clip(path, seed=2),
    "siglip": save_tiny_siglip,
    "dinov2": save_tiny_dinov2,
    "openclip": save_tiny_openclip,
    "st": lambda path: save_tiny_sentence(path),
}


class Models:
    """The saved models, each made on first use (a test pays only for the models it needs)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.saved: dict[str, Path] = {}

    def __getitem__(self, name: str) -> Path:
        if name not in self.saved:
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("HF_HUB_OFFLINE", "1")
                self.saved[name] = SAVERS[name](self.root / name)
        return self.saved[name]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Models:
    return Models(tmp_path_factory.mktemp("hub-models"))


@pytest.fixture(scope="module")
def hub_server_started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalHub, Path, ForkServer]]:
    """The hub (serving nothing yet), HOME of the module's runs, and a fork server that has imported the model
    libraries under the hub's environment (huggingface_hub reads HF_ENDPOINT and HF_HOME at import): it starts
    with the module and imports while the tiny models are made. Its hub cache (HF_HOME) is shared by the runs,
    as a user's is."""
    home = tmp_path_factory.mktemp("hub-home")
    caches = {
        "HOME": "",
        "XDG_CACHE_HOME": ".cache",
        "HF_HOME": ".cache/huggingface",
        "TORCH_HOME": ".cache/torch",
        "MPLCONFIGDIR": ".config/matplotlib",
        "TMPDIR": "tmp",
    }
    for sub in caches.values():
        (home / sub).mkdir(parents=True, exist_ok=True)
    with LocalHub() as hub:
        env = {
            **os.environ,
            **{var: str(home / sub) for var, sub in caches.items()},
            **hub.env(),
            "NO_COLOR": "1",
            "COLUMNS": "200",
            "TERM": "dumb",
        }
        server = ForkServer(env, tmp_path_factory.mktemp("forked-hub-cli"), preload=MODEL_LIBRARIES)
        server.env = env  # type: ignore[attr-defined]
        try:
            yield hub, home, server
        finally:
            server.close()


@pytest.fixture(scope="module", autouse=True)
def _start_early(hub_server_started: tuple[LocalHub, Path, ForkServer]) -> None:
    """Start the hub's fork server with the module's first test."""


@pytest.fixture(scope="module")
def hub(hub_server_started: tuple[LocalHub, Path, ForkServer], folders: Models) -> LocalHub:
    """One hub for the module: each tiny model as org/<name>, and broken copies of the CLIP, added on first use
    (:func:`serve`)."""
    return hub_server_started[0]


def serve(hub: LocalHub, folders: Models, repo: str) -> None:
    """Put ``repo`` (all its commits) on the hub, once."""
    if repo not in hub.repos:
        for model, drop, tags in REPOS[repo]:
            hub.add_commit(repo, folders[model], drop=drop, tags=tags)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bindscope.data.datasets import build_dataset

    root = tmp_path_factory.mktemp("hub-data")
    (root / "tiny.yaml").write_text(TINY_SPACE)
    return build_dataset(root / "tiny.yaml", root / "tiny", workers=1).root


@pytest.fixture(scope="module")
def hub_home(hub_server_started: tuple[LocalHub, Path, ForkServer]) -> Path:
    """HOME of the module's runs; its hub cache (HF_HOME) is shared by them, as a user's is."""
    return hub_server_started[1]


@pytest.fixture(scope="module")
def run_hub(hub_server_started: tuple[LocalHub, Path, ForkServer], folders: Models, cli_server: ForkServer) -> Run:
    """``bindscope ARGS`` online against the hub, every cache in ``hub_home``; ``env`` overrides variables.

    The repo a command names (``-m``) is put on the hub first. Under the hub's own settings the command is
    forked from the hub's fork server; under others (a dead endpoint, offline) from the plain server, so that
    huggingface_hub is imported in the command, under its environment."""
    hub, _, server = hub_server_started
    base = server.env  # type: ignore[attr-defined]

    def run(*args: str | os.PathLike, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        spec = str(args[list(args).index("-m") + 1])
        repo = spec.split(":")[-1].split("@")[0]
        if repo in REPOS:
            serve(hub, folders, repo)
        full = {**base, **(env or {})}
        forker = server if same_hub_settings(full, base) else cli_server
        return forker.run([str(a) for a in args], full, timeout=300)

    return run


class Memo(dict):
    """Each command's result, run on first use: whichever test asks first pays for it."""

    def __init__(self, make: Callable[[str], object]) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, name: str) -> object:
        self[name] = value = self.make(name)
        return value


@pytest.fixture(scope="module")
def dead_endpoint() -> str:
    """The address of a hub that has stopped: connections to it are refused."""
    hub = LocalHub().start()
    url = hub.url
    hub.stop()
    return url


@pytest.fixture(scope="module")
def out_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hub-out")


@pytest.fixture(scope="module")
def first_runs(run_hub: Run, dataset: Path, out_root: Path) -> dict[str, subprocess.CompletedProcess]:
    """Each backend's first embedding (into ``out_root/<name>``), downloaded into the module's hub cache."""

    def first(name: str) -> subprocess.CompletedProcess:
        spec, modality, _ = BACKENDS[name]
        return run_hub("embed", dataset, "-m", spec, "--modality", modality, "-o", out_root / name, "-q")

    return Memo(first)


@pytest.fixture(scope="module")
def cache_runs(
    first_runs: dict[str, subprocess.CompletedProcess], run_hub: Run, dataset: Path, dead_endpoint: str, out_root: Path
) -> dict[str, subprocess.CompletedProcess]:
    """Second runs with the hub gone (into ``out_root/<name>-again``): plain, and with HF_HUB_OFFLINE=1 as well."""
    extras = {"clip": {}, "st": {"HF_HUB_OFFLINE": "1"}}

    def again(name: str) -> subprocess.CompletedProcess:
        assert first_runs[name].returncode == 0, first_runs[name].stderr  # the first run fills the cache
        spec, modality, _ = BACKENDS[name]
        args = ("embed", dataset, "-m", spec, "--modality", modality, "-o", out_root / f"{name}-again", "-q")
        return run_hub(*args, env={"HF_ENDPOINT": dead_endpoint, **extras[name]})

    return Memo(again)


@pytest.fixture(scope="module")
def error_runs(
    run_hub: Run, dataset: Path, dead_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """Each bad input of ERRORS embedded into an empty folder of its own (the unreachable one against a dead hub)."""

    def error(name: str) -> tuple[subprocess.CompletedProcess, Path]:
        spec, _ = ERRORS[name]
        folder = tmp_path_factory.mktemp(f"err-{name}")
        env = {"HF_ENDPOINT": dead_endpoint} if name == "unreachable" else {}
        return run_hub("embed", dataset, "-m", spec, "--modality", "image", "-o", folder / "e", env=env), folder

    return Memo(error)


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def _commit(hub: LocalHub, repo: str, ref: str = "main") -> str:
    return hub.repos[repo].refs[ref]


# -- every backend from the hub --------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BACKENDS))
def test_each_backend_downloads_embeds_and_records_its_commit(
    first_runs: dict[str, subprocess.CompletedProcess], hub: LocalHub, out_root: Path, name: str
) -> None:
    """Files through /resolve/ (weights redirected to the CDN); the manifest names the commit they came from."""
    spec, _, dim = BACKENDS[name]
    result = first_runs[name]
    assert result.returncode == 0, result.stderr
    assert np.load(out_root / name / "embeddings.npy").shape == (ROWS, dim)
    repo = spec.split(":")[-1].split("@")[0]
    model = _manifest(out_root / name)["model"]
    assert model["resolved"] == repo
    assert model["revision"] == _commit(hub, repo, "v1" if spec.endswith("@v1") else "main")
    assert any(role == "cdn" and f"/{model['revision']}/" in path for role, _, path in hub.requests)


@pytest.mark.slow
def test_a_pinned_revision_is_the_one_loaded(
    first_runs: dict[str, subprocess.CompletedProcess],
    folders: Models,
    dataset: Path,
    hub: LocalHub,
    out_root: Path,
    tmp_path: Path,
) -> None:
    """hf:org/clip@v1 names the older commit: its weights are the ones loaded, though main holds others."""
    from bindscope.embeddings.embed import embed_dataset

    assert first_runs["clip"].returncode == 0, first_runs["clip"].stderr
    assert _commit(hub, "org/clip", "v1") != _commit(hub, "org/clip")
    old = embed_dataset(dataset, f"hf:{folders['clip-v1']}", modality="image", out=tmp_path / "old").embeddings
    new = embed_dataset(dataset, f"hf:{folders['clip']}", modality="image", out=tmp_path / "new").embeddings
    got = np.load(out_root / "clip" / "embeddings.npy")
    np.testing.assert_allclose(got, old.array, atol=1e-5)
    assert np.abs(got - new.array).max() > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("name", ["clip", "st"], ids=["hub-gone", "hub-gone-and-HF_HUB_OFFLINE"])
def test_a_second_run_works_from_the_cache_with_the_hub_gone(
    cache_runs: dict[str, subprocess.CompletedProcess], out_root: Path, name: str
) -> None:
    """The hub refuses connections: nothing is retried, every file comes from the cache, at the same commit."""
    again = cache_runs[name]
    assert again.returncode == 0, again.stderr
    assert "Retrying" not in again.stderr and "Could not reach" not in again.stderr
    first, second = out_root / name, out_root / f"{name}-again"
    assert _manifest(second)["model"]["revision"] == _manifest(first)["model"]["revision"]
    np.testing.assert_array_equal(np.load(second / "embeddings.npy"), np.load(first / "embeddings.npy"))


@pytest.mark.slow
def test_a_repo_without_tokenizer_files_embeds_images(
    first_runs: dict[str, subprocess.CompletedProcess], out_root: Path
) -> None:
    """No over-refusal: images need no tokenizer; the manifest says why texts would be refused."""
    assert first_runs["clip-no-tokenizer"].returncode == 0, first_runs["clip-no-tokenizer"].stderr
    text = _manifest(out_root / "clip-no-tokenizer")["model"]["preprocessing"]["text"]
    assert "cannot embed texts: its tokenizer has no vocabulary" in text["unavailable"]


# -- faults and bad input: one line, nothing written ------------------------------------------------


@pytest.mark.parametrize("name", list(ERRORS))
def test_hub_errors_are_one_line_and_write_nothing(
    error_runs: dict[str, tuple[subprocess.CompletedProcess, Path]], name: str
) -> None:
    result, folder = error_runs[name]
    assert_one_line_error(result, ERRORS[name][1])
    assert not list(folder.iterdir())


def test_an_unreachable_hub_says_what_to_do(error_runs: dict[str, tuple[subprocess.CompletedProcess, Path]]) -> None:
    result, _ = error_runs["unreachable"]
    assert "is not in the local hub cache; check the connection or set HF_ENDPOINT" in result.stderr


@pytest.mark.slow
def test_a_download_that_breaks_off_leaves_nothing_and_the_next_run_works(
    run_hub: Run, dataset: Path, hub: LocalHub, folders: Models, hub_home: Path, tmp_path: Path
) -> None:
    """The hub sends the weights' headers and 100 kB of them, then hangs up (every time, resumes included)."""
    out = tmp_path / "out" / "e"
    out.parent.mkdir()
    serve(hub, folders, "org/clip-flaky")
    args = ("embed", dataset, "-m", "hf:org/clip-flaky", "--modality", "image", "-o", out, "-q")
    fault = hub.break_file("org/clip-flaky", "model.safetensors", after_bytes=100_000)
    try:
        broken = run_hub(*args)
    finally:
        hub.heal()
    assert fault.hits >= 1
    assert_one_line_error(broken, "could not reach the hub at http://127.0.0.1:")
    assert "while loading its weights (RemoteProtocolError" in broken.stderr
    assert "run the same command again" in broken.stderr
    assert not list(out.parent.iterdir()), "no output, partial folder or temp file"
    assert not list(hub_home.rglob("*.incomplete")), "no partial download in the hub cache"
    healed = run_hub(*args)
    assert healed.returncode == 0, healed.stderr
    assert np.load(out / "embeddings.npy").shape == (ROWS, 24)
    assert sorted(p.name for p in out.parent.iterdir()) == ["e"]
