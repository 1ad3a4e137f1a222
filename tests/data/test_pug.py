"""PUG:SPARE import: a fake CSV and 7,392 tiny PNGs whose pixel color encodes their scene."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from bindscope.core.errors import BindscopeError
from bindscope.data import pug
from bindscope.data.datasets import Dataset, dataset_hash, load_dataset
from bindscope.data.presets import PUG_ANIMALS, PUG_TEXTURES, get_preset
from bindscope.data.pug import import_pug

N_SCENES = 7392
N_OTHER_WORLD = 30
N_WITH_POSITION = 20
JPEG_NAMED = 10  # kept rows whose file is named .jpeg (PNG bytes), to check the extension is kept


def _code(a1: int, t1: int, a2: int, t2: int) -> int:
    """A scene's number in the pixel color (< 12*8*12*8 = 9216, fits in two bytes)."""
    return ((a1 * 8 + t1) * 12 + a2) * 8 + t2


def _color(code: int) -> tuple[int, int, int]:
    return code % 256, code // 256, 77


def _png(color: tuple[int, int, int], size: int = 4) -> bytes:
    """A ``size`` x ``size`` PNG of one color, encoded directly (PIL's save costs more, 7,392 times over)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = (b"\x00" + bytes(color) * size) * size  # filter type 0, then the row's RGB pixels
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _row(world: str, a1: int, t1: int, a2: int, t2: int, filename: str, pos1=None, pos2=None) -> dict:
    return {
        "filename": filename,
        "world_name": world,
        "character_name": PUG_ANIMALS[a1],
        "character2_name": PUG_ANIMALS[a2],
        "character_texture": PUG_TEXTURES[t1],
        "character2_texture": PUG_TEXTURES[t2],
        "character_pos": pos1,
        "character2_pos": pos2,
        "character_scale": 1.0,
    }


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, Path]:
    """The fake PUG:SPARE table (kept rows shuffled, plus dropped rows) and its images folder."""
    root = tmp_path_factory.mktemp("pug")
    images = root / "Desert"
    images.mkdir()
    scenes = get_preset("pug_spare").build_scenes().scenes
    rng = np.random.default_rng(0)
    rows = []
    for k, i in enumerate(rng.permutation(len(scenes))):
        (a1, t1), (a2, t2) = scenes[i].tolist()
        name = f"sub/img_{k:05d}.{'jpeg' if k < JPEG_NAMED else 'png'}"
        rows.append(_row("Desert", a1, t1, a2, t2, name))
    (images / "sub").mkdir()
    for row in rows:
        code = _code(
            PUG_ANIMALS.index(row["character_name"]),
            PUG_TEXTURES.index(row["character_texture"]),
            PUG_ANIMALS.index(row["character2_name"]),
            PUG_TEXTURES.index(row["character2_texture"]),
        )
        (images / row["filename"]).write_bytes(_png(_color(code)))
    # dropped rows: another world, and Desert rows with positions (no image files needed)
    rows += [_row("Island", 0, 0, 1, 1, f"island_{j}.png") for j in range(N_OTHER_WORLD)]
    rows += [
        _row("Desert", 2, 3, 4, 5, f"pos_{j}.png", pos1="[1, 0, 0]", pos2=None if j % 2 else "[2, 0, 0]")
        for j in range(N_WITH_POSITION)
    ]
    table = pd.DataFrame(rows).sample(frac=1.0, random_state=1).reset_index(drop=True)
    return table, images


def _write(table: pd.DataFrame, path: Path) -> Path:
    table.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def imported_once(source: tuple[pd.DataFrame, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Dataset]:
    """The module's import: its folder, and the dataset ``import_pug`` returns (the folder, loaded)."""
    table, images = source
    root = tmp_path_factory.mktemp("imported")
    csv = _write(table, root / "PUG_SPARE.csv")
    ds = import_pug(csv, images, out=root / "pug")
    return root / "pug", ds


@pytest.fixture(scope="module")
def imported(imported_once: tuple[Path, Dataset]) -> Path:
    return imported_once[0]


@pytest.fixture(scope="module")
def imported_ds(imported_once: tuple[Path, Dataset]) -> Dataset:
    """The imported folder, loaded once for the tests that read it (loading checks all 7,392 image paths)."""
    return imported_once[1]


def _kept(table: pd.DataFrame) -> pd.Series:
    return (table["world_name"] == "Desert") & table["character_pos"].isna() & table["character2_pos"].isna()


