"""Dataset identity from TABLE symlinks and renames (docs/projection.md#entities-and-identity)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable

from hypothesis import given
from hypothesis import strategies as st

from embrasure.model import DatasetId, Symlink
from embrasure.projector.symlinks import (
    Link,
    Resolution,
    group_of,
    links_of,
    resolve_group,
    resolve_identities,
)

from conftest import OPENLINEAGE, requires_shared

PATH = DatasetId("s3://bucket", "warehouse/orders")
GLUE = DatasetId("arn:aws:glue:eu-west-1:123", "table/sales/orders")
HIVE = DatasetId("hive://metastore:9083", "sales.orders")
LOC = DatasetId("file", "/warehouse/sales.db/orders")


def test_table_links_join_transitively_and_the_smallest_identity_is_canonical() -> None:
    got = resolve_identities([Link(PATH, HIVE, "TABLE"), Link(HIVE, GLUE, "TABLE")])
    assert min(PATH, HIVE, GLUE) == GLUE
    for identity in (PATH, HIVE, GLUE):
        assert got[identity] == Resolution(GLUE, (HIVE, PATH), (), False)


def test_locations_merge_nothing_and_are_kept_on_the_node() -> None:
    got = resolve_identities([Link(HIVE, LOC, "LOCATION"), Link(HIVE, PATH, "TABLE")])
    assert got[PATH].canonical == HIVE and got[HIVE].canonical == HIVE
    assert got[PATH].locations == (Symlink(LOC, "LOCATION"),)
    assert LOC not in got


def test_unknown_symlink_types_are_locations() -> None:
    got = resolve_identities([Link(HIVE, PATH, "VIEW")])
    assert got == {HIVE: Resolution(HIVE, (), (Symlink(PATH, "VIEW"),), False)}
    # Only lifecycleStateChange makes a rename: a symlink typed "RENAME" is a location.
    links = links_of(HIVE, [Symlink(PATH, "RENAME"), Symlink(LOC, "LOCATION")])
    assert links == [
        Link(HIVE, PATH, "LOCATION", "RENAME"),
        Link(HIVE, LOC, "LOCATION", "LOCATION"),
    ]
    assert resolve_identities(links) == {
        HIVE: Resolution(HIVE, (), (Symlink(LOC, "LOCATION"), Symlink(PATH, "RENAME")), False)
    }


def test_rename_resolves_the_old_identity_to_the_new_one() -> None:
    old, new = DatasetId("db", "a_orders"), DatasetId("db", "z_orders")
    got = resolve_identities([Link(old, new, "RENAME")])
    assert got[old] == Resolution(new, (old,), (), True)  # old < new, yet new is canonical
    assert got[new] == Resolution(new, (old,), (), False)


def test_a_table_alias_of_the_new_name_still_competes() -> None:
    old, new, alias = DatasetId("db", "b"), DatasetId("db", "c"), DatasetId("a", "x")
    got = resolve_identities([Link(old, new, "RENAME"), Link(new, alias, "TABLE")])
    assert {got[i].canonical for i in (old, new, alias)} == {alias}
    assert [got[i].renamed for i in (old, new, alias)] == [True, False, False]


def test_a_rename_chain_ends_at_the_last_name() -> None:
    a, b, c = DatasetId("db", "c1"), DatasetId("db", "b2"), DatasetId("db", "a3")
    got = resolve_identities([Link(b, c, "RENAME"), Link(a, b, "RENAME")])
    assert {got[i].canonical for i in (a, b, c)} == {c}


def test_a_rename_cycle_falls_back_to_the_smallest_identity() -> None:
    a, b = DatasetId("db", "a"), DatasetId("db", "b")
    got = resolve_identities([Link(a, b, "RENAME"), Link(b, a, "RENAME")])
    assert got[a].canonical == got[b].canonical == a
    assert got[a].renamed and got[b].renamed


def test_self_links_join_and_rename_nothing() -> None:
    got = resolve_identities([Link(HIVE, HIVE, "TABLE"), Link(PATH, PATH, "RENAME")])
    assert got == {HIVE: Resolution(HIVE, (), (), False), PATH: Resolution(PATH, (), (), False)}


def test_links_of_a_dataset_facets() -> None:
    links = links_of(HIVE, [Symlink(LOC, "LOCATION"), Symlink(GLUE, "TABLE")], previous=PATH)
    assert links == [
        Link(HIVE, LOC, "LOCATION", "LOCATION"),
        Link(HIVE, GLUE, "TABLE"),
        Link(PATH, HIVE, "RENAME"),
    ]


def test_group_of_follows_joining_links_only() -> None:
    links = [Link(PATH, HIVE, "TABLE"), Link(HIVE, LOC, "LOCATION"), Link(GLUE, PATH, "RENAME")]
    assert group_of(HIVE, neighbours_of(links)) == {PATH, HIVE, GLUE}
    assert group_of(LOC, neighbours_of(links)) == {LOC}
    assert resolve_group(LOC, neighbours_of(links)) == {LOC: Resolution(LOC, (), (), False)}


def index(links: Iterable[Link]) -> dict[DatasetId, list[Link]]:
    """A store's index of links by identity, as ``neighbours`` expects it."""
    by_id: dict[DatasetId, list[Link]] = {}
    for link in links:
        by_id.setdefault(link.a, []).append(link)
        if link.b != link.a:
            by_id.setdefault(link.b, []).append(link)
    return by_id


