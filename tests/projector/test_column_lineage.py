"""Column lineage facts from ColumnLineageDatasetFacet, and the column edge merge
(docs/projection.md#column-lineage)."""

from __future__ import annotations

import copy
import dataclasses
import json
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from embrasure.model import ColumnFact, DatasetFacts, DatasetId, JobId, Symlink
from embrasure.projector.column_lineage import (
    ColumnEdge,
    ColumnEdgeKey,
    edge_of,
    extract,
    indirect_subtypes,
    merge_edges,
)

from conftest import OPENLINEAGE, requires_shared

SRC = DatasetId("food_delivery", "public.delivery_7_days")
DST = DatasetId("food_delivery", "public.top_delivery_times")
JOB = JobId("food_delivery", "etl_top_delivery_times")


def dataset(raw: dict[str, Any], role: str) -> DatasetFacts:
    """Enough of validation for these tests: identity, facets and symlinks of a dataset."""
    facets = raw.get("facets") or {}
    identifiers = (facets.get("symlinks") or {}).get("identifiers", [])
    symlinks = tuple(
        Symlink(DatasetId(i.get("namespace", ""), i["name"]), i["type"]) for i in identifiers
    )
    return DatasetFacts(DatasetId(raw["namespace"], raw["name"]), role, facets, {}, symlinks)


def field(
    name: str, *transformations: tuple[str, str | None, bool], of: DatasetId = SRC
) -> dict[str, Any]:
    entry: dict[str, Any] = {"namespace": of.namespace, "name": of.name, "field": name}
    if transformations:
        entry["transformations"] = [
            {
                "type": t,
                **({"subtype": s} if s is not None else {}),
                "description": "",
                "masking": m,
            }
            for t, s, m in transformations
        ]
    return entry


def event(
    fields: dict[str, Any], dataset_level: list[Any] | None = None, **extra: Any
) -> tuple[list[DatasetFacts], list[DatasetFacts]]:
    facet: dict[str, Any] = {"fields": fields, **extra}
    if dataset_level is not None:
        facet["dataset"] = dataset_level
    out = DatasetFacts(DST, "output", {"columnLineage": facet}, {})
    return [out], [DatasetFacts(SRC, "input", {}, {})]


def one(fields: dict[str, Any], **extra: Any) -> ColumnFact:
    facts, warnings = extract(*event(fields, **extra))
    assert warnings == ()
    (fact,) = facts
    return fact


def shape(fact: ColumnFact) -> tuple[str, str | None, bool, tuple[str, ...]]:
    return (fact.kind, fact.klass, fact.masked, fact.subtypes)


DI, DT, DA = (
    ("DIRECT", "IDENTITY", False),
    ("DIRECT", "TRANSFORMATION", False),
    ("DIRECT", "AGGREGATION", False),
)


@pytest.mark.parametrize(
    ("transformations", "expected"),
    [
        ([DI], ("mapping", "direct", False, ("DIRECT/IDENTITY",))),
        ([DT], ("mapping", "expression", False, ("DIRECT/TRANSFORMATION",))),
        ([DA], ("mapping", "aggregate", False, ("DIRECT/AGGREGATION",))),
        ([DI, DT], ("mapping", "expression", False, ("DIRECT/IDENTITY", "DIRECT/TRANSFORMATION"))),
        ([DA, DI], ("mapping", "aggregate", False, ("DIRECT/AGGREGATION", "DIRECT/IDENTITY"))),
        (
            [DT, DA],
            ("mapping", "aggregate", False, ("DIRECT/AGGREGATION", "DIRECT/TRANSFORMATION")),
        ),
        (
            [("DIRECT", "TRANSFORMATION", True)],
            ("mapping", "expression", True, ("DIRECT/TRANSFORMATION",)),
        ),
        (
            [DI, ("INDIRECT", "SORT", False)],
            ("mapping", "direct", False, ("DIRECT/IDENTITY", "INDIRECT/SORT")),
        ),
        ([("INDIRECT", "JOIN", False)], ("indirect", None, False, ("INDIRECT/JOIN",))),
        (
            [("INDIRECT", "JOIN", False), ("INDIRECT", "FILTER", True)],
            ("indirect", None, True, ("INDIRECT/FILTER", "INDIRECT/JOIN")),
        ),
        ([("INDIRECT", "PIVOT", False)], ("indirect", None, False, ("INDIRECT/PIVOT",))),
        ([("INDIRECT", None, False)], ("indirect", None, False, ("INDIRECT",))),
        # Unknown type or subtype strings are kept and count as expression.
        ([("DIRECT", "HASH", False)], ("mapping", "expression", False, ("DIRECT/HASH",))),
        ([("DIRECT", None, False)], ("mapping", "expression", False, ("DIRECT",))),
        ([("MASKED", None, True)], ("mapping", "expression", True, ("MASKED",))),
        ([("direct", "identity", False)], ("mapping", "expression", False, ("direct/identity",))),
        (
            [("SEMI", "JOIN", False), DI],
            ("mapping", "expression", False, ("DIRECT/IDENTITY", "SEMI/JOIN")),
        ),
    ],
)
def test_classification(
    transformations: list[tuple[str, str | None, bool]],
    expected: tuple[str, str | None, bool, tuple[str, ...]],
) -> None:
    assert (
        shape(one({"order_id": {"inputFields": [field("order_id", *transformations)]}})) == expected
    )


