"""Applying deliveries to the graph: ``prepare`` (pure) then ``commit`` (in a transaction).

``prepare`` validates every item and folds the valid events into ``Contributions`` —
no store, no lock. ``commit`` runs inside the projection transaction: insert-only rows
are inserted; merged rows (runs, edges, jobs, facets, column edges, run versions) go to
the store's ``merge``, which joins them into the stored rows by the same order-independent
rules (schema.MERGES); touched symlink groups are resolved again; item outcomes and
the new position are recorded. Applying an event that is already in the graph changes
nothing (every merge is idempotent), so ``commit`` needs no knowledge of what is new.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import orjson

from embrasure.model import ONE_ITEM_ROUTES, DatasetId, EventFacts, Quarantined
from embrasure.projector import admin, causes, graph_rows, outbox
from embrasure.projector.graph_rows import Contributions, time_key
from embrasure.projector.pipeline import project_raw
from embrasure.projector.shapes import EdgeKey
from embrasure.projector.symlinks import Link, resolve_group
from embrasure.projector.validate import Invalid
from embrasure.receiver import jsonguard
from embrasure.store.base import LogEntry, ProjectionTx
from embrasure.store.facet_values import value_row
from embrasure.store.rows import (
    CanonicalRow,
    ColumnEdgeRow,
    DatasetCheckRow,
    DatasetRow,
    DeliveryOutcome,
    EdgeRow,
    EventRow,
    FacetRow,
    FacetSetRow,
    FacetValueRow,
    FieldRow,
    HiddenRow,
    IoSetRow,
    ItemRow,
    JobRow,
    LinkRow,
    RunIoRow,
    RunRow,
    ShapeRow,
    TagRow,
    encode_kinds,
)


def split_items(entry: LogEntry) -> list[Any]:
    """The delivery's items, parsed (the receiver already checked the bytes)."""
    doc = orjson.loads(entry.stored_body())
    if entry.route in ONE_ITEM_ROUTES:
        return [doc]
    items = doc["events"] if isinstance(doc, dict) else doc
    return list(items)


def item_bytes(entry: LogEntry) -> list[bytes]:
    """The delivery's items as their bytes in the body (an array's or an envelope's
    items, split without being decoded: pipeline.project_raw reads them)."""
    body = entry.stored_body()
    if entry.route in ONE_ITEM_ROUTES:
        return [body]
    return jsonguard.split_items(body)


@dataclasses.dataclass(frozen=True)
class Prepared:
    """Deliveries validated and folded, ready to commit."""

    entries: Sequence[LogEntry]
    items: list[ItemRow]  # one outcome per item (the plain ones get no row: commit)
    changes: Contributions
    hidden: list[HiddenRow]  # admin entries' rows, the latest per entity
    tags: list[TagRow]  # tag entries' rows, the latest per entity and tag


def prepare(entries: Sequence[LogEntry]) -> Prepared:
    """Validate every item and fold the valid events (pure: no store, no lock)."""
    facts: list[tuple[EventFacts, int, int]] = []
    items: list[ItemRow] = []
    hidden: list[HiddenRow] = []
    tags: list[TagRow] = []
    seen: set[str] = set()
    for entry in entries:
        if entry.route == admin.ROUTE:
            items.append(_admin(entry, hidden, tags))
            continue
        rejected = {r.index: r for r in entry.rejections}
        if len(rejected) == entry.item_count:
            # Nothing to parse: a Kafka message that is not JSON at all is stored too
            # (receiver/kafka.py), and so is every whole-delivery rejection.
            for idx in sorted(rejected):
                r = rejected[idx]
                items.append(ItemRow.quarantined(entry.seq, idx, r.kind, r.reason))
            continue
        for idx, item in enumerate(item_bytes(entry)):
            if idx in rejected:
                r = rejected[idx]
                items.append(ItemRow.quarantined(entry.seq, idx, r.kind, r.reason))
                continue
            result = project_raw(item)
            if not isinstance(result, Quarantined) and result.event_id not in seen:
                seen.add(result.event_id)
                facts.append((result, entry.seq, idx))
            items.append(item_row(entry.seq, idx, result))
    return Prepared(
        entries, items, graph_rows.contributions(facts), admin.latest(hidden), admin.latest(tags)
    )