def neighbours_of(links: Iterable[Link]) -> Callable[[DatasetId], list[Link]]:
    by_id = index(links)
    return lambda x: by_id.get(x, [])


def corpus_links(relative: str) -> list[Link]:
    """The links an event's datasets declare (symlinks 1-0-1, lifecycleStateChange 1-0-1)."""
    event = json.loads((OPENLINEAGE / "events" / relative).read_text())
    links: list[Link] = []
    for raw in [*event.get("inputs", []), *event.get("outputs", [])]:
        facets = raw.get("facets", {})
        identity = DatasetId(raw["namespace"], raw["name"])
        symlinks = [
            Symlink(DatasetId(i.get("namespace", ""), i["name"]), i["type"])
            for i in facets.get("symlinks", {}).get("identifiers", [])
        ]
        change = facets.get("lifecycleStateChange", {})
        prev = (
            change.get("previousIdentifier")
            if change.get("lifecycleStateChange") == "RENAME"
            else None
        )
        previous = None if prev is None else DatasetId(prev["namespace"], prev["name"])
        links += links_of(identity, symlinks, previous)
    return links


@requires_shared()
def test_spark_alter_table_rename_from_the_corpus() -> None:
    # Spark's ALTER TABLE … RENAME TO: the output is the new path, with a TABLE symlink
    # and a RENAME whose previousIdentifier is the old path.
    links = corpus_links("spark/container/pysparkAlterTableRenameEnd.json")
    got = resolve_identities(links)
    old = DatasetId("file", "/tmp/alter_test/alter_table_test")
    new = DatasetId("file", "/tmp/alter_test/alter_table_test_new")
    table = DatasetId("file:/tmp/alter_test", "default.alter_table_test_new")
    assert got[old].canonical == got[table].canonical == new
    assert got[old].renamed and not got[new].renamed
    assert got[new].aliases == (old, table)


@requires_shared()
def test_hive_location_symlinks_from_the_corpus_merge_nothing() -> None:
    links = corpus_links("hive/cllCtasWithJoinsComplete.json")
    got = resolve_identities(links)
    t1 = DatasetId("hive://localhost:9083", "test.t1")
    assert got[t1] == Resolution(
        t1,
        (),
        (Symlink(DatasetId("file", "/opt/hive/data/warehouse/test.db/t1"), "LOCATION"),),
        False,
    )
    assert all(r.canonical == k for k, r in got.items())


# -- properties: order, duplication and split do not matter ----------------------------------------
# (docs/architecture.md#order-independence)

IDS = st.builds(DatasetId, st.sampled_from(["a", "b"]), st.sampled_from(["1", "2", "3", "4"]))
LINKS = st.lists(
    st.builds(Link, IDS, IDS, st.sampled_from(["TABLE", "TABLE", "RENAME", "LOCATION", "VIEW"])),
    max_size=10,
)


@given(LINKS, st.randoms(use_true_random=False))
def test_order_and_duplicates_do_not_matter(links: list[Link], rnd: random.Random) -> None:
    shuffled = links + links[: len(links) // 2]
    rnd.shuffle(shuffled)
    assert resolve_identities(shuffled) == resolve_identities(links)


@given(LINKS, st.randoms(use_true_random=False))
def test_recomputing_touched_groups_per_batch_equals_the_whole(
    links: list[Link], rnd: random.Random
) -> None:
    # What a store does: add a batch of links, recompute only the groups they touch.
    seen: list[Link] = []
    state: dict[DatasetId, Resolution] = {}
    remaining = list(links)
    while remaining:
        size = rnd.randint(1, 3)
        batch, remaining = remaining[:size], remaining[size:]
        seen += batch
        neighbours = neighbours_of(seen)
        done: set[DatasetId] = set()
        for link in batch:
            for start in (link.a, link.b) if link.kind in ("TABLE", "RENAME") else (link.a,):
                if start not in done:
                    group = resolve_group(start, neighbours)
                    done |= group.keys()
                    state.update(group)
    assert state == resolve_identities(links)


@given(LINKS)
def test_every_identity_resolves_within_its_group(links: list[Link]) -> None:
    got = resolve_identities(links)
    for link in links:
        assert link.a in got
        if link.kind in ("TABLE", "RENAME"):
            assert got[link.a].canonical == got[link.b].canonical
    for identity, resolution in got.items():
        members = {resolution.canonical, *resolution.aliases}
        assert identity in members and len(members) == len(resolution.aliases) + 1
        assert got[resolution.canonical].canonical == resolution.canonical
        node = (resolution.canonical, resolution.aliases, resolution.locations)
        assert all((got[m].canonical, got[m].aliases, got[m].locations) == node for m in members)
        if not got[resolution.canonical].renamed:
            assert resolution.canonical == min(m for m in members if not got[m].renamed)