def test_no_metadata_at_all_is_expression() -> None:
    # ColumnLineageDatasetFacet 1-0-0: inputFields only.
    assert shape(one({"x": {"inputFields": [field("a")]}})) == ("mapping", "expression", False, ())
    entry = {**field("a"), "transformations": []}
    assert shape(one({"x": {"inputFields": [entry]}})) == ("mapping", "expression", False, ())


@pytest.mark.parametrize(
    ("legacy", "expected"),
    [
        ("IDENTITY", ("mapping", "direct", False, ())),
        ("MASKED", ("mapping", "expression", True, ())),
        ("CAST", ("mapping", "expression", False, ())),
        ("", ("mapping", "expression", False, ())),  # empty string: no metadata
    ],
)
def test_legacy_transformation_type(
    legacy: str, expected: tuple[str, str | None, bool, tuple[str, ...]]
) -> None:
    # ColumnLineageDatasetFacet 1-0-1: per output field, deprecated since 1-1-0.
    spec = {
        "inputFields": [field("a")],
        "transformationType": legacy,
        "transformationDescription": "",
    }
    assert shape(one({"x": spec})) == expected


def test_transformations_take_precedence_over_the_legacy_type() -> None:
    spec = {"inputFields": [field("a", DA)], "transformationType": "IDENTITY"}
    assert shape(one({"x": spec})) == ("mapping", "aggregate", False, ("DIRECT/AGGREGATION",))


def test_dataset_level_entries_are_indirect_dependencies_of_every_output_field() -> None:
    outputs, inputs = event(
        {"a": {"inputFields": [field("a", DI)]}, "b": {"inputFields": []}},
        dataset_level=[field("region", ("INDIRECT", "FILTER", False)), field("day", DI)],
    )
    schema = {"fields": [{"name": "a"}, {"name": "n_orders"}, {"name": 7}, {"name": ""}]}
    outputs = [DatasetFacts(DST, "output", {**outputs[0].facets, "schema": schema}, {})]
    facts, warnings = extract(outputs, inputs)
    assert warnings == ()
    got = {(f.source_field, f.target_field): shape(f) for f in facts}
    for target in ("a", "b", "n_orders"):  # fields keys and the schema's top-level fields
        assert got["region", target] == ("indirect", None, False, ("INDIRECT/FILTER",))
        # The facet says these affect "the whole dataset": indirect whatever their type.
        assert got["day", target] == ("indirect", None, False, ("DIRECT/IDENTITY",))
    assert got["a", "a"] == ("mapping", "direct", False, ("DIRECT/IDENTITY",))
    assert len(got) == 7


def test_dataset_level_entries_without_output_fields_are_a_warning() -> None:
    facts, warnings = extract(
        *event({}, dataset_level=[field("region", ("INDIRECT", "FILTER", False))])
    )
    assert facts == ()
    assert warnings == (
        "columnLineage of food_delivery:public.top_delivery_times: dataset-level dependencies "
        "were ignored: the output names no fields",
    )


def test_duplicates_within_an_event_merge_monotonically() -> None:
    fields = {
        "x": {
            "inputFields": [
                field("a", ("INDIRECT", "JOIN", False)),
                field("a", DT),
                field("a", ("DIRECT", "AGGREGATION", True)),
                field("a", DI),
            ]
        }
    }
    assert shape(one(fields, dataset_level=[field("a", ("INDIRECT", "SORT", False))])) == (
        "mapping",
        "aggregate",
        True,
        (
            "DIRECT/AGGREGATION",
            "DIRECT/IDENTITY",
            "DIRECT/TRANSFORMATION",
            "INDIRECT/JOIN",
            "INDIRECT/SORT",
        ),
    )


