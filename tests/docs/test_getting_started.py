"""The getting-started pages run as written: every bash and python block, in order, on a fresh folder."""

from __future__ import annotations

import pytest

from doc_examples import page_params, runnable_pages


@pytest.mark.parametrize("page", [*runnable_pages("getting-started"), *page_params(["../README.md"])])
def test_getting_started_page_runs(page: str, doc_page) -> None:
    doc_page(page)
