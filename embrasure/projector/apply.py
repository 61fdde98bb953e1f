"""Applying deliveries to the graph: ``prepare`` (pure) then ``commit`` (in a transaction).

``prepare`` validates every item and folds the valid events into ``Contributions`` —
no store, no lock. ``commit`` runs inside the projection transaction: insert-only rows
are inserted; merged rows (edges, jobs, facets, column edges) are read, merged with the
contributions by the order-independent rules of graph_rows/facets/column_lineage, and
written back; touched runs and symlink groups are resolved again; item outcomes and the
new position are recorded. Applying an event that is already in the graph changes
nothing (every merge is idempotent), so ``commit`` needs no knowledge of what is new.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import orjson

from ..model import DatasetId, EventFacts, Quarantined
from ..store.base import LogEntry, ProjectionTx
from . import column_lineage, graph_rows
from . import facets as facet_rules
from .graph_rows import Contributions, stored_time, time_key, time_text
from .pipeline import project_event
from .runs import RunEventFact, resolve_run
from .symlinks import Link, resolve_group


def split_items(entry: LogEntry) -> list[Any]:
    """The delivery's items, parsed (the receiver already checked the bytes)."""
    doc = orjson.loads(entry.body)
    if entry.route == "single":
        return [doc]
    items = doc["events"] if isinstance(doc, dict) else doc
    return list(items)


@dataclasses.dataclass(frozen=True)
class Prepared:
    """Deliveries validated and folded, ready to commit."""

    entries: Sequence[LogEntry]
    items: list[tuple[Any, ...]]  # one outcome row per item (graph_schema "items")
    changes: Contributions


def prepare(entries: Sequence[LogEntry]) -> Prepared:
    """Validate every item and fold the valid events (pure: no store, no lock)."""
    facts: list[tuple[EventFacts, int, int]] = []
    items: list[tuple[Any, ...]] = []
    seen: set[str] = set()
    for entry in entries:
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
    return Prepared(entries, items, graph_rows.contributions(facts))


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
    links = sorted(changes.links)
    link_rows = [(k.a.namespace, k.a.name, k.b.namespace, k.b.name, k.kind, k.type) for k in links]
    inserted = tx.insert_new("links", link_rows)
    new_links = [link for link, is_new in zip(links, inserted, strict=True) if is_new]
    _merge_jobs(tx, changes)
    tx.insert_missing("run_events", changes.run_events)
    edges_created = _merge_edges(tx, changes)
    _merge_run_io(tx, changes)
    _merge_facets(tx, changes)
    _merge_columns(tx, changes)
    _resolve_runs(tx, {row[0] for row in changes.run_events})
    _resolve_identities(tx, new_links)
    return edges_created


def _merge_jobs(tx: ProjectionTx, changes: Contributions) -> None:
    stored = tx.load("jobs", changes.jobs)
    rows = []
    for key, flags in changes.jobs.items():
        old = stored.get(key, (0, 0, 0))
        rows.append((*key, *(max(a, b) for a, b in zip(old, flags, strict=True))))
    tx.save("jobs", rows)


def _merge_edges(tx: ProjectionTx, changes: Contributions) -> dict[int, int]:
    # run_count counts distinct runs: a (run, dataset, direction) seen for the first time
    # adds one to the edge between the run's job and the dataset.
    runs_added: dict[graph_rows.EdgeKey, int] = {}
    io_keys = sorted(changes.run_io)
    inserted = tx.insert_new("run_io", [(*k, None, None) for k in io_keys])
    run_jobs = {row[0]: (row[5], row[6]) for row in changes.run_events}
    for io_key, is_new in zip(io_keys, inserted, strict=True):
        if is_new:
            run_id, ds_ns, ds_name, direction = io_key
            job_ns, job_name = run_jobs[run_id]
            edge_key = (job_ns, job_name, ds_ns, ds_name, direction, 0)
            runs_added[edge_key] = runs_added.get(edge_key, 0) + 1
    stored = tx.load("edges", changes.edges)
    rows = []
    created: dict[int, int] = {}  # an edge is created by the first delivery naming it
    for key, span in changes.edges.items():
        old = stored.get(key)
        count = runs_added.get(key, 0)
        if old is None:
            assert span.seq is not None
            created[span.seq] = created.get(span.seq, 0) + 1
        else:
            span.add(stored_time(old[0], old[1]))
            span.add(stored_time(old[2], old[3]))
            count += old[4]
        rows.append(
            (
                *key,
                span.first.key if span.first else None,
                time_text(span.first),
                span.last.key if span.last else None,
                time_text(span.last),
                count,
            )
        )
    tx.save("edges", rows)
    return created


