"""Run state and times from the set of a run's events (docs/projection.md#runs)."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from embrasure.model import RUN_STATES, EventTime
from embrasure.projector.canonical import canonical_json
from embrasure.projector.facets import current_facets, value_hash
from embrasure.projector.runs import (
    RunEventFact,
    RunState,
    merge_run_states,
    normalise_state,
    resolve_run,
)

from conftest import OPENLINEAGE, requires_shared


def t(second: int) -> EventTime:
    return EventTime(f"2026-11-30T09:00:{second:02d}.000000000Z", f"2026-11-30T09:00:{second:02d}Z")


def ev(event_id: str, event_type: str | None, second: int | None) -> RunEventFact:
    return RunEventFact(event_id, event_type, None if second is None else t(second))


def test_complete_arriving_before_start_yields_a_completed_run_with_the_start_time() -> None:
    state = resolve_run([ev("b", "COMPLETE", 5), ev("a", "START", 1)])
    assert state == RunState("COMPLETE", t(1), t(5), t(5), "b")


def test_terminal_outranks_a_later_running() -> None:
    # A late RUNNING (a heartbeat that lost a race) must not reopen a finished run.
    state = resolve_run([ev("a", "START", 1), ev("b", "FAIL", 2), ev("c", "RUNNING", 9)])
    assert (state.state, state.ended_at, state.latest) == ("FAIL", t(2), t(9))


def test_among_terminals_the_latest_event_time_wins() -> None:
    state = resolve_run([ev("z", "ABORT", 2), ev("a", "COMPLETE", 3)])
    assert (state.state, state.ended_at, state.decided_by) == ("COMPLETE", t(3), "a")


def test_a_fail_outranks_a_later_complete() -> None:
    # openlineage-spark 1.53.0: a failed query's FAIL, then its SQL execution's COMPLETE
    # (tests/data/producers/spark_agent_capture.jsonl). In either arrival order.
    events = [ev("f", "FAIL", 2), ev("c", "COMPLETE", 3), ev("a", "START", 1)]
    for order in (events, list(reversed(events))):
        state = resolve_run(order)
        assert (state.state, state.ended_at, state.decided_by) == ("FAIL", t(2), "f")


def test_exact_ties_go_to_the_larger_event_id() -> None:
    for events in ([ev("a1", "COMPLETE", 3), ev("f0", "ABORT", 3)], [ev("a1", "START", None)]):
        winner = max(events, key=lambda e: e.event_id)
        assert resolve_run(events).decided_by == winner.event_id
        assert resolve_run(reversed(events)).state == normalise_state(winner.event_type)


def test_running_without_a_terminal_event() -> None:
    state = resolve_run([ev("a", "START", 1), ev("b", "RUNNING", 4)])
    assert state == RunState("RUNNING", t(1), None, t(4), "b")


def test_missing_or_unknown_event_types_count_as_other() -> None:
    assert resolve_run([ev("a", None, 1)]).state == "OTHER"
    assert resolve_run([ev("a", "RESTARTED", 1)]).state == "OTHER"
    # OTHER is an ordinary non-terminal state: the latest one wins among them.
    assert resolve_run([ev("a", "START", 1), ev("b", None, 2)]).state == "OTHER"


def test_unknown_times_order_before_known_ones() -> None:
    state = resolve_run([ev("z", "RUNNING", None), ev("a", "START", 1)])
    assert (state.state, state.started_at, state.latest) == ("START", t(1), t(1))
    # A terminal event without eventTime still closes the run; its end time is unknown.
    state = resolve_run([ev("a", "START", 1), ev("b", "ABORT", None)])
    assert (state.state, state.started_at, state.ended_at) == ("ABORT", t(1), None)


def test_times_are_none_when_no_event_has_a_time() -> None:
    assert resolve_run([ev("a", "START", None)]) == RunState("START", None, None, None, "a")


def test_duplicate_starts_change_nothing() -> None:
    once = resolve_run([ev("a", "START", 1), ev("b", "COMPLETE", 2)])
    assert resolve_run([ev("a", "START", 1)] * 3 + [ev("b", "COMPLETE", 2)]) == once


def test_a_run_needs_an_event() -> None:
    with pytest.raises(ValueError, match="at least one event"):
        resolve_run([])


def latest_facets(values: Iterable[tuple[str, EventTime | None, str, Any]]) -> dict[str, Any]:
    # Run facets as the read side takes them: never deleted (proposal 1837).
    return {k: v.value for k, v in current_facets(values, honour_deleted=False).items()}


def test_run_facets_latest_time_then_larger_value_hash() -> None:
    boom = {"message": "boom", "programmingLanguage": "python"}
    alpha = {"message": "alpha", "programmingLanguage": "python"}
    # alpha's hash is the larger (its canonical JSON the smaller): the hash decides.
    assert value_hash(canonical_json(alpha)) > value_hash(canonical_json(boom))
    assert canonical_json(alpha) < canonical_json(boom)
    values: list[tuple[str, EventTime | None, str, Any]] = [
        ("nominalTime", t(1), "a", {"nominalStartTime": "2026-11-30T08:00:00Z"}),
        ("nominalTime", t(2), "b", {"nominalStartTime": "2026-11-30T09:00:00Z"}),
        ("errorMessage", t(3), "c", boom),
        ("errorMessage", t(3), "d", alpha),
        ("processing_engine", None, "e", {"version": "3.5"}),
    ]
    assert latest_facets(values) == {
        "errorMessage": alpha,
        "nominalTime": {"nominalStartTime": "2026-11-30T09:00:00Z"},
        "processing_engine": {"version": "3.5"},
    }


def test_run_facets_have_no_deletion() -> None:
    # Proposal 1837: only job and dataset facets can be deleted.
    values = [("tags", t(1), "a", {"tags": []}), ("tags", t(2), "b", {"_deleted": True})]
    assert latest_facets(values) == {"tags": {"_deleted": True}}


def corpus_time(text: str) -> EventTime:
    # Enough of eventTime parsing for these fixtures: no timezone means UTC
    # (docs/projection.md#validation).
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    moment = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    return EventTime(moment.strftime("%Y-%m-%dT%H:%M:%S.%f000Z"), text)


def dbt_runs(name: str) -> dict[str, list[RunEventFact]]:
    """A dbt structured-logs fixture (YAML flow syntax: JSON with # comments and trailing
    commas) as run events per job name: runIds are template placeholders there."""
    text = (OPENLINEAGE / "events/dbt/structured_logs/postgres/events/results" / name).read_text()
    text = re.sub(r"(?m)^\s*#.*$", "", text)
    events = json.loads(re.sub(r",(\s*[\]}])", r"\1", text))
    by_job: dict[str, list[RunEventFact]] = {}
    for index, event in enumerate(events):
        fact = RunEventFact(f"{index:02d}", event["eventType"], corpus_time(event["eventTime"]))
        by_job.setdefault(event["job"]["name"], []).append(fact)
    return by_job


@requires_shared()
def test_dbt_abort_at_the_same_instant_as_its_start() -> None:
    # The corpus's only ABORT events. A skipped dbt test: START and ABORT share an eventTime;
    # the terminal event wins whatever the order.
    runs = dbt_runs("skipped_test_NodeFinished_OL.yaml")
    (events,) = [v for k, v in runs.items() if k.startswith("test.")]
    for order in (events, events[::-1]):
        state = resolve_run(order)
        assert state.state == "ABORT"
        assert state.started_at == state.ended_at == events[0].time


@requires_shared()
def test_dbt_abort_stamped_before_its_start() -> None:
    # dbt's adapter sends the command's ABORT with a placeholder time ("2024-01-01T00:00:00
    # .000001", no timezone) that is older than the START. ABORT still wins (terminal
    # outranks), and started_at is, as the rule says, the earliest eventTime: the ABORT's.
    events = dbt_runs("missing_command_completed_OL.yaml")["dbt-run-jaffle_shop"]
    start, abort = sorted(events, key=lambda e: e.event_type or "", reverse=True)
    assert (start.event_type, abort.event_type) == ("START", "ABORT")
    for order in (events, events[::-1]):
        assert resolve_run(order) == RunState(
            "ABORT", abort.time, abort.time, start.time, abort.event_id
        )


@requires_shared()
def test_marquez_events_without_event_type_are_other() -> None:
    path = OPENLINEAGE / "events/marquez/open_lineage/event_required_only.json"
    event = json.loads(path.read_text())
    assert "eventType" not in event
    assert resolve_run([RunEventFact("e", event.get("eventType"), None)]).state == "OTHER"


# -- properties: order, duplication and split do not matter ----------------------------------------
# (docs/architecture.md#order-independence)

TYPES = st.sampled_from([*RUN_STATES, None, "UNKNOWN"])


@st.composite
def runs(draw: st.DrawFn) -> list[RunEventFact]:
    # An event id determines its content: draw type and time once per id.
    ids = draw(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True))
    content = {i: (draw(TYPES), draw(st.one_of(st.none(), st.integers(0, 4)))) for i in ids}
    return [ev(i, *content[i]) for i in ids]


@given(runs(), st.randoms(use_true_random=False))
def test_order_and_duplicates_do_not_matter(events: list[RunEventFact], rnd: random.Random) -> None:
    shuffled = events + events[: len(events) // 2]
    rnd.shuffle(shuffled)
    assert resolve_run(shuffled) == resolve_run(events)


@given(runs(), st.randoms(use_true_random=False))
def test_merging_the_parts_of_any_split_equals_the_whole(
    events: list[RunEventFact], rnd: random.Random
) -> None:
    parts: list[list[RunEventFact]] = [[] for _ in range(rnd.randint(1, 4))]
    for event in events:
        parts[rnd.randrange(len(parts))].append(event)
    states = [resolve_run(p) for p in parts if p]
    rnd.shuffle(states)
    merged = states[0]
    for state in states[1:]:
        merged = merge_run_states(merged, state)
    assert merged == resolve_run(events)


@given(runs())
def test_state_rules_hold(events: list[RunEventFact]) -> None:
    state = resolve_run(events)
    known = [e.time for e in events if e.time is not None]
    assert state.started_at == (min(known) if known else None)
    assert state.latest == (max(known) if known else None)
    terminal = any(normalise_state(e.event_type) in {"COMPLETE", "FAIL", "ABORT"} for e in events)
    assert (state.state in {"COMPLETE", "FAIL", "ABORT"}) == terminal
    if not terminal:
        assert state.ended_at is None
