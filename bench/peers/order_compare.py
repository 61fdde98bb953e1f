"""Correctness beside Marquez: the same events in two orders, and what each server serves.

The events are the shared OpenLineage corpus's, made sendable by tests/corpus.py (its
templates filled, its partial matchers completed), grouped into runs by runId (an event
without one is a run of its own). Two deliveries of the same set:

- ``forward``: runs in corpus order, each run's events in lifecycle order (START, then
  RUNNING, then the rest, then COMPLETE / FAIL / ABORT), each event once, one per POST;
- ``backward``: runs in reverse order, each run's events in reverse lifecycle order
  (COMPLETE before START), sent twice: first in batches of ``BATCH`` events to Embrasure
  (Marquez has no batch route: one per POST), then again one event per POST to both.

Each order goes to a fresh database of each server, and the two snapshots of one server
(nodes, dataset ↔ job edges, run states: bench/peers/peer_api.py) are compared. A
difference is listed with the corpus events that name its node, its edge's ends or its
run, so the cause can be read off.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from peers.peer_api import Edge, Node, Snapshot

TESTS_DIR = Path(__file__).resolve().parents[2] / "tests"
BATCH = 7  # a split that matches no producer's, so batch boundaries fall mid-run
LIFECYCLE = {"START": 0, "RUNNING": 1, "COMPLETE": 3, "FAIL": 3, "ABORT": 3}
EXAMPLES = 12  # differences listed per kind in the report


@dataclasses.dataclass(frozen=True)
class CorpusEvent:
    where: str  # corpus file and index in it
    event: dict[str, Any]

    @property
    def run_id(self) -> str | None:
        run = self.event.get("run")
        value = run.get("runId") if isinstance(run, dict) else None
        return value if isinstance(value, str) else None

    @property
    def event_type(self) -> str:
        value = self.event.get("eventType")
        return value if isinstance(value, str) else "-"

    def label(self) -> str:
        return f"{self.where} {self.event_type}"


def corpus_events() -> list[CorpusEvent]:
    """Every event object of the corpus's event files (tests/corpus.py reads them)."""
    import pytest  # tests/corpus.py skips what it cannot read with pytest.skip

    if str(TESTS_DIR) not in sys.path:
        sys.path.insert(0, str(TESTS_DIR))
    import corpus

    found = []
    for entry in corpus.EVENT_FILES:
        try:
            events = corpus.load(entry)
        except pytest.skip.Exception:
            continue
        for index, event in enumerate(events):
            if isinstance(event, dict):
                found.append(CorpusEvent(f"{entry['file']}#{index}", event))
    return found


def runs_of(events: Iterable[CorpusEvent]) -> list[list[CorpusEvent]]:
    """Events grouped by runId, in order of first appearance; no runId: a run alone."""
    runs: dict[str, list[CorpusEvent]] = {}
    for e in events:
        runs.setdefault(e.run_id or f"alone:{e.where}", []).append(e)
    return list(runs.values())


def _rank(e: CorpusEvent) -> int:
    return LIFECYCLE.get(e.event_type, 2)


def forward(runs: Sequence[list[CorpusEvent]]) -> list[CorpusEvent]:
    return [e for run in runs for e in sorted(run, key=_rank)]


def backward(runs: Sequence[list[CorpusEvent]]) -> list[CorpusEvent]:
    return [e for run in reversed(runs) for e in sorted(run, key=_rank, reverse=True)]


def batches(events: Sequence[CorpusEvent], size: int = BATCH) -> list[list[CorpusEvent]]:
    return [list(events[i : i + size]) for i in range(0, len(events), size)]


# -- comparing ----------------------------------------------------------------------------


@dataclasses.dataclass
class Differences:
    nodes_only_first: list[Node]
    nodes_only_second: list[Node]
    edges_only_first: list[Edge]
    edges_only_second: list[Edge]
    runs_only_first: list[str]
    runs_only_second: list[str]
    run_states: list[tuple[str, str | None, str | None]]  # runId, first, second

    def count(self) -> int:
        return sum(len(v) for v in dataclasses.asdict(self).values())


