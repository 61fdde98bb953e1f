"""SQL-derived column lineage through the receiver, the store and the read API, on both
backends (docs/projection.md#column-lineage-derived-from-sql;
docs/queries.md#column-lineage-and-impact, ``derived``).

The events are the Hive integration's own (tests/projector/sql_events/): a START whose
output carries no columnLineage facet, only the job's SQL, and the COMPLETE of the same
run that declares the lineage. They are posted in either order, as one delivery or two,
and projected with ``Projector.run_until_caught_up``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from embrasure.projector.worker import Projector

from conftest import make_client

EVENTS = Path(__file__).parents[1] / "projector" / "sql_events"
HIVE = "hive://localhost:9083"
JOB = "job:default:createtable_as_select.test.xxx"


def load(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event


START = load("cllCtasWithJoinsStart.json")
COMPLETE = load("cllCtasWithJoinsComplete.json")


def post(client: TestClient, *events: dict[str, Any]) -> str:
    r = client.post(
        "/api/v1/lineage/batch",
        content=orjson.dumps(list(events)),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 202, r.text
    return str(r.json()["delivery_id"])


def project(client: TestClient) -> None:
    Projector(client.app.state.store).run_until_caught_up()  # type: ignore[attr-defined]


def get(client: TestClient, path: str, **params: Any) -> Any:
    r = client.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def upstream(client: TestClient, field: str) -> dict[tuple[str, str], dict[str, Any]]:
    doc = get(
        client,
        "/api/v1/column-lineage",
        namespace=HIVE,
        name="test.xxx",
        field=field,
        direction="upstream",
        depth=1,
    )
    return {(e["source"], e["target"]): e for e in doc["edges"] if e["kind"] == "mapping"}


def field_id(name: str, field: str) -> str:
    return f"field:{HIVE}:{name}:{field}"


def test_sql_only_gives_derived_edges(client: TestClient) -> None:
    delivery = post(client, START)
    project(client)
    view = get(client, f"/api/v1/deliveries/{delivery}")
    assert view["state"] == "projected"
    assert view["items"][0]["warnings"] == []
    for source, field in ((field_id("test.t1", "id"), "id"), (field_id("test.t2", "name"), "name")):
        e = upstream(client, field)[(source, field_id("test.xxx", field))]
        assert e["derived"] == "sql"
        assert (e["class"], e["masked"], e["indirect"], e["job"]) == ("expression", False, [], JOB)
    # The derived fields are fields of the graph, found by search like declared ones.
    ids = {r["node"]["id"] for r in get(client, "/api/v1/search", q="name")["results"]}
    assert field_id("test.xxx", "name") in ids


@pytest.mark.parametrize("order", ["start-first", "complete-first", "one-delivery"])
def test_declared_lineage_wins_in_any_order(client: TestClient, order: str) -> None:
    if order == "one-delivery":
        post(client, START, COMPLETE)
    else:
        first, second = (START, COMPLETE) if order == "start-first" else (COMPLETE, START)
        post(client, first)
        project(client)  # the second event meets stored rows, not just the batch
        post(client, second)
    project(client)

    name = upstream(client, "name")[(field_id("test.t2", "name"), field_id("test.xxx", "name"))]
    assert "derived" not in name
    assert name["class"] == "direct"  # the Hive hook's DIRECT/IDENTITY, not the parser's guess
    ident = upstream(client, "id")[(field_id("test.t1", "id"), field_id("test.xxx", "id"))]
    assert "derived" not in ident
    assert (ident["class"], sorted(ident["indirect"])) == ("expression", ["FILTER", "JOIN"])

    export = get(client, "/api/v1/export")
    assert not [e for e in export["column_edges"] if e.get("derived")]


def test_unparseable_sql_is_a_warning_on_the_item(client: TestClient) -> None:
    broken = json.loads(json.dumps(START))
    broken["job"]["facets"]["sql"]["query"] = "CREATE TABLE xxx AS SELEC id FROM t1"
    delivery = post(client, broken)
    project(client)
    view = get(client, f"/api/v1/deliveries/{delivery}")
    assert view["state"] == "projected"
    (item,) = view["items"]
    assert item["outcome"] == "projected"
    assert item["warnings"] == [
        "SQL column lineage not derived: the query cannot be parsed as hive SQL: "
        "Expected: SELECT, VALUES, or a subquery in the query body, found: SELEC at Line: 1, "
        "Column: 21"
    ]
    # Dataset lineage is there all the same; column lineage is not: with no schema facet
    # and nothing derived, the output's fields were never named (a 404, not an empty graph).
    lineage = get(client, "/api/v1/lineage", type="dataset", namespace=HIVE, name="test.xxx")
    assert f"dataset:{HIVE}:test.t1" in {n["id"] for n in lineage["nodes"]}
    params = {"namespace": HIVE, "name": "test.xxx", "field": "id"}
    r = client.get("/api/v1/column-lineage", params=params)
    assert r.status_code == 404
    assert r.json()["type"] == "https://embrasure.dev/problems/field-not-found"


def test_every_order_exports_the_same_graph(fresh_db: Callable[[], str]) -> None:
    """docs/architecture.md#order-independence with derived lineage: START (SQL only),
    COMPLETE (declared) and another run's START, each its own delivery, in every order: the
    same export byte for byte."""
    other_run = json.loads(json.dumps(START))
    other_run["run"]["runId"] = "0194f5d2-6b1a-7c3e-8d4f-5a6b7c8d9e99"
    other_run["eventTime"] = "2026-11-30T10:00:00.000Z"
    exports = set()
    for order in itertools.permutations([START, COMPLETE, other_run]):
        with make_client(fresh_db()) as client:
            for event in order:
                post(client, event)
                project(client)
            r = client.get("/api/v1/export")
            assert r.status_code == 200
            exports.add(r.content)
            client.app.state.store.close()  # type: ignore[attr-defined]
    (export,) = exports
    column_edges = orjson.loads(export)["column_edges"]
    assert column_edges and not [e for e in column_edges if e.get("derived")]
