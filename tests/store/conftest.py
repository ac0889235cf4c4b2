"""Catalog fixtures: `catalog_url` and `catalog` run each test that takes them on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from explorer.store.catalog.catalog import Catalog
from tests.helpers.catalog_backends import BACKENDS
from tests.helpers.catalog_backends import catalog_url as make_catalog_url


@pytest.fixture(params=BACKENDS)
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with make_catalog_url(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def catalog(catalog_url: str) -> Iterator[Catalog]:
    cat = Catalog(catalog_url)
    yield cat
    cat.close()