def _merge_run_io(tx: ProjectionTx, changes: Contributions) -> None:
    versioned = {k: v for k, v in changes.run_io.items() if v[0] is not None}
    stored = tx.load("run_io", versioned)
    rows = []
    for key, (version, time) in versioned.items():
        old = stored.get(key)
        if (
            old is not None
            and old[0] is not None
            and (old[1] or "", old[0]) >= (time_key(time), version)
        ):
            continue
        rows.append((*key, version, time_key(time)))
    tx.save("run_io", rows)


def _slot_from_row(row: tuple[Any, ...]) -> facet_rules.FacetSlot:
    value_key, value_text, value_json, value_event, d_key, d_text, d_json, d_event = row
    value = deletion = None
    if value_json is not None:
        value = facet_rules.FacetValue(
            orjson.loads(value_json),
            value_event,
            stored_time(value_key, value_text),
            value_json.encode(),  # stored canonical: no need to serialise it again
        )
    if d_json is not None:
        deletion = facet_rules.FacetValue(
            orjson.loads(d_json), d_event, stored_time(d_key, d_text), d_json.encode()
        )
    return facet_rules.FacetSlot(value, deletion)


def _row_from_slot(slot: facet_rules.FacetSlot) -> tuple[Any, ...]:
    out: list[Any] = []
    for item in (slot.value, slot.deletion):
        if item is None:
            out += [None, None, None, None]
        else:
            out += [
                time_key(item.time),
                time_text(item.time),
                item.canonical_json().decode(),
                item.event_id,
            ]
    return tuple(out)


def _merge_facets(tx: ProjectionTx, changes: Contributions) -> None:
    tx.insert_missing("facet_history", changes.facet_history)
    stored = tx.load("facets", changes.facet_slots)
    rows = []
    for key, slot in changes.facet_slots.items():
        old = stored.get(key)
        merged = slot if old is None else facet_rules.merge_slots(_slot_from_row(old), slot)
        rows.append((*key, *_row_from_slot(merged)))
    tx.save("facets", rows)


def _merge_columns(tx: ProjectionTx, changes: Contributions) -> None:
    stored = tx.load("column_edges", changes.columns)
    rows = []
    for key, (edge, span) in changes.columns.items():
        old = stored.get(key)
        if old is not None:
            old_edge, old_span = graph_rows.column_edge_of(key, old, edge.source, edge.target)
            edge = column_lineage.merge_edges(old_edge, edge)
            span.add(old_span.first)
            span.add(old_span.last)
        rows.append((*key, *graph_rows.column_row(edge, span)))
    tx.save("column_edges", rows)


def _resolve_runs(tx: ProjectionTx, run_ids: set[str]) -> None:
    if not run_ids:
        return
    rows = tx.select_by("run_events", ("run_id",), [(r,) for r in sorted(run_ids)])
    by_run: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        by_run.setdefault(row[0], []).append(row)
    saved = []
    for run_id, events in by_run.items():
        state = resolve_run(RunEventFact(e[1], e[2], stored_time(e[3], e[4])) for e in events)
        # The run's job and parent come from its latest event that names them (by
        # eventTime, then event id), the same order as every other "latest" rule.
        latest = max(events, key=lambda e: (e[3], e[1]))
        with_parent = [e for e in events if e[7] is not None or e[8] is not None]
        parent = max(with_parent, key=lambda e: (e[3], e[1])) if with_parent else None
        saved.append(
            (
                run_id,
                latest[5],
                latest[6],
                state.state,
                time_key(state.started_at) or None,
                time_text(state.started_at),
                time_key(state.ended_at) or None,
                time_text(state.ended_at),
                time_key(state.latest),
                *(parent[7:13] if parent else (None,) * 6),
            )
        )
    tx.save("runs", saved)


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
