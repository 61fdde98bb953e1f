"""Tags on datasets, their fields and jobs, and tag definitions (the Marquez API's tags,
docs/marquez.md#sources-and-tags), as one request's reads see them: the ``tags`` table
the projector writes from administrative entries (projector/admin.py).

A dataset's tags are those put on any of its identities (symlinked identities are one
node, tagged through whichever name the user had), a field's likewise.
"""

from __future__ import annotations

from collections.abc import Sequence

from embrasure.model import DatasetId
from embrasure.query.graph import Resolver
from embrasure.store.base import GraphReader
from embrasure.store.rows import TagRow


def entity_tags(
    reader: GraphReader, ids: Resolver, kind: str, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], list[str]]:
    """The tags of each dataset node or job (``kind``), sorted, per (namespace, name)."""
    owners = _owners(ids, kind, keys)
    rows = reader.rows(TagRow, ("kind", "ns", "name"), [(kind, *o) for o in owners])
    out: dict[tuple[str, str], set[str]] = {k: set() for k in keys}
    for row in rows:
        if row.present:
            out[owners[(row.ns, row.name)]].add(row.tag)
    return {k: sorted(v) for k, v in out.items()}


def field_tags(
    reader: GraphReader, ids: Resolver, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], dict[str, list[str]]]:
    """Per dataset node, each tagged field's tags, sorted."""
    owners = _owners(ids, "dataset", keys)
    rows = reader.rows(TagRow, ("kind", "ns", "name"), [("field", *o) for o in owners])
    out: dict[tuple[str, str], dict[str, set[str]]] = {k: {} for k in keys}
    for row in rows:
        if row.present:
            out[owners[(row.ns, row.name)]].setdefault(row.field, set()).add(row.tag)
    return {k: {f: sorted(t) for f, t in v.items()} for k, v in out.items()}


def definitions(reader: GraphReader) -> dict[str, str | None]:
    """Every tag defined or in use, with its description (None: none given)."""
    out: dict[str, str | None] = {}
    for row in reader.rows(TagRow):
        if row.kind == "tag":
            if row.present:
                out[row.tag] = row.description
        elif row.present:
            out.setdefault(row.tag, None)
    return dict(sorted(out.items()))


def _owners(
    ids: Resolver, kind: str, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], tuple[str, str]]:
    """Each identity tags are stored under → the key asked for (a dataset's aliases)."""
    if kind == "job":
        return {k: k for k in keys}
    nodes = [DatasetId(*k) for k in keys]
    members = ids.members(nodes)
    return {(m.namespace, m.name): (n.namespace, n.name) for n in nodes for m in members[n]}