def test_unmatched_input_datasets_are_ignored_with_one_warning_each() -> None:
    other = DatasetId("food_delivery", "public.customers")
    facts, warnings = extract(
        *event(
            {
                "x": {"inputFields": [field("a", of=other), field("b", DI)]},
                "y": {"inputFields": [field("c", of=other)]},
            }
        )
    )
    assert [(f.source_field, f.target_field) for f in facts] == [("b", "x")]
    assert warnings == (
        "columnLineage of food_delivery:public.top_delivery_times: input dataset "
        "food_delivery:public.customers is not among the event's inputs; ignored for 2 field(s)",
    )


def test_empty_and_malformed_names_are_ignored_with_warnings() -> None:
    facts, warnings = extract(
        *event(
            {
                "": {"inputFields": [field("a")]},
                "x": {
                    "inputFields": [field(""), {"namespace": "n", "name": "m"}, "a", field("ok")]
                },
            }
        )
    )
    assert [(f.source_field, f.target_field) for f in facts] == [("ok", "x")]
    where = "columnLineage of food_delivery:public.top_delivery_times: "
    empty = "an input field of food_delivery:public.delivery_7_days with an empty field name"
    assert warnings == (
        f"{where}{empty} was ignored",
        f"{where}an input field that is not an object was ignored",
        f"{where}an input field without namespace, name and field was ignored",
        f"{where}an output field with an empty name was ignored",
    )


def test_a_table_symlink_of_an_input_matches_and_a_location_does_not() -> None:
    glue = DatasetId("arn:aws:glue:eu-west-1:1", "table/food/delivery_7_days")
    path = DatasetId("s3://bucket", "delivery_7_days")
    src = DatasetFacts(SRC, "input", {}, {}, (Symlink(glue, "TABLE"), Symlink(path, "LOCATION")))
    outputs, _ = event({"x": {"inputFields": [field("a", of=glue), field("b", of=path)]}})
    facts, warnings = extract(outputs, [src])
    # The fact names the input as the event names it; the store resolves aliases.
    assert [(f.source, f.source_field) for f in facts] == [(SRC, "a")]
    assert len(warnings) == 1 and "s3://bucket:delivery_7_days is not among" in warnings[0]


def test_resolve_input_matches_aliases_learned_elsewhere() -> None:
    known = DatasetId("warehouse", "delivery_7_days")
    canonical = {known: SRC, SRC: SRC}
    outputs, inputs = event({"x": {"inputFields": [field("a", of=known)]}})
    assert extract(outputs, inputs)[0] == ()
    facts, warnings = extract(outputs, inputs, canonical.get)
    assert [(f.source, f.source_field) for f in facts] == [(SRC, "a")] and warnings == ()


def test_a_deletion_marker_or_a_broken_facet_yields_nothing() -> None:
    facets: list[Any] = [{"_deleted": True}, {"fields": []}, {"fields": {"x": "a"}}, "x"]
    for facet in facets:
        out = DatasetFacts(DST, "output", {"columnLineage": facet}, {})
        assert extract([out], [DatasetFacts(SRC, "input", {}, {})]) == ((), ())


# -- the corpus --------------------------------------------------------------------------------


def load(relative: str) -> Any:
    return json.loads((OPENLINEAGE / "events" / relative).read_text())


def extract_event(raw: dict[str, Any]) -> tuple[tuple[ColumnFact, ...], tuple[str, ...]]:
    outputs = [dataset(d, "output") for d in raw.get("outputs", [])]
    return extract(outputs, [dataset(d, "input") for d in raw.get("inputs", [])])


@requires_shared()
def test_airflow_legacy_postgres_names_an_input_the_event_does_not_list() -> None:
    # openlineage-airflow's Postgres extractor (1-0-1 shape, transformationType ""): its
    # input fields name "public.top_delivery_times" but the input is
    # "food_delivery.public.top_delivery_times". Never guessed: ignored, with a warning.
    (raw,) = [
        e
        for e in load("airflow-legacy/postgres.json")
        if e.get("outputs") and "columnLineage" in e["outputs"][0].get("facets", {})
    ]
    facts, warnings = extract_event(raw)
    assert facts == ()
    assert warnings == (
        "columnLineage of postgres://postgres:5432:"
        "food_delivery.public.popular_orders_day_of_week: input dataset "
        "postgres://postgres:5432:public.top_delivery_times is not among the event's inputs; "
        "ignored for 2 field(s)",
    )
    # Named as listed, the same facet gives expression mappings (empty legacy type).
    raw = copy.deepcopy(raw)
    raw["inputs"][0]["name"] = "public.top_delivery_times"
    facts, warnings = extract_event(raw)
    assert warnings == () and {shape(f) for f in facts} == {("mapping", "expression", False, ())}


