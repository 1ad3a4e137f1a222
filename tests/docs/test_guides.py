"""The guides run as written: every bash and python block, in order, on a fresh folder (or on the folder
the page they start from left behind)."""

from __future__ import annotations

import pytest

from doc_examples import runnable_pages


@pytest.mark.parametrize("page", runnable_pages("guides"))
def test_guide_runs(page: str, doc_page) -> None:
    doc_page(page)