def test_import_builds_a_loadable_pug_spare_folder(imported: Path) -> None:
    ds = load_dataset(imported)
    preset = get_preset("pug_spare")
    assert ds.name == "pug_spare" and len(ds) == N_SCENES
    assert ds.hash == dataset_hash(preset, preset.build_scenes())
    assert sorted(p.name for p in imported.iterdir()) == [
        ".bindscope.json",
        "images",
        "manifest.json",
        "scenes.csv",
        "scenes.parquet",
        "sources.csv",
    ]
    assert not [p for p in imported.parent.iterdir() if p.name.startswith(".")]  # no staging left over
    manifest = json.loads((imported / "manifest.json").read_text())
    assert manifest["images"] == {"rendered": N_SCENES}
    src = manifest["source"]
    assert src["world"] == "Desert" and src["sources"] == "sources.csv" and len(src["csv_sha256"]) == 64
    total = N_SCENES + N_OTHER_WORLD + N_WITH_POSITION
    assert src["rows"] == {
        "csv": total,
        "other_world": N_OTHER_WORLD,
        "with_position": N_WITH_POSITION,
        "used": N_SCENES,
    }


def test_each_image_shows_its_scene(imported: Path, imported_ds: Dataset) -> None:
    ds = imported_ds
    assert list(ds.images[:3]) == [f"images/{i:06d}{Path(p).suffix}" for i, p in enumerate(ds.images[:3])]
    for i, (rel, scene) in enumerate(zip(ds.images, ds.scenes.scenes)):
        assert rel.startswith(f"images/{i:06d}.")
        with Image.open(imported / rel) as img:
            assert img.getpixel((0, 0)) == _color(_code(*scene.ravel().tolist())), f"scene {i}"
    assert sum(p.endswith(".jpeg") for p in ds.images) == JPEG_NAMED
    assert sum(p.endswith(".png") for p in ds.images) == N_SCENES - JPEG_NAMED


def test_sources_csv_names_each_scenes_file(
    imported: Path, imported_ds: Dataset, source: tuple[pd.DataFrame, Path]
) -> None:
    table, _ = source
    sources = pd.read_csv(imported / "sources.csv")
    assert list(sources.columns) == ["scene", "filename", "csv_line"]
    assert sources["scene"].tolist() == list(range(N_SCENES))
    by_line = table["filename"].to_numpy()[sources["csv_line"].to_numpy() - 2]
    assert (by_line == sources["filename"].to_numpy()).all()
    assert _kept(table).to_numpy()[sources["csv_line"].to_numpy() - 2].all()
    ds = imported_ds
    assert [Path(f).suffix for f in sources["filename"]] == [Path(p).suffix for p in ds.images]


def _expect_error(table: pd.DataFrame, images: Path, tmp_path: Path, *needles: str, **kwargs) -> str:
    csv = _write(table, tmp_path / "bad.csv")
    with pytest.raises(BindscopeError) as info:
        import_pug(csv, images, out=tmp_path / "out", **kwargs)
    message = str(info.value)
    for needle in needles:
        assert needle in message, message
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    return message


def test_missing_column(source: tuple[pd.DataFrame, Path], tmp_path: Path) -> None:
    table, images = source
    _expect_error(
        table.drop(columns=["character2_pos", "world_name"]),
        images,
        tmp_path,
        "lacks 2 column(s): world_name, character2_pos",
    )


def test_unknown_animal_name(source: tuple[pd.DataFrame, Path], tmp_path: Path) -> None:
    table, images = source
    bad = table.copy()
    rows = np.flatnonzero(_kept(bad))[:7]
    bad.loc[rows, "character2_name"] = "Cat"
    _expect_error(
        bad,
        images,
        tmp_path,
        "7 kept PUG:SPARE row(s)",
        f"line {rows[0] + 2}: character2_name 'Cat'",
        "(and 2 more)",
        "Hippopotamus",
    )


def test_self_pair(source: tuple[pd.DataFrame, Path], tmp_path: Path) -> None:
    table, images = source
    extra = pd.DataFrame([_row("Desert", 3, 1, 3, 2, "x.png"), _row("Desert", 0, 5, 1, 5, "y.png")])
    bad = pd.concat([table, extra], ignore_index=True)
    _expect_error(
        bad,
        images,
        tmp_path,
        "2 kept PUG:SPARE row(s) pair an animal or a texture with itself",
        f"line {len(table) + 2}: Blue DeerDoe + Green DeerDoe",
        f"line {len(table) + 3}: Purple Crow + Purple Fox",
    )