def _admin(entry: LogEntry, hidden: list[HiddenRow], tags: list[TagRow]) -> ItemRow:
    """An administrative entry's outcome row; its row goes to ``hidden`` or ``tags``."""
    try:
        parsed = admin.AdminEntry.parse(orjson.loads(entry.stored_body()))
    except (Invalid, orjson.JSONDecodeError) as exc:
        reason = exc.reason if isinstance(exc, Invalid) else f"not JSON: {exc}"
        return ItemRow.quarantined(entry.seq, 0, admin.ROUTE, reason)
    row = parsed.row(entry.seq)
    if isinstance(row, TagRow):
        tags.append(row)
    else:
        hidden.append(row)
    return ItemRow.projected(entry.seq, 0, admin.ROUTE)


def item_row(seq: int, idx: int, result: EventFacts | Quarantined) -> ItemRow:
    """An item's outcome row, from what projecting it came to."""
    if isinstance(result, Quarantined):
        return ItemRow.quarantined(seq, idx, result.kind, result.reason, result.retriable)
    warnings = orjson.dumps(list(result.warnings)).decode() if result.warnings else "[]"
    return ItemRow.projected(seq, idx, result.kind, warnings)


def commit(tx: ProjectionTx, prepared: Prepared, notify: timedelta | None = None) -> None:
    """Apply prepared deliveries inside ``tx`` and record the new position (the caller
    commits the transaction); with ``notify`` (the served graph's projection, not a
    rebuild's: the settle time), decide the notifications they cause in the same
    transaction."""
    edges_by_seq = _apply_changes(tx, prepared.changes, notify)
    tx.merge(HiddenRow, prepared.hidden)
    tx.merge(TagRow, prepared.tags)
    # A plain item (projected, no warnings: nearly every one) keeps no row of its own,
    # only its kind on its delivery's row, so the outcomes do not grow by a row per event
    # (docs/architecture.md#storage).
    tx.save(ItemRow, [item for item in prepared.items if not item.plain])
    projected: dict[int, int] = {}
    quarantined: dict[int, int] = {}
    plain: dict[int, list[str]] = {}
    for item in prepared.items:
        counts = projected if item.outcome == "projected" else quarantined
        counts[item.seq] = counts.get(item.seq, 0) + 1
        if item.plain:
            assert item.kind is not None  # ItemRow.plain says so
            plain.setdefault(item.seq, []).append(item.kind)
    tx.save(
        DeliveryOutcome,
        [
            DeliveryOutcome(
                e.seq,
                projected.get(e.seq, 0),
                quarantined.get(e.seq, 0),
                edges_by_seq.get(e.seq, 0),
                encode_kinds(plain.get(e.seq, ())),
            )
            for e in prepared.entries
        ],
    )
    tx.set_position(prepared.entries[-1].seq)


def apply(tx: ProjectionTx, entries: Sequence[LogEntry], notify: timedelta | None = None) -> None:
    """``prepare`` and ``commit`` in one go, inside ``tx``."""
    commit(tx, prepare(entries), notify)


def apply_events(tx: ProjectionTx, facts: Sequence[tuple[EventFacts, int, int]]) -> None:
    """Apply single events (a replayed item: the served graph's) without touching
    positions or outcomes."""
    _apply_changes(tx, graph_rows.contributions(facts), notify=causes.SETTLE)


