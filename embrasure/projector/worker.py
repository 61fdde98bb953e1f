"""The projector loop: read the log after the position → pipeline → one transaction.

Each transaction projects a few deliveries whole and records the new position with them
(DESIGN §3), so a crash re-projects from the last committed position with the same
result. Merged rows (edges, jobs, facets, column edges) are read, merged with the batch's
contributions by the order-independent rules of ``graph_rows``/``facets``/``runs``/
``symlinks``, and written back; everything else is insert-only. This module is the only
one in the projector that touches the store.

A delivery the projector fails on is retried alone; after MAX_ATTEMPTS failures it is
quarantined whole as a projector error (retriable), so one poison delivery never blocks
the log.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Sequence
from typing import Any

import orjson

from ..errors import Problem, StoreUnavailable
from ..model import DatasetId, EventFacts, Quarantined
from ..store.base import LogEntry, ProjectionTx, Store
from . import column_lineage, graph_rows
from . import facets as facet_rules
from .graph_rows import Contributions, stored_time, time_key, time_text
from .pipeline import project_event
from .runs import RunEventFact, resolve_run
from .symlinks import Link, resolve_group

log = logging.getLogger("embrasure.projector")

MAX_ATTEMPTS = 3


@dataclasses.dataclass(frozen=True)
class ProjectorLimits:
    batch_deliveries: int = 64  # deliveries per transaction
    batch_bytes: int = 16 * 1024 * 1024  # bodies per transaction
    idle_seconds: float = 0.05  # how long to sleep when the log has nothing new


def split_items(entry: LogEntry) -> list[Any]:
    """The delivery's items, parsed (the receiver already checked the bytes)."""
    doc = orjson.loads(entry.body)
    if entry.route == "single":
        return [doc]
    items = doc["events"] if isinstance(doc, dict) else doc
    return list(items)


@dataclasses.dataclass
class _Outcomes:
    items: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)
    deliveries: list[tuple[int, int, int, int]] = dataclasses.field(default_factory=list)


def _project_entries(
    entries: Sequence[LogEntry],
) -> tuple[list[tuple[EventFacts, int, int]], _Outcomes]:
    """Validate every item (pure): the facts to apply and each item's outcome row."""
    facts: list[tuple[EventFacts, int, int]] = []
    outcomes = _Outcomes()
    for entry in entries:
        rejected = {r.index: r for r in entry.rejections}
        items = split_items(entry)
        for idx, item in enumerate(items):
            if idx in rejected:
                r = rejected[idx]
                outcomes.items.append(
                    (entry.seq, idx, r.kind, "quarantined", r.reason, 0, "[]", None)
                )
                continue
            result = project_event(item)
            if not isinstance(result, Quarantined):
                facts.append((result, entry.seq, idx))
            outcomes.items.append(item_row(entry.seq, idx, result))
    return facts, outcomes


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


def apply(tx: ProjectionTx, entries: Sequence[LogEntry]) -> None:
    """Project ``entries`` inside ``tx`` (the caller commits)."""
    facts, outcomes = _project_entries(entries)
    edges_by_seq = _apply_facts(tx, facts)

    tx.save("items", outcomes.items)
    projected: dict[int, list[int]] = {}
    for seq, _idx, _kind, outcome, *_ in outcomes.items:
        counts = projected.setdefault(seq, [0, 0])
        counts[0 if outcome == "projected" else 1] += 1
    tx.save(
        "deliveries",
        [(e.seq, *projected.get(e.seq, [0, 0]), edges_by_seq.get(e.seq, 0)) for e in entries],
    )
    tx.set_position(entries[-1].seq)


def _apply_facts(tx: ProjectionTx, facts: Sequence[tuple[EventFacts, int, int]]) -> dict[int, int]:
    """Apply valid events; an event already in the graph (same identity, DESIGN §1) adds
    nothing. Returns the edges created per delivery."""
    seen: set[str] = set()
    unique = []
    for f in facts:
        if f[0].event_id not in seen:
            seen.add(f[0].event_id)
            unique.append(f)
    new_flags = tx.insert_new("events", graph_rows.contributions(unique).events)
    new = [f for f, is_new in zip(unique, new_flags, strict=True) if is_new]
    return _apply_changes(tx, graph_rows.contributions(new))


def _apply_changes(tx: ProjectionTx, changes: Contributions) -> dict[int, int]:
    """Apply a batch's contributions; return the edges created per delivery."""
    tx.insert_new("datasets", sorted(changes.datasets))
    links = sorted(changes.links)
    link_rows = [(k.a.namespace, k.a.name, k.b.namespace, k.b.name, k.kind, k.type) for k in links]
    inserted = tx.insert_new("links", link_rows)
    new_links = [link for link, is_new in zip(links, inserted, strict=True) if is_new]
    _merge_jobs(tx, changes)
    tx.insert_new("run_events", changes.run_events)
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
            orjson.loads(value_json), value_event, stored_time(value_key, value_text)
        )
    if d_json is not None:
        deletion = facet_rules.FacetValue(orjson.loads(d_json), d_event, stored_time(d_key, d_text))
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
                graph_rows.dumps(item.value),
                item.event_id,
            ]
    return tuple(out)


def _merge_facets(tx: ProjectionTx, changes: Contributions) -> None:
    tx.insert_new("facet_history", changes.facet_history)
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