@requires_shared()
def test_hive_masking_fixture() -> None:
    facts, warnings = extract_event(load("hive/cllSimpleQueryMaskingComplete.json"))
    assert warnings == ()
    got = {(f.source_field, f.target_field): shape(f) for f in facts}
    assert got == {
        ("a", "i"): ("mapping", "direct", False, ("DIRECT/IDENTITY", "INDIRECT/GROUP_BY")),
        ("a", "t"): (
            "mapping",
            "expression",
            False,
            ("DIRECT/TRANSFORMATION", "INDIRECT/GROUP_BY"),
        ),
        ("a", "mt"): (
            "mapping",
            "expression",
            True,
            ("DIRECT/TRANSFORMATION", "INDIRECT/GROUP_BY"),
        ),
        ("b", "a"): ("mapping", "aggregate", False, ("DIRECT/AGGREGATION",)),
        ("b", "ma"): ("mapping", "aggregate", True, ("DIRECT/AGGREGATION",)),
        ("a", "a"): ("indirect", None, False, ("INDIRECT/GROUP_BY",)),
        ("a", "ma"): ("indirect", None, False, ("INDIRECT/GROUP_BY",)),
    }


@requires_shared()
def test_spark_mapping_that_carries_indirect_entries() -> None:
    facts, warnings = extract_event(load("spark/container/pysparkCLLEnd.json"))
    assert warnings == ()
    by = {(f.source.name.rsplit("/", 1)[1], f.source_field, f.target_field): f for f in facts}
    ident = by["cll_source1", "a", "ident"]
    assert shape(ident)[:2] == ("mapping", "direct")
    assert indirect_subtypes(ident.subtypes) == ("FILTER", "GROUP_BY", "JOIN")
    assert shape(by["cll_source2", "a", "ident"])[:2] == ("indirect", None)


def corpus_files() -> list[Path]:
    """Hive and Spark fixtures with column lineage and inputs. The "partial" ones (corpus
    README) are subset matchers, and some expected-event templates leave the inputs out:
    with no inputs to match, every input field would rightly be a warning."""
    manifest = json.loads((OPENLINEAGE / "events/MANIFEST.json").read_text())
    return sorted(
        OPENLINEAGE / entry["file"]
        for entry in manifest["files"]
        if entry["source"] in ("hive", "spark")
        and entry["kind"] != "partial"
        and any(key.endswith(":columnLineage") for key in entry.get("facets", {}))
    )


@requires_shared()
def test_every_hive_and_spark_fixture_extracts_without_warnings() -> None:
    files = corpus_files()
    assert len(files) >= 25
    for path in files:
        raw = json.loads(path.read_text())
        if not raw.get("inputs"):
            continue
        facts, warnings = extract_event(raw)
        assert warnings == (), path.name
        assert facts, path.name
        assert all(f.kind == "indirect" or f.klass is not None for f in facts)


# -- merge across events -----------------------------------------------------------------------


def fact(
    kind: str,
    klass: str | None,
    masked: bool = False,
    subtypes: tuple[str, ...] = (),
    derived: str | None = None,
) -> ColumnFact:
    return ColumnFact(DST, "x", SRC, "a", kind, klass, masked, subtypes, derived)


def merge_column_facts(
    facts: Iterable[tuple[JobId | None, ColumnFact]],
    resolve: Callable[[DatasetId], DatasetId] | None = None,
) -> dict[ColumnEdgeKey, ColumnEdge]:
    """One edge per (source field, target field, job): the facts folded with edge_of and
    merge_edges, as the store folds them, in key order (None jobs first).

    ``resolve`` maps a dataset identity to its canonical one, so facts naming aliases land
    on the node's edge, as the read side resolves them."""
    edges: dict[ColumnEdgeKey, ColumnEdge] = {}
    for job, fact in facts:
        if resolve is not None:
            fact = dataclasses.replace(
                fact, source=resolve(fact.source), target=resolve(fact.target)
            )
        edge = edge_of(job, fact)
        old = edges.get(edge.key)
        edges[edge.key] = edge if old is None else merge_edges(old, edge)
    # JobId and None do not compare: the flag sorts None first.
    return dict(
        sorted(edges.items(), key=lambda kv: (*kv[0][:4], kv[0].job is not None, kv[0].job))
    )