def _apply_changes(
    tx: ProjectionTx, changes: Contributions, notify: timedelta | None
) -> dict[int, int]:
    """Apply a batch's contributions; return the edges created per delivery. The bulk
    rows go as plain tuples in their record's field order (store/base.py ProjectionTx
    says why); the table is named by its record all the same."""
    tx.insert_missing(EventRow, changes.events)  # where each event was first seen
    seen = outbox.watch(tx, changes, notify)  # before the merges: what they may change
    _insert_shapes(tx, changes)
    links = sorted(changes.links)
    link_rows = [
        LinkRow(k.a.namespace, k.a.name, k.b.namespace, k.b.name, k.kind, k.type, changes.links[k])
        for k in links
    ]
    inserted = tx.insert_new(LinkRow, link_rows)
    new_links = [link for link, is_new in zip(links, inserted, strict=True) if is_new]
    tx.merge(LinkRow, [row for row, is_new in zip(link_rows, inserted, strict=True) if not is_new])
    tx.merge(JobRow, [JobRow(*key, *flags) for key, flags in changes.jobs.items()])
    tx.merge(RunRow, [graph_rows.run_row(run_id, part) for run_id, part in changes.runs.items()])
    edges_created = _merge_edges(tx, changes)
    _merge_run_io(tx, changes)
    tx.sync_run_keys(sorted(changes.runs))
    _merge_facets(tx, changes)
    _merge_checks(tx, changes)
    _merge_columns(tx, changes)
    _resolve_identities(tx, new_links)
    if seen is not None:  # after the identities: a cause is matched by its node's
        outbox.decide(tx, seen)
    return edges_created


def _merge_checks(tx: ProjectionTx, changes: Contributions) -> None:
    tx.merge(DatasetCheckRow, [(*key, *check) for key, check in sorted(changes.checks.items())])


def _insert_shapes(tx: ProjectionTx, changes: Contributions) -> None:
    """The shapes the batch named that the graph has not seen, with their sets and the
    identities and fields they name: a shape is stored in the transaction that stores
    all of these, so a stored one (a job's earlier runs) has them already."""
    stored = tx.load(ShapeRow, [(k,) for k in sorted(changes.shapes)])
    shapes = [u.shape for k, u in changes.shapes.items() if (k,) not in stored]
    if not shapes:
        return
    # In no order: an insert of missing rows is the same in any, and PostgreSQL's sorts
    # its rows by key itself (sorting the fields' names here was 7% of projecting
    # bench/query.py's platform, whose every event names ~30).
    datasets = {d for s in shapes for d in s.datasets}
    fields = {f for s in shapes for f in s.fields}
    tx.insert_missing(DatasetRow, list(datasets))
    tx.insert_missing(FieldRow, list(fields))  # the store interns the field names
    tx.insert_missing(ShapeRow, [s.row for s in shapes])
    io_sets = {(s.row.io_key, *edge) for s in shapes if s.row.io_key for edge in s.edges}
    tx.insert_missing(IoSetRow, list(io_sets))
    facet_sets, values = set(), {}
    for shape in shapes:
        for owner, name, canonical, digest, _value, _deletion in shape.history:
            facet_sets.add((shape.row.facets_key, owner, name, digest))
            values[digest] = canonical
    _insert_values(tx, values)
    tx.insert_missing(FacetSetRow, list(facet_sets))


def _insert_values(tx: ProjectionTx, values: dict[bytes, bytes]) -> None:
    """The facet values (hash → canonical JSON) the graph does not hold yet. Only the
    missing ones are encoded: most of a batch's values (a job's facets, a pipeline's
    schemas) are stored already, and compressing them again would be wasted."""
    if not values:
        return
    stored = tx.stored_keys(FacetValueRow, [(h,) for h in values])
    missing = sorted(h for h in values if (h,) not in stored)
    tx.insert_missing(FacetValueRow, [value_row(h, values[h]) for h in missing])


