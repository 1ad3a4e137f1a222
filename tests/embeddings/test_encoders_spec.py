"""Model spec grammar: parsing, canonical strings, and one error per malformed spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from bindscope.core.errors import BindscopeError
from bindscope.embeddings.encoders import BACKENDS, DEFAULT_MODEL, embedded_default, load_encoder
from bindscope.embeddings.encoders.spec import ModelSpec, parse_spec


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hf:openai/clip-vit-base-patch32", ModelSpec("hf", "openai/clip-vit-base-patch32")),
        ("hf:openai/clip-vit-base-patch32@v1.0", ModelSpec("hf", "openai/clip-vit-base-patch32", revision="v1.0")),
        ("hf:facebook/dinov2-small+rand", ModelSpec("hf", "facebook/dinov2-small", rand_seed=0)),
        (
            "hf:google/siglip-base-patch16-224@main+rand:7",
            ModelSpec("hf", "google/siglip-base-patch16-224", revision="main", rand_seed=7),
        ),
        ("openclip:ViT-B-32/openai", ModelSpec("openclip", "ViT-B-32", pretrained="openai", source="name")),
        ("openclip:ViT-B-32+rand", ModelSpec("openclip", "ViT-B-32", source="name", rand_seed=0)),
        ("openclip:hf-hub:timm/ViT-B-16-SigLIP", ModelSpec("openclip", "timm/ViT-B-16-SigLIP", source="hf-hub")),
        ("st:all-MiniLM-L6-v2", ModelSpec("st", "all-MiniLM-L6-v2")),
        (
            "  st:sentence-transformers/all-mpnet-base-v2+rand ",
            ModelSpec("st", "sentence-transformers/all-mpnet-base-v2", rand_seed=0),
        ),
    ],
)
def test_parse_hub_specs(text: str, expected: ModelSpec) -> None:
    spec = parse_spec(text)
    assert spec == expected
    assert parse_spec(str(spec)) == spec  # the canonical string parses back to the same spec
    assert str(spec) == text.strip()


def test_local_paths_are_paths(tmp_path: Path) -> None:
    folder = tmp_path / "my@model"
    folder.mkdir()
    hf = parse_spec(f"hf:{folder}")  # an '@' inside an existing folder name is part of the path
    assert (hf.source, hf.target, hf.revision, hf.is_local) == ("path", str(folder), None, True)
    assert parse_spec(f"hf:{folder}+rand").rand_seed == 0
    oc = parse_spec(f"openclip:local-dir:{folder}+rand:3")
    assert (oc.source, oc.target, oc.rand_seed) == ("local-dir", str(folder), 3)
    assert str(oc) == f"openclip:local-dir:{folder}+rand:3"
    st = parse_spec(f"st:{folder}")
    assert st.is_local and st.target == str(folder)
    assert parse_spec(f"scratch:{folder}").backend == "scratch"


def test_rand_helpers() -> None:
    spec = parse_spec("hf:openai/clip-vit-base-patch32")
    assert not spec.random and spec.with_rand().random
    assert str(spec.with_rand()) == "hf:openai/clip-vit-base-patch32+rand"
    assert str(spec.with_rand(5)) == "hf:openai/clip-vit-base-patch32+rand:5"
    assert spec.with_rand(5).trained() == spec
    assert parse_spec(spec) is spec


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty model spec"),
        ("openai/clip-vit-base-patch32", "did you mean hf:openai/clip-vit-base-patch32"),
        ("timm:vit_small", "starts with hf:, openclip:, st: or scratch:"),
        ("opencilp:ViT-B-32/openai", r"spec 'opencilp:ViT-B-32/openai' \(did you mean openclip:ViT-B-32/openai\?\)"),
        ("Hf:openai/clip", r"\(did you mean hf:openai/clip\?\)"),
        ("hf:", "names no model after hf:"),
        ("hf:+rand", "names no model"),
        ("hf:openai/clip@", "nothing after '@'"),
        ("hf:openai/clip+random", r"\+rand or \+rand:SEED, at the end"),
        ("hf:openai/clip+rand:x", r"\+rand or \+rand:SEED"),
        ("hf:/no/such/folder", "folder /no/such/folder does not exist"),
        ("hf:bad id with spaces", "neither an existing folder nor a hub id"),
        ("openclip:ViT-B-32", "names no pretrained weights"),
        ("openclip:ViT-B-32/", r"openclip:<arch>/<pretrained tag>"),
        ("openclip:a/b/c", r"openclip:<arch>/<pretrained tag>"),
        ("openclip:local-dir:/no/such/dir", "open_clip_config.json"),
        ("openclip:hf-hub:", "neither an existing folder nor a hub id"),
        ("st:./missing-model", "does not exist"),
        ("scratch:/no/such/checkpoint", "checkpoint folder"),
    ],
)
def test_malformed_specs(text: str, message: str) -> None:
    with pytest.raises(BindscopeError, match=message):
        parse_spec(text)


def test_registry_lists_every_backend() -> None:
    assert set(BACKENDS) == {"hf", "openclip", "st", "scratch"}
    for backend in BACKENDS.values():
        for example in backend.examples:
            if "/path/to" not in example and "runs/" not in example:
                assert parse_spec(example).backend == backend.name


def test_every_backend_lives_in_the_embeddings_layer() -> None:
    """A backend is imported by its module's name, which the import linter cannot see: so every backend's
    module is checked here to lie in ``bindscope.embeddings`` (no hidden import of a layer above)."""
    for backend in BACKENDS.values():
        assert backend.module.startswith("bindscope.embeddings.encoders."), backend
        assert backend.implemented(), backend


def test_embedded_default_resolves_to_the_installed_package() -> None:
    spec, where = embedded_default()
    assert spec == DEFAULT_MODEL == "st:all-MiniLM-L6-v2"
    assert where is not None and (where / "modules.json").is_file() and (where / "model.safetensors").is_file()


def test_a_folder_that_is_not_a_scratch_model_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BindscopeError, match="not a bindscope scratch model folder"):
        load_encoder(f"scratch:{tmp_path}")
