"""Make the documentation's pictures from real outputs: the figures a demo run wrote, the report card
as the browser shows it, and previews of the rendered datasets.

Run from the repository root after the demo (it reads the run folder, it does not write into it)::

    .venv/bin/bindscope demo --out runs/demo
    .venv/bin/python scripts/docs/gallery.py runs/demo

It writes PNGs (at most 900 px wide) into ``docs/assets/gallery/``, replacing the ones of an earlier run,
and needs headless Chromium and its driver (``chromium``, ``chromium-driver``) for the report card.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
GALLERY = ROOT / "docs" / "assets" / "gallery"
MAX_WIDTH = 900
#: name in the gallery -> the figure of the demo run it is (relative to the run folder).
FIGURES = {
    "complexity-clevr.png": "results/clevr/minilm-text/complexity/plots/complexity.png",
    "complexity-text.png": "results/text/minilm-text/complexity/plots/complexity.png",
    "geometry-factorization.png": "results/clevr/minilm-text/geometry/plots/factorization.png",
    "geometry-generalization.png": "results/clevr/minilm-text/geometry/plots/generalization.png",
    "geometry-cosines.png": "results/clevr/minilm-text/geometry/plots/cosines.png",
    "geometry-spectra.png": "results/clevr/minilm-text/geometry/plots/spectra.png",
    "geometry-mds.png": "results/clevr/minilm-text/geometry/plots/mds.png",
}


def shrink(source: Path, target: Path) -> Path:
    """Copy an image as PNG, at most :data:`MAX_WIDTH` wide (keeps the repository small)."""
    with Image.open(source) as image:
        if image.width > MAX_WIDTH:
            image = image.resize((MAX_WIDTH, round(image.height * MAX_WIDTH / image.width)), Image.LANCZOS)
        image.save(target, optimize=True)
    return target


def copy_figures(run: Path, out: Path) -> list[Path]:
    """The demo's figures listed in :data:`FIGURES`; a missing one is an error naming it."""
    missing = [rel for rel in FIGURES.values() if not (run / rel).is_file()]
    if missing:
        sys.exit(f"error: {run} lacks {missing}; run `bindscope demo --out {run}` to completion first")
    return [shrink(run / rel, out / name) for name, rel in FIGURES.items()]


def card_screenshot(run: Path, out: Path) -> Path:
    """The first table of the binding report card of ``report.html`` as headless Chromium draws it in a 1,400 px
    window (a card of more than eight columns is cut into tables)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = Options()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1600"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=options)
    try:
        driver.get((run / "report.html").resolve().as_uri())
        card = driver.find_element(By.CSS_SELECTOR, "section#card table.card")
        raw = out / "report-card.raw.png"
        card.screenshot(str(raw))
    finally:
        driver.quit()
    target = shrink(raw, out / "report-card.png")
    raw.unlink()
    return target


def dataset_previews(out: Path) -> list[Path]:
    """A grid of rendered scenes of each image preset (built in a temporary folder)."""
    made = []
    bindscope = str(Path(sys.executable).with_name("bindscope"))
    with tempfile.TemporaryDirectory() as tmp:
        for preset in ("clevr", "clevr2d"):
            data = Path(tmp) / preset
            subprocess.run([bindscope, "dataset", "build", preset, "--out", str(data), "-q"], check=True)
            grid = Path(tmp) / f"{preset}.png"
            subprocess.run(
                [bindscope, "dataset", "preview", str(data), "--out", str(grid), "--rows", "3", "--cols", "4"],
                check=True,
            )
            made.append(shrink(grid, out / f"preview-{preset}.png"))
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a finished `bindscope demo` (or `bindscope run`) folder")
    args = parser.parse_args()
    if not (args.run / "report.html").is_file():
        sys.exit(f"error: {args.run} has no report.html; run `bindscope demo --out {args.run}` to completion first")
    GALLERY.mkdir(parents=True, exist_ok=True)
    made = [*copy_figures(args.run, GALLERY), card_screenshot(args.run, GALLERY), *dataset_previews(GALLERY)]
    for path in made:
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
