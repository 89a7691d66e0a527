"""Every catalog store runs the same suite: add a factory here for a new store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from delayline.catalog import CatalogStore, SqliteCatalog

STORES: dict[str, Callable[[Path], CatalogStore]] = {
    "sqlite": lambda tmp: SqliteCatalog(tmp / "catalog.db"),
}


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CatalogStore]:
    made = STORES[request.param](tmp_path)
    yield made
    made.close()