def test_duplicate_scene(source: tuple[pd.DataFrame, Path], tmp_path: Path) -> None:
    table, images = source
    first = int(np.flatnonzero(_kept(table))[0])
    bad = pd.concat([table, table.iloc[[first]]], ignore_index=True)
    _expect_error(
        bad,
        images,
        tmp_path,
        "1 pug_spare scene(s) have more than one kept PUG:SPARE row",
        f"at lines {first + 2}, {len(table) + 2}",
    )


def test_wrong_world_lists_the_worlds(source: tuple[pd.DataFrame, Path], tmp_path: Path) -> None:
    table, images = source
    _expect_error(
        table,
        images,
        tmp_path,
        f"{N_SCENES:,} of the {N_SCENES:,} pug_spare scenes have no row",
        "'Forest'",
        f"Desert ({N_SCENES + N_WITH_POSITION:,} rows)",
        f"Island ({N_OTHER_WORLD} rows)",
        "--world",
        world="Forest",
    )


def test_missing_scenes(source: tuple[pd.DataFrame, Path], tmp_path: Path) -> None:
    table, images = source
    bad = table.drop(index=np.flatnonzero(_kept(table))[:3])
    _expect_error(bad, images, tmp_path, f"3 of the {N_SCENES:,} pug_spare scenes have no row")


def test_missing_image_files_are_all_counted(source: tuple[pd.DataFrame, Path], tmp_path: Path) -> None:
    table, images = source
    bad = table.copy()
    rows = np.flatnonzero(_kept(bad))[:12]
    bad.loc[rows, "filename"] = [f"gone/{j}.png" for j in range(12)]
    message = _expect_error(bad, images, tmp_path, "12 image file(s)", "(and 2 more)")
    assert sum(f"gone/{j}.png" in message for j in range(12)) == 10


def test_out_not_empty_needs_overwrite(
    source: tuple[pd.DataFrame, Path], imported: Path, imported_ds: Dataset, tmp_path: Path
) -> None:
    table, images = source
    csv = _write(table, tmp_path / "PUG_SPARE.csv")
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(BindscopeError, match="not empty; choose another --out or pass --overwrite"):
        import_pug(csv, images, out=out)
    assert (out / "notes.txt").read_text() == "mine"
    with pytest.raises(BindscopeError, match="pass --overwrite"):
        import_pug(csv, images, out=imported)  # re-import needs overwrite too
    with pytest.raises(
        BindscopeError, match="holds files bindscope did not write; --overwrite replaces only a dataset"
    ):
        import_pug(csv, images, out=out, overwrite=True)  # not a folder bindscope wrote: never replaced
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    again = tmp_path / "again"
    import_pug(csv, images, out=again)
    ds = import_pug(csv, images, out=again, overwrite=True, progress=True)
    assert len(ds) == N_SCENES and load_dataset(again).hash == imported_ds.hash


def test_out_holding_the_sources_is_refused(source: tuple[pd.DataFrame, Path], tmp_path: Path) -> None:
    table, images = source
    csv = _write(table, tmp_path / "PUG_SPARE.csv")
    with pytest.raises(BindscopeError, match="holds the input"):
        import_pug(csv, images, out=images.parent, overwrite=True)
    assert images.is_dir()


def test_interrupted_import_leaves_nothing(
    source: tuple[pd.DataFrame, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, images = source
    csv = _write(table, tmp_path / "PUG_SPARE.csv")
    copied = []

    def flaky(src: Path, dst: Path) -> None:
        if len(copied) == 100:
            raise KeyboardInterrupt
        copied.append(dst)

    monkeypatch.setattr(pug, "_copy_image", flaky)
    with pytest.raises(KeyboardInterrupt):
        import_pug(csv, images, out=tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["PUG_SPARE.csv"]


def test_cli_import_pug(run_cli, source: tuple[pd.DataFrame, Path], tmp_path: Path) -> None:
    from cli_checks import assert_one_line_error

    table, images = source
    csv = _write(table, tmp_path / "pug.csv")
    out = run_cli("dataset", "import-pug", csv, images, "--out", tmp_path / "pug", "-q")
    assert out.returncode == 0, out.stderr
    assert len(load_dataset(tmp_path / "pug")) == 7392
    wrong = run_cli("dataset", "import-pug", csv, images, "--world", "Arctic", "--out", tmp_path / "pug2")
    assert_one_line_error(wrong, "Arctic")
