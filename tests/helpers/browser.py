"""HTML pages opened in headless Chromium (Debian's ``chromium`` and ``chromium-driver``) at a given window size."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMEDRIVER = "/usr/bin/chromedriver"

#: How a page fits its window: the page's width against the window's (``visible``: less a vertical scrollbar),
#: every box that scrolls sideways (a ``pre``, a table) with its content and visible widths, and each card table's.
LAYOUT = """
const boxes = Array.from(document.querySelectorAll('body *')).filter(e => e.scrollWidth > e.clientWidth + 1
  && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX));
const cards = Array.from(document.querySelectorAll('table.card')).map(t => t.closest('.card-scroll') || t);
return {
  page: document.documentElement.scrollWidth,
  window: window.innerWidth,
  visible: document.documentElement.clientWidth,
  scrolling: boxes.map(e => `${e.tagName.toLowerCase()}.${e.className}: ${e.scrollWidth} > ${e.clientWidth}`),
  cards: cards.map(box => ({content: box.scrollWidth, shown: box.clientWidth})),
};
"""


@contextmanager
def chromium(profile: Path, width: int, height: int) -> Iterator[Any]:
    """A headless Chromium window of ``width`` x ``height`` CSS pixels, its profile in ``profile`` (a temp folder)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument(f"--window-size={width},{height}")
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def layout(driver: Any, page: Path) -> dict[str, Any]:
    """Open ``page`` and read how it fits the window (:data:`LAYOUT`)."""
    driver.get(page.resolve().as_uri())
    return driver.execute_script(LAYOUT)