def replay_item(store: Store, delivery_id: str, index: int) -> dict[str, Any]:
    """DESIGN §5 replay: re-validate a quarantined item's stored bytes under the current
    rules and project it if it passes; the delivery's counts are recomputed."""
    with store.reader() as reader:
        row = reader.delivery(delivery_id)
        if row is None:
            raise Problem(
                404, "not-found", "No such delivery", f"No delivery {delivery_id!r} is stored."
            )
        seq, route, item_count, rejections = row[0], row[6], row[7], row[8]
        if not 0 <= index < item_count:
            raise Problem(
                404,
                "not-found",
                "No such item",
                f"Delivery {delivery_id} has items 0 to {item_count - 1}.",
            )
        if any(r[0] == index for r in orjson.loads(rejections)):
            raise Problem(
                409,
                "not-replayable",
                "Item cannot be replayed",
                "The item was rejected at the transport boundary (a receiver "
                "bound): its bytes are kept for audit but are never projected.",
            )
        current = {r[0]: r for r in reader.items(seq)}.get(index)
        if current is None or current[2] != "quarantined":
            state = "pending" if current is None else current[2]
            raise Problem(
                409,
                "not-quarantined",
                "Item is not quarantined",
                f"Item {index} of delivery {delivery_id} is {state}.",
            )
        body = reader.body(seq)
    assert body is not None
    entry = LogEntry(seq, delivery_id, route, body, item_count, ())
    result = project_event(split_items(entry)[index])
    with store.projection() as tx:
        if not isinstance(result, Quarantined):
            _apply_facts(tx, [(result, seq, index)])
        outcome = item_row(seq, index, result)
        tx.save("items", [outcome])
        items = tx.select_by("items", ("seq",), [(seq,)])
        stored = tx.load("deliveries", [(seq,)]).get((seq,), (0, 0, 0))
        projected = sum(1 for i in items if i[3] == "projected")
        tx.save("deliveries", [(seq, projected, len(items) - projected, stored[2])])
    return {"delivery_id": delivery_id, "index": index, "outcome": outcome[3], "reason": outcome[4]}


def reproject(store: Store, limits: ProjectorLimits | None = None) -> int:
    """DESIGN §6: build the graph again from the whole log beside the served one, then
    swap. Readers see the old graph until the swap's commit, the new one after; the live
    projector follows the swap (it reads the served generation in each transaction).
    Returns the new generation."""
    new = store.create_generation()
    builder = Projector(store, limits, generation=new)
    builder.run_until_caught_up()
    with store.projection(new) as tx:
        # Holding the write lock, nothing new reaches the log: finish, then swap.
        while entries := tx.read_log(
            tx.position(), builder.limits.batch_deliveries, builder.limits.batch_bytes
        ):
            apply(tx, entries)
        old = tx.serve_this_generation()
    store.drop_generation(old)
    return new


class Projector:
    """Runs ``apply`` over the log until stopped (in a thread of ``embrasure serve``, or
    alone as ``embrasure project``)."""

    def __init__(
        self, store: Store, limits: ProjectorLimits | None = None, generation: int | None = None
    ) -> None:
        self.store = store
        self.limits = limits or ProjectorLimits()
        self.generation = generation  # None: whichever generation is served
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def step(self) -> int:
        """Project what the log holds after the position, one transaction; return the
        number of deliveries projected (0 when caught up)."""
        limits = self.limits
        entries: list[LogEntry] = []
        try:
            with self.store.projection(self.generation) as tx:
                # The position and the log are read inside the transaction, so what
                # another projector (or a reproject's swap) committed meanwhile is seen.
                entries = tx.read_log(tx.position(), limits.batch_deliveries, limits.batch_bytes)
                if entries:
                    apply(tx, entries)
        except StoreUnavailable:
            raise
        except Exception:
            log.exception("projection of %d deliveries failed; retrying one by one", len(entries))
            for entry in entries:
                self._project_alone(entry)
        return len(entries)

    def _project_alone(self, entry: LogEntry) -> None:
        error = ""
        for _attempt in range(MAX_ATTEMPTS):
            try:
                with self.store.projection(self.generation) as tx:
                    if tx.position() >= entry.seq:
                        return  # another projector got there first
                    apply(tx, [entry])
                return
            except StoreUnavailable:
                raise
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                log.exception("projection of delivery %s failed", entry.delivery_id)
        with self.store.projection(self.generation) as tx:
            tx.save("failures", [(entry.seq, MAX_ATTEMPTS, error)])
            tx.save(
                "items",
                [
                    (
                        entry.seq,
                        idx,
                        None,
                        "quarantined",
                        f"projector error: {error}",
                        1,
                        "[]",
                        None,
                    )
                    for idx in range(entry.item_count)
                ],
            )
            tx.save("deliveries", [(entry.seq, 0, entry.item_count, 0)])
            tx.set_position(entry.seq)

    def run_until_caught_up(self) -> int:
        total = 0
        while (n := self.step()) > 0:
            total += n
        return total

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="embrasure-projector", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.step() == 0:
                    self._stop.wait(self.limits.idle_seconds)
            except StoreUnavailable as exc:
                log.warning("projector waiting for the store: %s", exc)
                self._stop.wait(1.0)
            except Exception:
                log.exception("projector loop error")
                self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
