"""Applying deliveries to the graph: ``prepare`` (pure) then ``commit`` (in a transaction).

``prepare`` validates every item and folds the valid events into ``Contributions`` —
no store, no lock. ``commit`` runs inside the projection transaction: insert-only rows
are inserted; merged rows (runs, edges, jobs, facets, column edges, run versions) go to
the store's ``merge``, which joins them into the stored rows by the same order-independent
rules (graph_schema.MERGES); touched symlink groups are resolved again; item outcomes and
the new position are recorded. Applying an event that is already in the graph changes
nothing (every merge is idempotent), so ``commit`` needs no knowledge of what is new.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import orjson

from embrasure.model import DatasetId, EventFacts, Quarantined
from embrasure.projector import admin, graph_rows
from embrasure.projector.graph_rows import Contributions, time_key
from embrasure.projector.pipeline import project_event
from embrasure.projector.symlinks import Link, resolve_group
from embrasure.projector.validate import Invalid
from embrasure.store.base import LogEntry, ProjectionTx


def split_items(entry: LogEntry) -> list[Any]:
    """The delivery's items, parsed (the receiver already checked the bytes)."""
    doc = orjson.loads(entry.body)
    if entry.route in ("single", admin.ROUTE):
        return [doc]
    items = doc["events"] if isinstance(doc, dict) else doc
    return list(items)


@dataclasses.dataclass(frozen=True)
class Prepared:
    """Deliveries validated and folded, ready to commit."""

    entries: Sequence[LogEntry]
    items: list[tuple[Any, ...]]  # one outcome row per item (graph_schema "items")
    changes: Contributions
    hidden: list[tuple[Any, ...]]  # admin entries' rows, the latest per entity


def prepare(entries: Sequence[LogEntry]) -> Prepared:
    """Validate every item and fold the valid events (pure: no store, no lock)."""
    facts: list[tuple[EventFacts, int, int]] = []
    items: list[tuple[Any, ...]] = []
    hidden: list[tuple[Any, ...]] = []
    seen: set[str] = set()
    for entry in entries:
        if entry.route == admin.ROUTE:
            items.append(_admin(entry, hidden))
            continue
        rejected = {r.index: r for r in entry.rejections}
        for idx, item in enumerate(split_items(entry)):
            if idx in rejected:
                r = rejected[idx]
                items.append((entry.seq, idx, r.kind, "quarantined", r.reason, 0, "[]", None))
                continue
            result = project_event(item)
            if not isinstance(result, Quarantined) and result.event_id not in seen:
                seen.add(result.event_id)
                facts.append((result, entry.seq, idx))
            items.append(item_row(entry.seq, idx, result))
    return Prepared(entries, items, graph_rows.contributions(facts), admin.latest(hidden))


