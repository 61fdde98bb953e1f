"""Events as producers sent them, read back from the delivery log (``GET /api/v1/events``,
and the Marquez port's ``/api/v1/events/lineage``): each delivery's body once, from the
database or, after retention moved it, from the archive (docs/operations.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from embrasure.lifecycle.trimmed import ArchivedBodies
from embrasure.projector.apply import split_items
from embrasure.store.base import GraphReader, LogEntry
from embrasure.store.read_rows import EventPlace


def documents(
    reader: GraphReader, archived: ArchivedBodies, places: Sequence[EventPlace]
) -> list[Any]:
    """The event each place names, as JSON, in the order of ``places``."""
    routes = {e.seq: e.route for e in places}
    stored = {seq: reader.body(seq) for seq in routes}  # each delivery once
    from_archive = archived.bodies(s for s, b in stored.items() if b is None)
    items: dict[int, list[Any]] = {}
    for seq, route in routes.items():
        body = stored[seq]
        entry = LogEntry(seq, "", route, from_archive[seq] if body is None else body, 0, ())
        items[seq] = split_items(entry)
    return [items[e.seq][e.idx] for e in places]
