"""Every route of the Marquez port, one module per resource (marquez/__init__.py)."""

from __future__ import annotations

from starlette.routing import BaseRoute

from embrasure.lifecycle.trimmed import ArchivedBodies
from embrasure.marquez import (
    column_lineage,
    datasets,
    events,
    jobs,
    lineage,
    namespaces,
    runlineage,
    search,
    sources,
    stats,
    writes,
)
from embrasure.store import Store
from embrasure.store.group_commit import GroupCommitter


def marquez_routes(
    store: Store, archived: ArchivedBodies, committer: GroupCommitter, body_seconds: float
) -> list[BaseRoute]:
    return [
        *namespaces.routes(store),
        *datasets.routes(store),
        *jobs.routes(store),
        *lineage.routes(store),
        *column_lineage.routes(store),
        *runlineage.routes(store),
        *events.routes(store, archived),
        *search.routes(store),
        *stats.routes(store),
        *sources.routes(store),
        *writes.routes(store, committer, body_seconds),
    ]