def _admin(entry: LogEntry, hidden: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """An administrative entry's outcome row; its hidden row goes to ``hidden``."""
    try:
        parsed = admin.AdminEntry.parse(orjson.loads(entry.body))
    except (Invalid, orjson.JSONDecodeError) as exc:
        reason = exc.reason if isinstance(exc, Invalid) else f"not JSON: {exc}"
        return (entry.seq, 0, admin.ROUTE, "quarantined", reason, 0, "[]", None)
    hidden.append(parsed.row(entry.seq))
    return (entry.seq, 0, admin.ROUTE, "projected", None, 0, "[]", None)


def item_row(seq: int, idx: int, result: EventFacts | Quarantined) -> tuple[Any, ...]:
    """An item's outcome row (graph_schema.COLUMNS["items"])."""
    if isinstance(result, Quarantined):
        return (
            seq,
            idx,
            result.kind,
            "quarantined",
            result.reason,
            int(result.retriable),
            "[]",
            None,
        )
    return (
        seq,
        idx,
        result.kind,
        "projected",
        None,
        0,
        orjson.dumps(list(result.warnings)).decode(),
        result.event_id,
    )


def commit(tx: ProjectionTx, prepared: Prepared) -> None:
    """Apply prepared deliveries inside ``tx`` and record the new position (the caller
    commits the transaction)."""
    edges_by_seq = _apply_changes(tx, prepared.changes)
    tx.merge("hidden", prepared.hidden)
    tx.save("items", prepared.items)
    counts: dict[int, list[int]] = {}
    for seq, _idx, _kind, outcome, *_ in prepared.items:
        counts.setdefault(seq, [0, 0])[0 if outcome == "projected" else 1] += 1
    tx.save(
        "deliveries",
        [(e.seq, *counts.get(e.seq, [0, 0]), edges_by_seq.get(e.seq, 0)) for e in prepared.entries],
    )
    tx.set_position(prepared.entries[-1].seq)


def apply(tx: ProjectionTx, entries: Sequence[LogEntry]) -> None:
    """``prepare`` and ``commit`` in one go, inside ``tx``."""
    commit(tx, prepare(entries))


def apply_events(tx: ProjectionTx, facts: Sequence[tuple[EventFacts, int, int]]) -> None:
    """Apply single events (a replayed item) without touching positions or outcomes."""
    _apply_changes(tx, graph_rows.contributions(facts))


def _apply_changes(tx: ProjectionTx, changes: Contributions) -> dict[int, int]:
    """Apply a batch's contributions; return the edges created per delivery."""
    tx.insert_missing("events", changes.events)  # where each event was first seen
    tx.insert_missing("datasets", sorted(changes.datasets))
    tx.insert_missing("fields", sorted(changes.fields))
    tx.insert_missing("field_names", sorted({(f[2],) for f in changes.fields}))
    tx.insert_missing(
        "io_sets", [(key, *edge) for key, edges in changes.io_sets.items() for edge in edges]
    )
    links = sorted(changes.links)
    link_rows = [
        (k.a.namespace, k.a.name, k.b.namespace, k.b.name, k.kind, k.type, changes.links[k])
        for k in links
    ]
    inserted = tx.insert_new("links", link_rows)
    new_links = [link for link, is_new in zip(links, inserted, strict=True) if is_new]
    tx.merge("links", [row for row, is_new in zip(link_rows, inserted, strict=True) if not is_new])
    tx.merge("jobs", [(*key, *flags) for key, flags in changes.jobs.items()])
    tx.merge("runs", [graph_rows.run_row(run_id, part) for run_id, part in changes.runs.items()])
    edges_created = _merge_edges(tx, changes)
    _merge_run_io(tx, changes)
    _merge_facets(tx, changes)
    _merge_columns(tx, changes)
    _resolve_identities(tx, new_links)
    return edges_created


def _merge_edges(tx: ProjectionTx, changes: Contributions) -> dict[int, int]:
    # run_count counts distinct runs: a (run, job, dataset, direction) seen for the first
    # time adds one to that job's edge with the dataset.
    runs_added: dict[graph_rows.EdgeKey, int] = {}
    io_keys = sorted(changes.run_io)
    inserted = tx.insert_new("run_io", [(*k, None, None) for k in io_keys])
    for io_key, is_new in zip(io_keys, inserted, strict=True):
        if is_new:
            _run_id, job_ns, job_name, ds_ns, ds_name, direction = io_key
            edge_key = (job_ns, job_name, ds_ns, ds_name, direction, 0)
            runs_added[edge_key] = runs_added.get(edge_key, 0) + 1
    # An edge is created by the first delivery naming it (the delivery view says so).
    stored = tx.load("edges", changes.edges)
    created: dict[int, int] = {}
    rows = []
    for key, span in changes.edges.items():
        if key not in stored:
            assert span.seq is not None
            created[span.seq] = created.get(span.seq, 0) + 1
        last_run = changes.edge_runs.get(key, ("", ""))
        rows.append((*key, *graph_rows.span_row(span), runs_added.get(key, 0), *last_run))
    tx.merge("edges", rows)
    return created


def _merge_run_io(tx: ProjectionTx, changes: Contributions) -> None:
    tx.merge(
        "run_io",
        [
            (*key, version, time_key(time))
            for key, (version, time) in changes.run_io.items()
            if version is not None
        ],
    )


def _merge_facets(tx: ProjectionTx, changes: Contributions) -> None:
    tx.insert_missing(
        "facet_values", [(h, v.decode()) for h, v in sorted(changes.facet_values.items())]
    )
    tx.insert_missing("facet_history", changes.facet_history)
    tx.merge(
        "facets", [(*key, *graph_rows.facet_row(slot)) for key, slot in changes.facet_slots.items()]
    )


def _merge_columns(tx: ProjectionTx, changes: Contributions) -> None:
    tx.merge(
        "column_edges",
        [
            (*key, *graph_rows.column_row(edge, span))
            for key, (edge, span) in changes.columns.items()
        ],
    )


def _resolve_identities(tx: ProjectionTx, new_links: Sequence[Link]) -> None:
    touched = {
        end for link in new_links if link.kind in ("TABLE", "RENAME") for end in (link.a, link.b)
    }
    done: set[DatasetId] = set()

    def neighbours(x: DatasetId) -> list[Link]:
        return [
            Link(DatasetId(a, b), DatasetId(c, d), k, t)
            for a, b, c, d, k, t in tx.links_touching([(x.namespace, x.name)])
        ]

    for start in sorted(touched):
        if start in done:
            continue
        group = resolve_group(start, neighbours)
        done.update(group)
        rows = [
            (m.namespace, m.name, r.canonical.namespace, r.canonical.name, int(r.renamed))
            for m, r in group.items()
            if len(group) > 1
        ]
        tx.delete("canonical", [(m.namespace, m.name) for m in group])
        tx.save("canonical", rows)