def _merge_edges(tx: ProjectionTx, changes: Contributions) -> dict[int, int]:
    # run_count counts distinct runs: a (run, job, dataset, direction) seen for the first
    # time adds one to that job's edge with the dataset.
    runs_added: dict[EdgeKey, int] = {}
    io_keys = sorted(changes.run_io)
    run_keys = {run_id: time_key(part.state.latest) for run_id, part in changes.runs.items()}
    inserted = tx.insert_new(RunIoRow, [(*k, None, None, run_keys.get(k[0], "")) for k in io_keys])
    for io_key, is_new in zip(io_keys, inserted, strict=True):
        if is_new:
            _run_id, job_ns, job_name, ds_ns, ds_name, direction = io_key
            edge_key = (job_ns, job_name, ds_ns, ds_name, direction, 0)
            runs_added[edge_key] = runs_added.get(edge_key, 0) + 1
    # An edge is created by the first delivery naming it (the delivery view says so).
    stored = tx.load(EdgeRow, changes.edges)
    created: dict[int, int] = {}
    rows = []
    for key, span in changes.edges.items():
        if key not in stored:
            assert span.seq is not None
            created[span.seq] = created.get(span.seq, 0) + 1
        last_run = changes.edge_runs.get(key, ("", ""))
        rows.append((*key, *graph_rows.span_row(span), runs_added.get(key, 0), *last_run))
    tx.merge(EdgeRow, rows)
    return created


def _merge_run_io(tx: ProjectionTx, changes: Contributions) -> None:
    tx.merge(
        RunIoRow,
        [
            (*key, version, time_key(time), "")  # run_key: set by sync_run_keys
            for key, (version, time) in changes.run_io.items()
            if version is not None
        ],
    )


def _merge_facets(tx: ProjectionTx, changes: Contributions) -> None:
    # A row names its value by hash: the value is stored in the same transaction.
    _insert_values(tx, graph_rows.facet_values(changes.facet_slots.values()))
    tx.merge(
        FacetRow,
        [(*key, *graph_rows.facet_row(slot)) for key, slot in changes.facet_slots.items()],
    )


def _merge_columns(tx: ProjectionTx, changes: Contributions) -> None:
    tx.merge(
        ColumnEdgeRow,
        [
            (*key, *graph_rows.column_row(edge, span))
            for key, (edge, span) in changes.columns.items()
        ],
    )


def _resolve_identities(tx: ProjectionTx, new_links: Sequence[Link]) -> None:
    touched = {
        end for link in new_links if link.kind in ("TABLE", "RENAME") for end in (link.a, link.b)
    }
    known = _links_around(tx, touched)
    done: set[DatasetId] = set()
    members: list[tuple[str, str]] = []
    rows: list[CanonicalRow] = []
    for start in sorted(touched):
        if start in done:
            continue
        group = resolve_group(start, lambda x: known.get(x, []))
        done.update(group)
        members += [(m.namespace, m.name) for m in group]
        rows += [
            CanonicalRow(
                m.namespace, m.name, r.canonical.namespace, r.canonical.name, int(r.renamed)
            )
            for m, r in group.items()
            if len(group) > 1
        ]
    # Groups are disjoint: each member's old row goes, then every group's new rows come.
    tx.delete(CanonicalRow, members)
    tx.save(CanonicalRow, rows)


def _links_around(tx: ProjectionTx, starts: set[DatasetId]) -> dict[DatasetId, list[Link]]:
    """The links naming each identity of the groups of ``starts`` (every identity TABLE
    and RENAME links reach): what resolve_group asks of each, read a level of the walk
    at a time (one query a level, where one a member cost 10,843 queries for 11,656
    events of bench/query.py's platform)."""
    known: dict[DatasetId, list[Link]] = {}
    frontier = set(starts)
    while frontier:
        for x in frontier:
            known[x] = []
        for r in tx.links_touching(sorted((x.namespace, x.name) for x in frontier)):
            link = Link(DatasetId(r.a_ns, r.a_name), DatasetId(r.b_ns, r.b_name), r.kind, r.type)
            for end in {link.a, link.b} & frontier:
                known[end].append(link)
        frontier = {
            y
            for x in frontier
            for link in known[x]
            if link.joins
            for y in (link.a, link.b)
            if y not in known
        }
    return known
