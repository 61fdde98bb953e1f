"""A run's state and times from the set of its events (docs/projection.md#runs).

Rule (OpenLineage run cycle, spec/docs/run-cycle.md; eventType from the 2-0-2 core schema):

- the winning event is the maximum of (terminal?, FAIL?, eventTime, event id): a terminal
  event (COMPLETE, FAIL, ABORT) outranks START / RUNNING / OTHER whatever the arrival
  order, and a FAIL outranks the other terminal events (openlineage-spark sends a failed
  query's FAIL and then, milliseconds later, a COMPLETE for the same run: the run failed,
  and an on-call reader must see it); among equals the latest eventTime wins, an unknown
  eventTime ordering before every known one; an exact tie (same rank, same time) goes to
  the LARGER event id (the SHA-256 hex of the event's canonical JSON, compared as text).
  So a COMPLETE that arrives before its START still yields a completed run, and two
  terminal events at one instant (a COMPLETE and an ABORT, say) resolve the same way on
  every replay;
- an event without eventType, or with a string outside the spec's list, counts as OTHER;
- ``started_at`` is the earliest known eventTime of the run's events (None when none is
  known), ``ended_at`` the eventTime of the winning terminal event (None while the run is
  not terminal, or when that event has no eventTime), ``latest`` the latest known one.

Every field is a maximum or minimum over the set, so ``merge_run_states`` joins partial
results exactly: resolving the events split in any way and merging equals resolving them all
(docs/architecture.md#order-independence). Run facets use the facet rule of ``facets.py``
(latest eventTime wins, then the larger canonical JSON); ``_deleted`` has no meaning on run
facets (proposal 1837).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from embrasure.model import RUN_STATES, TERMINAL_STATES, EventTime
from embrasure.projector.facets import time_key


@dataclasses.dataclass(frozen=True, slots=True)
class RunEventFact:
    """What the run rule needs from one event of the run."""

    event_id: str
    event_type: str | None
    time: EventTime | None


@dataclasses.dataclass(frozen=True, slots=True)
class RunState:
    """The resolved run: its state (one of RUN_STATES) and times.

    ``decided_by`` is the event id of the winning event: it is what lets two partial
    results merge exactly (``merge_run_states``) and lets a view say which event set the
    state.
    """

    state: str
    started_at: EventTime | None
    ended_at: EventTime | None
    latest: EventTime | None
    decided_by: str


def normalise_state(event_type: str | None) -> str:
    """eventType as a run state: missing or unknown strings are OTHER
    (docs/projection.md#validation)."""
    return event_type if event_type in RUN_STATES else "OTHER"


Rank = tuple[bool, bool, tuple[bool, str], str]


def _rank(state: str, time: EventTime | None, event_id: str) -> Rank:
    return (state in TERMINAL_STATES, state == "FAIL", time_key(time), event_id)


def _earliest(a: EventTime | None, b: EventTime | None) -> EventTime | None:
    # Unknown times are ignored here: started_at is the earliest KNOWN time. Equal keys in
    # different spellings keep the smaller text, so the shown value is deterministic too.
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _latest(a: EventTime | None, b: EventTime | None) -> EventTime | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _single(event: RunEventFact) -> RunState:
    state = normalise_state(event.event_type)
    return RunState(
        state=state,
        started_at=event.time,
        ended_at=event.time if state in TERMINAL_STATES else None,
        latest=event.time,
        decided_by=event.event_id,
    )


def _winner_rank(state: RunState) -> Rank:
    # The winner's time: ended_at when terminal; otherwise every event of the run is
    # non-terminal and the winner is the latest of them, whose time is ``latest``.
    time = state.ended_at if state.state in TERMINAL_STATES else state.latest
    return _rank(state.state, time, state.decided_by)


def merge_run_states(a: RunState, b: RunState) -> RunState:
    """Join two partial results of one run (commutative, associative, idempotent)."""
    win = a if _winner_rank(a) >= _winner_rank(b) else b
    return RunState(
        state=win.state,
        started_at=_earliest(a.started_at, b.started_at),
        ended_at=win.ended_at,
        latest=_latest(a.latest, b.latest),
        decided_by=win.decided_by,
    )


def resolve_run(events: Iterable[RunEventFact]) -> RunState:
    """The run's state from all of its events. Raises ValueError when there are none."""
    result: RunState | None = None
    for event in events:
        one = _single(event)
        result = one if result is None else merge_run_states(result, one)
    if result is None:
        raise ValueError("a run has at least one event")
    return result


ParentColumns = tuple[str | None, str | None, str | None, str | None, str | None, str | None]


@dataclasses.dataclass(frozen=True, slots=True)
class RunPart:
    """What some of a run's events say about it: the state (``merge_run_states``), and
    the job and the parent link from the latest event naming them — by eventTime, then
    event id, the order of every other "latest" rule. Joins like RunState."""

    state: RunState
    job: tuple[str, str]
    job_rank: tuple[str, str]  # (eventTime key, '' when unknown; event id)
    parent: ParentColumns | None = None  # parent run, job ns, name; root run, job ns, name
    parent_rank: tuple[str, str] | None = None


def merge_run_parts(a: RunPart, b: RunPart) -> RunPart:
    job = a if a.job_rank >= b.job_rank else b
    if b.parent_rank is None:
        parent = a
    elif a.parent_rank is None:
        parent = b
    else:
        parent = a if a.parent_rank >= b.parent_rank else b
    return RunPart(
        merge_run_states(a.state, b.state),
        job.job,
        job.job_rank,
        parent.parent,
        parent.parent_rank,
    )


def winner_key(state: RunState) -> tuple[int, str]:
    """(0 not terminal, 1 terminal, 2 FAIL; the deciding event's eventTime key) — with
    ``decided_by``, the rank the store merges states by (its ``win_terminal`` column)."""
    terminal, fail, (_known, key), _event = _winner_rank(state)
    return int(terminal) + int(fail), key
