"""The facet merge rule (docs/projection.md#facets; `_deleted` from OpenLineage proposal 1837)."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from embrasure.model import EventTime
from embrasure.projector.canonical import canonical_json
from embrasure.projector.facets import (
    FacetRecord,
    FacetSlot,
    FacetValue,
    current_facets,
    current_of,
    fold_facets,
    fold_value,
    is_deletion,
    merge_slots,
    value_hash,
)


def t(second: int, text: str | None = None) -> EventTime:
    key = f"2026-11-30T09:00:{second:02d}.000000000Z"
    return EventTime(key, text or f"2026-11-30T09:00:{second:02d}Z")


OWNER_A = {"owners": [{"name": "team:a"}]}
OWNER_B = {"owners": [{"name": "team:b"}]}
DELETED = {"_deleted": True}


Record = FacetRecord | tuple[str, EventTime | None, str, Any]


def values(history: Iterable[Record]) -> dict[str, Any]:
    return {name: v.value for name, v in current_facets(history).items()}


def test_latest_event_time_wins_whatever_the_order() -> None:
    history = [FacetRecord("ownership", t(2), "e2", OWNER_B), ("ownership", t(1), "e1", OWNER_A)]
    assert current_facets(history) == {"ownership": FacetValue(OWNER_B, "e2", t(2))}
    assert current_facets(reversed(history)) == {"ownership": FacetValue(OWNER_B, "e2", t(2))}


def test_equal_times_break_by_larger_value_hash() -> None:
    # BLAKE2b-128 of the canonical JSON: team:a's hash is the larger, though its JSON is
    # the smaller (the rule before graph version 10 would have picked team:b).
    hash_a, hash_b = (value_hash(canonical_json(v)) for v in (OWNER_A, OWNER_B))
    assert hash_a > hash_b and canonical_json(OWNER_A) < canonical_json(OWNER_B)
    for order in (1, -1):
        history = [
            FacetRecord("ownership", t(1), "e9", OWNER_B),
            ("ownership", t(1), "e1", OWNER_A),
        ]
        assert current_facets(history[::order])["ownership"].value == OWNER_A


def test_equal_times_and_values_credit_the_larger_event_id() -> None:
    history = [FacetRecord("doc", t(1), "e1", {"d": 1}), FacetRecord("doc", t(1), "e2", {"d": 1})]
    assert current_facets(history)["doc"].event_id == "e2"


def test_same_instant_in_two_spellings_is_one_time() -> None:
    # "…:01Z" and "…:01.000Z" are the same key: the value decides, not the spelling.
    # {"d": 1} has the larger value hash, whichever spelling or event carries it.
    assert value_hash(b'{"d":1}') > value_hash(b'{"d":2}')
    spellings = ("2026-11-30T09:00:01.000Z", "2026-11-30T09:00:01Z")
    for first, second in (spellings, spellings[::-1]):
        history = [
            FacetRecord("doc", t(1, first), "e1", {"d": 1}),
            FacetRecord("doc", t(1, second), "e2", {"d": 2}),
        ]
        assert current_facets(history)["doc"].value == {"d": 1}


def test_unknown_time_orders_before_every_known_time() -> None:
    history = [FacetRecord("doc", None, "e9", {"d": 9}), FacetRecord("doc", t(0), "e1", {"d": 1})]
    assert current_facets(history)["doc"].value == {"d": 1}
    assert current_facets([FacetRecord("doc", None, "e9", {"d": 9})])["doc"].time is None


def test_deletion_not_older_than_the_value_removes_it() -> None:
    later = [FacetRecord("ownership", t(1), "e1", OWNER_A), ("ownership", t(2), "e2", DELETED)]
    same = [FacetRecord("ownership", t(1), "e1", OWNER_A), ("ownership", t(1), "e2", DELETED)]
    assert values(later) == {}
    assert values(same) == {}


def test_deletion_older_than_the_value_does_not_remove_it() -> None:
    history = [FacetRecord("ownership", t(2), "e2", OWNER_A), ("ownership", t(1), "e1", DELETED)]
    assert values(history) == {"ownership": OWNER_A}


def test_a_later_value_brings_a_deleted_facet_back() -> None:
    # Proposal 1837: deletion does not restore the previous value; a newer one is a value.
    history = [
        FacetRecord("ownership", t(1), "e1", OWNER_A),
        FacetRecord("ownership", t(2), "e2", DELETED),
        FacetRecord("ownership", t(3), "e3", OWNER_B),
    ]
    assert values(history) == {"ownership": OWNER_B}


def test_unknown_time_deletion_removes_only_unknown_time_values() -> None:
    assert values([FacetRecord("d", None, "e1", {"x": 1}), ("d", None, "e2", DELETED)]) == {}
    assert values([FacetRecord("d", t(0), "e1", {"x": 1}), ("d", None, "e2", DELETED)]) == {
        "d": {"x": 1}
    }


def test_deletion_without_any_value_leaves_nothing() -> None:
    assert current_facets([FacetRecord("ownership", t(1), "e1", DELETED)]) == {}


def test_deleted_null_false_or_string_is_an_ordinary_value() -> None:
    # dbt structured-logs events carry "_deleted": null on job facets (corpus, 26 times).
    for marker in (None, False, "true", 1):
        value = {"_deleted": marker, "sql": "select 1"}
        assert not is_deletion(value)
        assert values([FacetRecord("sql", t(1), "e1", value)]) == {"sql": value}


def test_deletion_carries_no_required_fields_and_may_carry_others() -> None:
    assert is_deletion({"_deleted": True, "_producer": "p", "_schemaURL": "u"})
    assert not is_deletion([True])


def test_run_facets_ignore_deletion_markers() -> None:
    history = [
        FacetRecord("nominalTime", t(1), "e1", {"a": 1}),
        ("nominalTime", t(2), "e2", DELETED),
    ]
    assert current_facets(history, honour_deleted=False)["nominalTime"].value == DELETED


def test_names_are_independent_and_sorted() -> None:
    history = [FacetRecord("z", t(1), "e1", 1), ("a", t(1), "e1", 2), ("m", t(2), "e2", DELETED)]
    assert list(current_facets(history)) == ["a", "z"]


def test_fold_into_existing_slots_is_incremental() -> None:
    first = fold_facets([FacetRecord("doc", t(1), "e1", {"d": 1})])
    both = fold_facets([FacetRecord("doc", t(2), "e2", DELETED)], into=first)
    assert current_of(both) == {}
    assert first["doc"] == FacetSlot(FacetValue({"d": 1}, "e1", t(1)))  # not mutated


# -- properties: order, duplication and split do not matter ----------------------------------------
# (docs/architecture.md#order-independence)

NAMES = st.sampled_from(["schema", "ownership", "doc"])
VALUES = st.one_of(
    st.just(DELETED),
    st.just({"_deleted": None}),
    st.just({"_deleted": False, "x": 1}),
    st.integers(-2, 2),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 2), max_size=2),
)
TIMES = st.one_of(st.none(), st.builds(t, st.integers(0, 3)))


@st.composite
def histories(draw: st.DrawFn) -> list[FacetRecord]:
    # An event's time is a function of the event: draw it once per event id.
    ids = draw(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=6, unique=True))
    time_of = {i: draw(TIMES) for i in ids}
    return draw(
        st.lists(
            st.builds(
                lambda n, i, v: FacetRecord(n, time_of[i], i, v),
                NAMES,
                st.sampled_from(ids),
                VALUES,
            ),
            max_size=12,
        )
    )


@given(histories(), st.randoms(use_true_random=False), st.booleans())
def test_order_and_duplicates_do_not_matter(
    history: list[FacetRecord], rnd: random.Random, honour: bool
) -> None:
    shuffled = history + history[: len(history) // 2]
    rnd.shuffle(shuffled)
    assert current_facets(shuffled, honour_deleted=honour) == current_facets(
        history, honour_deleted=honour
    )


@given(histories(), st.lists(st.integers(0, 3), max_size=12))
def test_merging_the_parts_of_any_split_equals_the_whole(
    history: list[FacetRecord], part_of: list[int]
) -> None:
    parts: list[list[FacetRecord]] = [[], [], [], []]
    for index, record in enumerate(history):
        parts[part_of[index] if index < len(part_of) else 0].append(record)
    merged: dict[str, FacetSlot] = {}
    for part in parts:
        for name, slot in fold_facets(part).items():
            merged[name] = merge_slots(merged.get(name, FacetSlot()), slot)
    assert merged == fold_facets(history)
    assert current_of(merged) == current_facets(history)


@given(histories())
def test_slot_merge_is_a_semilattice(history: list[FacetRecord]) -> None:
    slots = [FacetSlot(), *(fold_facets([r])[r.name] for r in history)]
    for a in slots:
        assert merge_slots(a, a) == a
        for b in slots:
            assert merge_slots(a, b) == merge_slots(b, a)
            for c in slots[:4]:
                assert merge_slots(merge_slots(a, b), c) == merge_slots(a, merge_slots(b, c))


@given(histories())
def test_folding_a_value_in_place_is_the_slot_merge(history: list[FacetRecord]) -> None:
    """``fold_value`` (the projector's batch fold) joins a value as ``merge_slots``
    joins its own slot, deletion markers included."""
    folded: dict[str, FacetSlot] = {}
    merged: dict[str, FacetSlot] = {}
    for name, time, event_id, value in history:
        canonical = canonical_json(value)
        item = FacetValue(value, event_id, time, canonical, value_hash(canonical))
        deletion = is_deletion(value)
        fold_value(folded, name, (value, event_id, time, canonical, item.digest), deletion)
        slot = FacetSlot(None, item) if deletion else FacetSlot(item)
        merged[name] = merge_slots(merged.get(name, FacetSlot()), slot)
        assert folded == merged
