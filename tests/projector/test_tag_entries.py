"""Tag entries (projector/admin.py tag / untag; docs/operations.md#tags): parsed strictly,
old hide entries still read, kept by reprojection, and the ``tags`` table is the same
whatever order projectors commit the entries in (PostgreSQL commits out of log order:
schema.MERGES["tags"] keeps the row of the later log position); on both backends."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embrasure.model import DatasetId
from embrasure.projector import admin
from embrasure.projector.admin import AdminEntry
from embrasure.projector.apply import prepare
from embrasure.projector.validate import Invalid
from embrasure.projector.worker import Projector, reproject
from embrasure.query.entities import Identities
from embrasure.query.tags import definitions, entity_tags, field_tags
from embrasure.store import Store, open_store
from embrasure.store.rows import HiddenRow, TagRow
from embrasure.web.admin import draft

AT = "2026-11-30T09:00:00Z"


_clock = itertools.count()


def entry(action: str, kind: str, ns: str, name: str, tag: str, **more: Any) -> AdminEntry:
    """An entry at a time of its own: the log takes a body it holds already for a
    resent delivery (docs/receiver.md#idempotency), and an admin's entries differ at
    least by their microseconds (model.utc_now)."""
    at = f"2026-11-30T09:00:00.{next(_clock) % 1_000_000:06d}Z"
    return AdminEntry(action, kind, ns, name, at, None, tag=tag, **more)


def append(store: Store, entries: list[AdminEntry]) -> None:
    for e in entries:
        store.append([draft(e, None)])


def table(store: Store) -> list[TagRow]:
    with store.reader() as reader:
        return reader.rows(TagRow)


# -- parsing ------------------------------------------------------------------------------


def test_a_stored_hide_entry_without_the_tag_fields_still_parses() -> None:
    """Entries stored before tags have no tag, field or description keys."""
    old = {"action": "hide", "kind": "job", "namespace": "spark", "name": "daily", "at": AT}
    parsed = AdminEntry.parse({**old, "by": None, "reason": "noisy"})
    assert parsed.row(7) == HiddenRow("job", "spark", "daily", 1, 7, AT, None, "noisy")
    assert AdminEntry.parse(orjson.loads(parsed.to_json())) == parsed


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ({"kind": "dataset", "namespace": "s3://b", "name": "o"}, "a tag entry names a tag"),
        ({"kind": "dataset", "namespace": "s3://b", "name": "o", "tag": ""}, "names a tag"),
        ({"kind": "dataset", "namespace": "s3://b", "name": "o", "tag": "x" * 1001}, "1 to"),
        ({"kind": "field", "namespace": "s3://b", "name": "o", "tag": "PII"}, "names the field"),
        (
            {"kind": "dataset", "namespace": "s3://b", "name": "o", "tag": "PII", "field": "e"},
            "names the field",
        ),
        ({"kind": "job", "namespace": "spark", "name": "", "tag": "t"}, "names the dataset"),
        ({"kind": "tag", "namespace": "x", "name": "t", "tag": "t"}, "namespace ''"),
        ({"kind": "tag", "namespace": "", "name": "u", "tag": "t"}, "as its name"),
        ({"kind": "namespace", "namespace": "spark", "name": "", "tag": "t"}, "kind must be"),
        ({"kind": "job", "namespace": "spark", "name": "d", "tag": 3}, "tag must be a string"),
        (
            {"kind": "tag", "namespace": "", "name": "t", "tag": "t", "description": "d" * 1001},
            "description is longer",
        ),
    ],
)
def test_a_bad_tag_entry_is_invalid_with_a_reason(doc: dict[str, Any], reason: str) -> None:
    with pytest.raises(Invalid) as raised:
        AdminEntry.parse({"action": "tag", "at": AT, **doc})
    assert reason in raised.value.reason


def test_a_hide_entry_cannot_be_a_definition() -> None:
    with pytest.raises(Invalid, match="kind must be one of"):
        AdminEntry.parse({"action": "hide", "kind": "tag", "namespace": "", "name": "t", "at": AT})


def test_a_tag_entry_round_trips() -> None:
    e = entry("tag", "field", "s3://b", "orders", "PII", field="email")
    assert AdminEntry.parse(orjson.loads(e.to_json())) == e
    assert e.row(3) == TagRow("field", "s3://b", "orders", "email", "PII", 1, 3, None)


# -- projection ---------------------------------------------------------------------------


def test_tags_are_projected_and_survive_reprojection(db_url: str) -> None:
    store = open_store(db_url)
    try:
        append(
            store,
            [
                entry("tag", "dataset", "s3://b", "orders", "PII"),
                entry("tag", "dataset", "s3://b", "orders", "gold"),
                entry("tag", "field", "s3://b", "orders", "SENSITIVE", field="email"),
                entry("tag", "job", "spark", "daily", "finance"),
                entry("tag", "tag", "", "PII", "PII", description="personal data"),
                entry("untag", "dataset", "s3://b", "orders", "gold"),
            ],
        )
        Projector(store).run_until_caught_up()
        before = table(store)
        assert reproject(store) == 2
        assert table(store) == before
        with store.reader() as reader:
            ids = Identities(reader)
            key = ("s3://b", "orders")
            assert entity_tags(reader, ids, "dataset", [key]) == {key: ["PII"]}
            assert entity_tags(reader, ids, "job", [("spark", "daily")]) == {
                ("spark", "daily"): ["finance"]
            }
            assert field_tags(reader, ids, [key]) == {key: {"email": ["SENSITIVE"]}}
            # "gold" was taken off its only dataset and is still a tag (as in Marquez).
            assert definitions(reader) == {
                "PII": "personal data",
                "SENSITIVE": None,
                "finance": None,
                "gold": None,
            }
    finally:
        store.close()


def test_a_symlinked_datasets_tags_are_its_nodes(db_url: str) -> None:
    """Tags read per node: those put on any of its identities."""
    store = open_store(db_url)
    try:
        append(
            store,
            [
                entry("tag", "dataset", "hive", "db.orders", "PII"),
                entry("tag", "dataset", "s3://b", "orders", "gold"),
            ],
        )
        Projector(store).run_until_caught_up()

        class Joined:
            """s3://b/orders and hive db.orders as one node, canonical the latter."""

            node = DatasetId("hive", "db.orders")
            alias = DatasetId("s3://b", "orders")

            def canonical(self, ids: Any) -> dict[DatasetId, DatasetId]:
                return {i: self.node if i == self.alias else i for i in ids}

            def members(self, nodes: Any) -> dict[DatasetId, list[DatasetId]]:
                return {n: [n, self.alias] if n == self.node else [n] for n in nodes}

            def is_renamed(self, identity: DatasetId) -> bool:
                return False  # no rename joined them

        with store.reader() as reader:
            found = entity_tags(reader, Joined(), "dataset", [("hive", "db.orders")])
        assert found == {("hive", "db.orders"): ["PII", "gold"]}
    finally:
        store.close()


KEYS = [
    ("dataset", "s3://b", "orders", ""),
    ("field", "s3://b", "orders", "email"),
    ("job", "spark", "daily", ""),
    ("tag", "", "PII", ""),
]
steps = st.lists(
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["PII", "gold"]), st.booleans()),
    min_size=1,
    max_size=12,
)