def test_merge_is_the_strongest_class_any_masking_and_all_subtypes() -> None:
    edges = merge_column_facts(
        [
            (JOB, fact("mapping", "direct", subtypes=("DIRECT/IDENTITY",))),
            (JOB, fact("indirect", None, True, ("INDIRECT/JOIN",))),
            (JOB, fact("mapping", "aggregate", subtypes=("DIRECT/AGGREGATION",))),
            (JOB, fact("mapping", "expression")),
        ]
    )
    assert list(edges.values()) == [
        ColumnEdge(
            SRC,
            "a",
            DST,
            "x",
            JOB,
            "mapping",
            "aggregate",
            True,
            ("DIRECT/AGGREGATION", "DIRECT/IDENTITY", "INDIRECT/JOIN"),
        ),
    ]
    assert edges[ColumnEdgeKey(SRC, "a", DST, "x", JOB)].indirect == ("JOIN",)


def test_one_edge_per_job() -> None:
    other = JobId("food_delivery", "backfill")
    edges = merge_column_facts(
        [
            (JOB, fact("mapping", "direct")),
            (other, fact("indirect", None)),
            (None, fact("mapping", "direct")),
        ]
    )
    assert [k.job for k in edges] == [None, other, JOB]


def test_a_declared_fact_beats_sql_derived_ones() -> None:
    derived = fact("mapping", "aggregate", True, ("DIRECT/AGGREGATION",), derived="sql")
    declared = fact("indirect", None, False, ("INDIRECT/FILTER",))
    for facts in ([derived, declared], [declared, derived]):
        (edge,) = merge_column_facts((JOB, f) for f in facts).values()
        assert (edge.kind, edge.klass, edge.masked, edge.derived) == ("indirect", None, False, None)
    (edge,) = merge_column_facts(
        [(JOB, derived), (JOB, fact("mapping", "direct", derived="sql"))]
    ).values()
    assert (edge.klass, edge.masked, edge.derived) == ("aggregate", True, "sql")


def test_merge_resolves_aliases_onto_one_edge() -> None:
    alias = DatasetId("warehouse", "delivery_7_days")
    facts = [
        (JOB, fact("mapping", "direct")),
        (JOB, ColumnFact(DST, "x", alias, "a", "mapping", "aggregate", False, ())),
    ]
    resolve = {alias: SRC}
    (edge,) = merge_column_facts(facts, lambda d: resolve.get(d, d)).values()
    assert edge.klass == "aggregate"


def test_a_mapping_without_a_known_class_counts_as_expression() -> None:
    for klass in (None, "parsed"):
        assert edge_of(JOB, fact("mapping", klass, derived="sql")).klass == "expression"
    assert edge_of(JOB, fact("indirect", "direct")).klass is None


def test_merging_different_edges_is_an_error() -> None:
    a = edge_of(JOB, fact("mapping", "direct"))
    with pytest.raises(ValueError, match="different column edges"):
        merge_edges(a, edge_of(None, fact("mapping", "direct")))


# -- properties: order, duplication and split do not matter ----------------------------------------
# (docs/architecture.md#order-independence)

SUBTYPES = st.sampled_from(["DIRECT/IDENTITY", "INDIRECT/JOIN", "INDIRECT/SORT", "MASKED"])
FACTS = st.lists(
    st.tuples(
        st.sampled_from([JOB, None]),
        st.builds(
            lambda t, s, kind, klass, masked, subs, derived: ColumnFact(
                DST, t, SRC, s, kind, klass if kind == "mapping" else None, masked, subs, derived
            ),
            st.sampled_from(["x", "y"]),
            st.sampled_from(["a", "b"]),
            st.sampled_from(["mapping", "indirect"]),
            st.sampled_from(["direct", "expression", "aggregate"]),
            st.booleans(),
            st.lists(SUBTYPES, max_size=2, unique=True).map(tuple),
            st.sampled_from([None, None, "sql"]),
        ),
    ),
    max_size=12,
)


