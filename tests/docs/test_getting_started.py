"""The getting-started pages run as written: every bash and python block, in order, on a fresh folder."""

from __future__ import annotations

import pytest

from doc_examples import runnable_pages


@pytest.mark.parametrize("page", runnable_pages("getting-started"))
def test_getting_started_page_runs(page: str, doc_page) -> None:
    doc_page(page)


def test_readme_example_runs(doc_page) -> None:
    doc_page("../README.md")