def _entries(drawn: list[tuple[tuple[str, str, str, str], str, bool]]) -> list[AdminEntry]:
    out = []
    for n, ((kind, ns, name, field), tag, on) in enumerate(drawn):
        if kind == "tag":  # a definition, of the tag it names, with a new description
            out.append(entry("tag", "tag", "", name, name, description=f"d{n}"))
        else:
            out.append(entry("tag" if on else "untag", kind, ns, name, tag, field=field or None))
    return out


# fresh_db is a function-scoped fixture on purpose: it hands out a new database per call.
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps, st.integers(1, 4), st.randoms(use_true_random=False))
def test_commit_order_does_not_change_the_tags(
    fresh_db: Callable[[], str],
    drawn: list[tuple[tuple[str, str, str, str], str, bool]],
    batches: int,
    rnd: random.Random,
) -> None:
    """The log's entries split into batches, each prepared and merged in its own
    transaction in a shuffled order (projectors committing out of log order), make the
    table the projector makes in order, and the latest entry per key decides."""
    store = open_store(fresh_db())
    try:
        entries = _entries(drawn)
        append(store, entries)
        log = store.read_log(0, len(entries), 1 << 30)
        Projector(store).run_until_caught_up()
        in_order = table(store)
        latest: dict[tuple[str, ...], AdminEntry] = {}
        for e in entries:
            latest[(e.kind, e.namespace, e.name, e.field or "", e.tag or "")] = e
        assert {tuple(r[:5]): (r.present, r.description) for r in in_order} == {
            k: (int(e.action == "tag"), e.description) for k, e in latest.items()
        }
        cuts = sorted(rnd.sample(range(1, len(log)), min(batches, len(log)) - 1))
        parts = [log[a:b] for a, b in zip([0, *cuts], [*cuts, len(log)], strict=True)]
        rnd.shuffle(parts)
        with store.projection() as tx:
            tx.delete(TagRow, [tuple(r[:5]) for r in in_order])
        for part in parts:
            with store.projection() as tx:
                tx.merge(TagRow, prepare(part).tags)
        assert table(store) == in_order
    finally:
        store.close()


def test_latest_keeps_one_row_per_key() -> None:
    rows = [
        TagRow("job", "spark", "daily", "", "t", 1, 5, None),
        TagRow("job", "spark", "daily", "", "t", 0, 9, None),
        TagRow("job", "spark", "daily", "", "u", 1, 2, None),
    ]
    assert admin.latest(rows) == [rows[1], rows[2]]