@given(FACTS, st.randoms(use_true_random=False))
def test_merge_order_and_duplicates_do_not_matter(
    facts: list[tuple[JobId | None, ColumnFact]], rnd: random.Random
) -> None:
    shuffled = facts + facts[: len(facts) // 2]
    rnd.shuffle(shuffled)
    assert merge_column_facts(shuffled) == merge_column_facts(facts)
    assert list(merge_column_facts(shuffled)) == list(merge_column_facts(facts))


@given(FACTS, st.randoms(use_true_random=False))
def test_merging_the_parts_of_any_split_equals_the_whole(
    facts: list[tuple[JobId | None, ColumnFact]], rnd: random.Random
) -> None:
    parts: list[list[tuple[JobId | None, ColumnFact]]] = [[], [], []]
    for item in facts:
        parts[rnd.randrange(3)].append(item)
    merged: dict[ColumnEdgeKey, ColumnEdge] = {}
    for part in parts:
        for key, edge in merge_column_facts(part).items():
            merged[key] = merge_edges(merged[key], edge) if key in merged else edge
    assert merged == merge_column_facts(facts)


@given(FACTS)
def test_merge_edges_is_a_semilattice(facts: list[tuple[JobId | None, ColumnFact]]) -> None:
    edges = [edge_of(JOB, f) for _, f in facts if f.target_field == "x" and f.source_field == "a"]
    for a in edges:
        assert merge_edges(a, a) == a
        for b in edges:
            assert merge_edges(a, b) == merge_edges(b, a)
            for c in edges[:3]:
                assert merge_edges(merge_edges(a, b), c) == merge_edges(a, merge_edges(b, c))


TRANSFORMATION = st.fixed_dictionaries(
    {"type": st.sampled_from(["DIRECT", "INDIRECT", "OTHER"])},
    optional={
        "subtype": st.sampled_from(["IDENTITY", "TRANSFORMATION", "AGGREGATION", "JOIN", "X"]),
        "masking": st.booleans(),
    },
)
INPUT_FIELD = st.fixed_dictionaries(
    {
        "namespace": st.just("n"),
        "name": st.sampled_from(["i1", "i2", "alias", "missing"]),
        "field": st.sampled_from(["a", "b", ""]),
    },
    optional={"transformations": st.lists(TRANSFORMATION, max_size=3)},
)
FACET = st.fixed_dictionaries(
    {
        "fields": st.dictionaries(
            st.sampled_from(["x", "y", ""]),
            st.fixed_dictionaries(
                {"inputFields": st.lists(INPUT_FIELD, max_size=3)},
                optional={"transformationType": st.sampled_from(["", "IDENTITY", "MASKED"])},
            ),
            max_size=2,
        )
    },
    optional={"dataset": st.lists(INPUT_FIELD, max_size=2)},
)


def shuffled_facet(facet: dict[str, Any], rnd: random.Random) -> dict[str, Any]:
    """The same facet with every list shuffled and some entries repeated."""

    def jumble(items: list[Any]) -> list[Any]:
        out = items + [x for x in items if rnd.random() < 0.3]
        rnd.shuffle(out)
        return out

    facet = copy.deepcopy(facet)
    for spec in facet["fields"].values():
        spec["inputFields"] = jumble(spec["inputFields"])
        for entry in spec["inputFields"]:
            if "transformations" in entry:
                entry["transformations"] = jumble(entry["transformations"])
    if "dataset" in facet:
        facet["dataset"] = jumble(facet["dataset"])
    facet["fields"] = dict(rnd.sample(sorted(facet["fields"].items()), len(facet["fields"])))
    return facet


@given(st.lists(FACET, min_size=1, max_size=2), st.randoms(use_true_random=False))
def test_extract_ignores_order_and_repetition_inside_the_event(
    facets: list[dict[str, Any]], rnd: random.Random
) -> None:
    i1 = DatasetFacts(
        DatasetId("n", "i1"), "input", {}, {}, (Symlink(DatasetId("n", "alias"), "TABLE"),)
    )
    i2 = DatasetFacts(
        DatasetId("n", "i2"), "input", {}, {}, (Symlink(DatasetId("n", "alias"), "TABLE"),)
    )
    outputs = [
        DatasetFacts(DatasetId("o", str(k)), "output", {"columnLineage": f}, {})
        for k, f in enumerate(facets)
    ]
    expected = extract(outputs, [i1, i2])
    jumbled = [
        DatasetFacts(
            o.id, "output", {"columnLineage": shuffled_facet(o.facets["columnLineage"], rnd)}, {}
        )
        for o in outputs
    ]
    jumbled = jumbled + jumbled[:1]
    rnd.shuffle(jumbled)
    inputs = [i2, i1, i2]
    rnd.shuffle(inputs)
    assert extract(jumbled, inputs) == expected
