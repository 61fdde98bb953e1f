"""Facets as served: the current value per name of a group of owners
(docs/projection.md#facets), from the stored ``facets`` rows and, for what a run sent
about a dataset, from the run's events and their shapes' facet sets.

A dataset's aliases, a run's view of a dataset under each alias it used, a page of runs:
each is a group of owners whose slots the facet rule (projector/facets.py) joins, so one
call reads a whole page in a fixed number of queries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, TypeVar

import orjson

from embrasure.access.grants import READING, may_read
from embrasure.model import DatasetId, EventTime
from embrasure.projector import facets as facet_rules
from embrasure.projector.shapes import sent_entity
from embrasure.store.base import GraphReader
from embrasure.store.rows import FacetRow

K = TypeVar("K")


class Sent(NamedTuple):
    """The owner of the dataset facets a run sent about a dataset it used in ``role``
    (``input``/``output``). They are not stored per run: each event's shape holds them in
    its facet set (projector/shapes.py ``sent_entity``), and the run's events say which
    shapes it sent and when (docs/projection.md#what-each-run-did)."""

    run_id: str
    role: str
    dataset: DatasetId

    @property
    def entity(self) -> str:
        return sent_entity(self.role, self.dataset.namespace, self.dataset.name)


Owner = str | Sent  # a facets row's entity, or what a run sent


def current_facets(
    reader: GraphReader, owners: list[str], honour_deleted: bool = True
) -> dict[str, Any]:
    """The current facets of a node whose facets were recorded under several owners
    (a dataset's aliases): the same merge rule as one owner (projector/facets.py)."""
    return facets_of_groups(reader, {"": owners}, honour_deleted)[""]


def facets_of_groups(
    reader: GraphReader,
    groups: Mapping[K, Iterable[Owner]],
    honour_deleted: bool = True,
    names: Iterable[str] = (),
) -> dict[K, dict[str, Any]]:
    """``current_facets`` of many groups of owners in a few queries (a page of runs and
    the datasets each used); only the facets ``names`` when given. What a run sent
    honours ``_deleted`` whatever ``honour_deleted`` says: they are dataset facets."""
    group_of: dict[Owner, list[K]] = {}
    for key, owners in groups.items():
        for owner in owners:
            group_of.setdefault(owner, []).append(key)
    wanted = list(names)
    stored = [o for o in group_of if isinstance(o, str)]
    rows = (
        reader.rows(FacetRow, ("entity", "name"), [(o, n) for o in stored for n in wanted])
        if wanted
        else reader.rows(FacetRow, ("entity",), [(o,) for o in stored])
    )
    found: list[tuple[Owner, str, facet_rules.FacetSlot]] = [
        (row.entity, row.name, stored_slot(row, honour_deleted)) for row in rows
    ]
    # Parsed once per value: a page of runs names one schema a hundred times. The groups
    # then share the parsed value, which nobody changes.
    parsed: dict[bytes, Any] = {}
    found += _sent_slots(reader, [o for o in group_of if isinstance(o, Sent)], wanted, parsed)
    slots: dict[K, dict[str, facet_rules.FacetSlot]] = {key: {} for key in groups}
    for owner, name, slot in found:
        for key in group_of.get(owner, ()):
            held = slots[key]
            held[name] = slot if name not in held else facet_rules.merge_slots(held[name], slot)
    current = {key: facet_rules.current_of(held) for key, held in slots.items()}
    hashes = {v.value_hash() for held in current.values() for v in held.values()} - set(parsed)
    parsed |= {h: orjson.loads(text) for h, text in reader.facet_values(sorted(hashes)).items()}
    out = {
        key: {name: parsed[v.value_hash()] for name, v in held.items()}
        for key, held in current.items()
    }
    if READING.get() is not None:
        out = {key: redacted(facets) for key, facets in out.items()}
    return out


def redacted(facets: dict[str, Any]) -> dict[str, Any]:
    """Facets without the names, in the facets OpenLineage gives a structure, of
    datasets and jobs outside the reader's grants (docs/security.md#what-a-reader-sees):
    the ``symlinks`` identifiers, the ``columnLineage`` input fields, the ``parent``
    facet's job and root job. Free text (a ``sql`` facet's query) is served as sent.
    New dicts: the parsed values are shared between groups."""
    out = dict(facets)
    symlinks = out.get("symlinks")
    if isinstance(symlinks, dict) and isinstance(symlinks.get("identifiers"), list):
        out["symlinks"] = {**symlinks, "identifiers": _readable(symlinks["identifiers"])}
    lineage = out.get("columnLineage")
    if isinstance(lineage, dict):
        lineage = dict(lineage)
        if isinstance(lineage.get("dataset"), list):
            lineage["dataset"] = _readable(lineage["dataset"])
        if isinstance(lineage.get("fields"), dict):
            lineage["fields"] = {
                name: {**f, "inputFields": _readable(f["inputFields"])}
                if isinstance(f, dict) and isinstance(f.get("inputFields"), list)
                else f
                for name, f in lineage["fields"].items()
            }
        out["columnLineage"] = lineage
    parent = out.get("parent")
    if isinstance(parent, dict):
        parent = {k: v for k, v in parent.items() if k != "job" or _readable([v])}
        root = parent.get("root")
        if isinstance(root, dict) and not _readable([root.get("job")]):
            parent["root"] = {k: v for k, v in root.items() if k != "job"}
        out["parent"] = parent
    return out


def _readable(items: list[Any]) -> list[Any]:
    """The entries naming a namespace the reader may read (anything else is left out)."""
    return [
        i
        for i in items
        if isinstance(i, dict) and isinstance(i.get("namespace"), str) and may_read(i["namespace"])
    ]


def _sent_slots(
    reader: GraphReader, owners: list[Sent], names: list[str], parsed: dict[bytes, Any]
) -> list[tuple[Owner, str, facet_rules.FacetSlot]]:
    """The slots of what the runs sent: per value a run's events sent, the latest
    eventTime among them (GraphReader.sent_facets), as a value or, when it is a
    ``_deleted`` marker, a deletion. The candidates' values are parsed into ``parsed``
    to tell markers apart (a run sends few distinct values)."""
    if not owners:
        return []
    owner_of = {(o.run_id, o.entity): o for o in owners}
    rows = reader.sent_facets(sorted(owner_of))
    if names:
        rows = [r for r in rows if r.name in names]
    hashes = sorted({bytes(r.value_hash) for r in rows})
    parsed |= {h: orjson.loads(text) for h, text in reader.facet_values(hashes).items()}
    out: list[tuple[Owner, str, facet_rules.FacetSlot]] = []
    for r in rows:
        digest = bytes(r.value_hash)
        value = _ranked(r.time_key, digest)
        if facet_rules.is_deletion(parsed[digest]):
            slot = facet_rules.FacetSlot(None, value)
        else:
            slot = facet_rules.FacetSlot(value, None)
        out.append((owner_of[(r.run_id, r.entity)], r.name, slot))
    return out


def stored_slot(row: FacetRow, honour_deleted: bool) -> facet_rules.FacetSlot:
    """A stored facets row as the facet rule's slot, its value by hash alone: the rule
    ranks by (eventTime, hash), and only the winners' JSON is read, afterwards. The row
    keeps no event id (schema.MERGES["facets"]), so none is given."""
    value = None
    if row.value_hash is not None and row.value_key is not None:
        value = _ranked(row.value_key, bytes(row.value_hash))
    deletion = None
    if honour_deleted and row.deleted_key is not None:
        deletion = _ranked(row.deleted_key, b"\0")
    return facet_rules.FacetSlot(value, deletion)


def _ranked(key: str, digest: bytes) -> facet_rules.FacetValue:
    """A value as the facet rule ranks it, from a stored eventTime key ('' unknown) and
    its hash: the rule reads the time's key only, and no event id is stored."""
    return facet_rules.FacetValue(None, "", EventTime(key, key) if key else None, digest=digest)
