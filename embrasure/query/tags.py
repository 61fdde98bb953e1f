"""Tags on datasets, their fields and jobs, and tag definitions (the Marquez API's tags,
docs/marquez.md#sources-and-tags), as one request's reads see them: the ``tags`` table
the projector writes from administrative entries (projector/admin.py).

A dataset's tags are those put on any of its identities (symlinked identities are one
node, tagged through whichever name the user had), a field's likewise. The routes store
a tag under the node's canonical identity (marquez/writes.py), so this union matters only
when a symlink joins two nodes that were tagged apart: the node keeps both sets.
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
    """Every tag defined or ever put on something, with its description (None: none
    given), by name. Marquez creates a tag when it is first put on something and keeps it
    when it is taken off (its TagDao upserts and never deletes), and marquez-web offers
    the tags it lists to pick from: a tag taken off its last dataset stays pickable."""
    out: dict[str, str | None] = {}
    for row in reader.rows(TagRow):
        if row.kind == "tag":
            out[row.tag] = row.description
        else:
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


def holders(
    reader: GraphReader, ids: Resolver, node: DatasetId, tag: str, field: str = ""
) -> list[DatasetId]:
    """The identities of a dataset node that carry ``tag`` (on ``field`` when given):
    an untag writes an entry for each, so that the node loses the tag whichever
    identity it was put on."""
    kind = "field" if field else "dataset"
    members = ids.members([node])[node]
    rows = reader.rows(TagRow, ("kind", "ns", "name"), [(kind, *m) for m in members])
    return sorted(
        DatasetId(r.ns, r.name) for r in rows if r.present and r.tag == tag and r.field == field
    )
