"""Models downloaded over HTTP from a local stand-in for the hub (tests/helpers/local_hub.py), through the real CLI.

Every hub backend downloads, embeds and records the commit it loaded; a pinned revision is the one
loaded; a second run works from the cache with the hub gone; a missing repo, revision or file, an
unreachable hub and a download that breaks off are each one line that says what to do, and leave
no output behind. huggingface_hub reads HF_ENDPOINT and HF_HOME when it is imported, so every
download runs in a ``bindscope`` subprocess with the hub's environment. Independent commands run
two at a time (module fixtures), to keep the module near a minute and a half on two cores.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from cli_checks import assert_one_line_error
from forked_cli import ForkServer
from local_hub import LocalHub
from tiny_models import save_tiny_bert, save_tiny_clip, save_tiny_dinov2, save_tiny_siglip
from tiny_openclip import save_tiny_openclip

Run = Callable[..., subprocess.CompletedProcess]
Command = tuple[tuple[str | os.PathLike, ...], dict[str, str]]

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


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The saved models the hub serves (two CLIPs: the older one is tagged v1)."""
    root = tmp_path_factory.mktemp("hub-models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return {
            "clip-v1": save_tiny_clip(root / "clip-v1", seed=1),
            "clip": save_tiny_clip(root / "clip", seed=2),
            "siglip": save_tiny_siglip(root / "siglip"),
            "dinov2": save_tiny_dinov2(root / "dinov2"),
            "openclip": save_tiny_openclip(root / "openclip"),
            "st": save_tiny_sentence(root / "st"),
        }


@pytest.fixture(scope="module")
def hub(folders: dict[str, Path]) -> Iterator[LocalHub]:
    """One hub for the module: each tiny model as org/<name>, and broken copies of the CLIP."""
    with LocalHub() as hub:
        hub.add_commit("org/clip", folders["clip-v1"], tags=["v1"])
        hub.add_commit("org/clip", folders["clip"])
        for name in ("siglip", "dinov2", "openclip", "st"):
            hub.add_commit(f"org/{name}", folders[name])
        hub.add_commit("org/clip-no-config", folders["clip"], drop=["config.json"])
        hub.add_commit("org/clip-no-weights", folders["clip"], drop=["model.safetensors"])
        hub.add_commit("org/clip-no-tokenizer", folders["clip"], drop=["tokenizer.json", "tokenizer_config.json"])
        hub.add_commit("org/clip-flaky", folders["clip"])
        yield hub


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bindscope.data.datasets import build_dataset

    root = tmp_path_factory.mktemp("hub-data")
    (root / "tiny.yaml").write_text(TINY_SPACE)
    return build_dataset(root / "tiny.yaml", root / "tiny", workers=1).root


@pytest.fixture(scope="module")
def hub_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HOME of the module's runs; its hub cache (HF_HOME) is shared by them, as a user's is."""
    return tmp_path_factory.mktemp("hub-home")


@pytest.fixture(scope="module")
def run_hub(hub: LocalHub, hub_home: Path, cli_server: ForkServer) -> Run:
    """``bindscope ARGS`` online against the hub, every cache in ``hub_home``; ``env`` overrides variables."""
    caches = {
        "HOME": "",
        "XDG_CACHE_HOME": ".cache",
        "HF_HOME": ".cache/huggingface",
        "TORCH_HOME": ".cache/torch",
        "MPLCONFIGDIR": ".config/matplotlib",
        "TMPDIR": "tmp",
    }
    base = {**os.environ, **{var: str(hub_home / sub) for var, sub in caches.items()}}
    for sub in caches.values():
        (hub_home / sub).mkdir(parents=True, exist_ok=True)

    def run(*args: str | os.PathLike, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        full = {**base, **hub.env(), **(env or {}), "NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb"}
        # forked from the plain server: huggingface_hub is imported in the command, under this environment
        return cli_server.run([str(a) for a in args], full, timeout=300)

    return run


def run_all(run: Run, commands: dict[str, Command]) -> dict[str, subprocess.CompletedProcess]:
    """Run independent commands two at a time; their results by name."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(run, *args, env=env) for name, (args, env) in commands.items()}
        return {name: future.result() for name, future in futures.items()}


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
    return run_all(
        run_hub,
        {
            name: (("embed", dataset, "-m", spec, "--modality", modality, "-o", out_root / name, "-q"), {})
            for name, (spec, modality, _) in BACKENDS.items()
        },
    )


@pytest.fixture(scope="module")
def cache_runs(
    first_runs: dict[str, subprocess.CompletedProcess], run_hub: Run, dataset: Path, dead_endpoint: str, out_root: Path
) -> dict[str, subprocess.CompletedProcess]:
    """Second runs with the hub gone (into ``out_root/<name>-again``): plain, and with HF_HUB_OFFLINE=1 as well."""
    commands: dict[str, Command] = {}
    for name, extra in (("clip", {}), ("st", {"HF_HUB_OFFLINE": "1"})):
        spec, modality, _ = BACKENDS[name]
        args = ("embed", dataset, "-m", spec, "--modality", modality, "-o", out_root / f"{name}-again", "-q")
        commands[name] = (args, {"HF_ENDPOINT": dead_endpoint, **extra})
    return run_all(run_hub, commands)


@pytest.fixture(scope="module")
def error_runs(
    run_hub: Run, dataset: Path, dead_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """Each bad input of ERRORS embedded into an empty folder of its own (the unreachable one against a dead hub)."""
    commands: dict[str, Command] = {}
    folders = {}
    for name, (spec, _) in ERRORS.items():
        folders[name] = tmp_path_factory.mktemp(f"err-{name}")
        env = {"HF_ENDPOINT": dead_endpoint} if name == "unreachable" else {}
        commands[name] = (("embed", dataset, "-m", spec, "--modality", "image", "-o", folders[name] / "e"), env)
    results = run_all(run_hub, commands)
    return {name: (results[name], folders[name]) for name in ERRORS}


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
    folders: dict[str, Path],
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
    run_hub: Run, dataset: Path, hub: LocalHub, hub_home: Path, tmp_path: Path
) -> None:
    """The hub sends the weights' headers and 100 kB of them, then hangs up (every time, resumes included)."""
    out = tmp_path / "out" / "e"
    out.parent.mkdir()
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
