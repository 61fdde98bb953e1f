"""Fixtures of the Marquez API's tests (embrasure/marquez/, docs/marquez.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient


@pytest.fixture
def marquez(client: TestClient) -> Iterator[TestClient]:
    """The Marquez port's app in process, beside the ``client`` app whose lifespan runs
    the group commit (events are posted there, with graph_api's ``api``)."""
    with TestClient(client.app.state.marquez) as c:  # type: ignore[attr-defined]
        yield c