def diff(first: Snapshot, second: Snapshot) -> Differences:
    """What one server served after one order and not after the other (sorted)."""
    common = first.runs.keys() & second.runs.keys()
    return Differences(
        sorted(first.nodes - second.nodes),
        sorted(second.nodes - first.nodes),
        sorted(first.edges - second.edges),
        sorted(second.edges - first.edges),
        sorted(first.runs.keys() - second.runs.keys()),
        sorted(second.runs.keys() - first.runs.keys()),
        sorted(
            (r, first.runs[r], second.runs[r]) for r in common if first.runs[r] != second.runs[r]
        ),
    )


@dataclasses.dataclass
class EventIndex:
    """Which corpus events name each node and each run."""

    by_node: dict[Node, list[CorpusEvent]]
    by_run: dict[str, list[CorpusEvent]]

    @classmethod
    def of(cls, events: Iterable[CorpusEvent]) -> EventIndex:
        by_node: dict[Node, list[CorpusEvent]] = {}
        by_run: dict[str, list[CorpusEvent]] = {}
        for e in events:
            for node in named_nodes(e.event):
                by_node.setdefault(node, []).append(e)
            if e.run_id is not None:
                by_run.setdefault(e.run_id, []).append(e)
        return cls(by_node, by_run)

    def of_node(self, node: Node) -> list[str]:
        found = self.by_node.get(node)
        if found is None and node[0] == "job":
            # Marquez names a job whose run has a ParentRunFacet "{parent job}.{job}".
            found = [
                e
                for (kind, ns, name), events in self.by_node.items()
                if kind == "job" and ns == node[1] and node[2].endswith("." + name)
                for e in events
            ]
        return [e.label() for e in found or ()]

    def of_run(self, run_id: str) -> list[str]:
        return [e.label() for e in self.by_run.get(run_id, ())]


def named_nodes(event: dict[str, Any]) -> list[Node]:
    """The job and the datasets an event names, as it names them."""
    found: list[Node] = []
    job = event.get("job")
    if isinstance(job, dict) and isinstance(job.get("namespace"), str):
        found.append(("job", job["namespace"], str(job.get("name"))))
    for key in ("inputs", "outputs"):
        for ds in event.get(key) or ():
            if isinstance(ds, dict) and isinstance(ds.get("namespace"), str):
                found.append(("dataset", ds["namespace"], str(ds.get("name"))))
    ds = event.get("dataset")
    if isinstance(ds, dict) and isinstance(ds.get("namespace"), str):
        found.append(("dataset", ds["namespace"], str(ds.get("name"))))
    return found


def explain(found: Differences, index: EventIndex, limit: int = EXAMPLES) -> list[dict[str, Any]]:
    """The differences (``limit`` per kind), each with the events that cause it."""
    out: list[dict[str, Any]] = []

    def node_text(n: Node) -> str:
        return f"{n[0]} {n[1]} {n[2]}"

    for kind, nodes in (
        ("node only after forward", found.nodes_only_first),
        ("node only after backward", found.nodes_only_second),
    ):
        out += [
            {"kind": kind, "what": node_text(n), "events": index.of_node(n)} for n in nodes[:limit]
        ]
    for kind, edges in (
        ("edge only after forward", found.edges_only_first),
        ("edge only after backward", found.edges_only_second),
    ):
        for a, b in edges[:limit]:
            events = sorted(set(index.of_node(a)) & set(index.of_node(b))) or index.of_node(a)
            out.append({"kind": kind, "what": f"{node_text(a)} → {node_text(b)}", "events": events})
    for kind, runs in (
        ("run only after forward", found.runs_only_first),
        ("run only after backward", found.runs_only_second),
    ):
        out += [{"kind": kind, "what": r, "events": index.of_run(r)} for r in runs[:limit]]
    out += [
        {
            "kind": "run state differs",
            "what": f"{r}: {a} (forward) / {b} (backward)",
            "events": index.of_run(r),
        }
        for r, a, b in found.run_states[:limit]
    ]
    return out
