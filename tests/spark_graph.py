"""What the served graph must show for the openlineage-spark jobs of tests/spark_agent.py
(issue 20), read over HTTP from a live server: the live tests (the agent sending) and the
replay tests (its recorded events posted again) assert the same things.

- every event projected, none quarantined;
- the application run COMPLETE, no parent, the parent of every query run;
- a spark_catalog table's path and its TABLE symlink one node;
- column lineage classes: direct (CSV → parquet), aggregate (the totals), expression (the
  INSERT's computed columns), and INDIRECT dependencies (JOIN, GROUP_BY, FILTER);
- the failed query: state FAIL, its error text in the agent's `spark.exception` facet;
- outputStatistics where Spark sends them, served as the write's statistics.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx
import orjson

from embrasure.query.entities import node_id

from spark_agent import FAIL_MESSAGE, NAMESPACE, PROVIDER_KEY, Layout

FILE = "file"
UNPARSED_DDL = (
    "SQL column lineage not derived: the query cannot be parsed as databricks SQL: "
    "Expected: end of statement, found: USING at Line: 1, Column: 80"
)
EXCEPTION = "spark.exception"  # the agent's run facet for a failed query
Event = dict[str, Any]


def _get(http: httpx.Client, path: str, **params: str) -> Any:
    reply = http.get(path, params=params)
    assert reply.status_code == 200, (path, params, reply.text)
    return reply.json()


def _job_type(event: Event) -> str | None:
    facet = (event.get("job", {}).get("facets") or {}).get("jobType") or {}
    value = facet.get("jobType")
    return value if isinstance(value, str) else None


def _parent_run(event: Event) -> str | None:
    parent = (event.get("run", {}).get("facets") or {}).get("parent") or {}
    run_id = (parent.get("run") or {}).get("runId")
    return run_id if isinstance(run_id, str) else None


def application_run(events: list[Event]) -> str:
    (app,) = {str(e["run"]["runId"]) for e in events if _job_type(e) == "APPLICATION"}
    return app


def runs_writing(events: Iterable[Event], name: str) -> set[str]:
    return {
        e["run"]["runId"]
        for e in events
        if any(o.get("namespace") == FILE and o.get("name") == name for o in e.get("outputs", []))
    }


def check_no_quarantine(http: httpx.Client, events: list[Event]) -> None:
    overview = _get(http, "/api/v1/overview")
    assert overview["backlog"] == {"deliveries": 0, "items": 0}, overview
    assert overview["items"].get("quarantined", 0) == 0, _get(http, "/api/v1/quarantine")
    assert overview["items"]["projected"] == overview["items"]["received"], overview
    assert overview["items"]["projected"] >= len(events), overview
    # The one warning: the CREATE TABLE's `sql` facet (no columnLineage on that output, so
    # Embrasure tries to derive it) is Spark SQL openlineage-sql 1.54.0 cannot parse
    # (`USING parquet`); its START and COMPLETE each say so. Nothing is dropped.
    warnings = delivery_warnings(http, PROVIDER_KEY)
    assert set(warnings) <= {UNPARSED_DDL} and len(warnings) <= 2, warnings


def delivery_warnings(http: httpx.Client, provider_key: str) -> list[str]:
    """Every warning on the provider's deliveries' items (a dropped facet, an ignored
    column-lineage input…), as served."""
    out: list[str] = []
    cursor: str | None = None
    while True:
        params = {"provider_key": provider_key, "limit": "1000"}
        page = _get(http, "/api/v1/deliveries", **params, **({"cursor": cursor} if cursor else {}))
        for delivery in page["deliveries"]:
            view = _get(http, f"/api/v1/deliveries/{delivery['delivery_id']}")
            out.extend(w for item in view["items"] for w in item["warnings"])
        cursor = page["next_cursor"]
        if cursor is None:
            return out


def check_hierarchy(http: httpx.Client, events: list[Event]) -> None:
    app = application_run(events)
    view = _get(http, f"/api/v1/runs/{app}")
    assert (view["state"], view["parent"]) == ("COMPLETE", None), view
    queries = sorted({e["run"]["runId"] for e in events if _parent_run(e) == app})
    assert len(queries) >= 4, queries  # at least one per job; the CREATE TABLE adds one
    assert view["children"] == queries
    app_job = view["job"]
    for run_id in queries:
        child = _get(http, f"/api/v1/runs/{run_id}")
        assert child["parent"]["runId"] == app, child["parent"]
        assert child["parent"]["job"] == app_job
        (job,) = _get(http, "/api/v1/jobs", **child["job"])["jobs"]
        assert job["parent_job"] == app_job, job
        assert child["job"]["namespace"] == NAMESPACE


def check_symlinked_table(http: httpx.Client, events: list[Event], layout: Layout) -> None:
    for table in ("customer_totals", "order_facts"):
        path = layout.table(table)
        aliases = {
            (i["namespace"], i["name"])
            for e in events
            for o in e.get("outputs", [])
            if (o.get("namespace"), o.get("name")) == (FILE, path)
            for i in ((o.get("facets") or {}).get("symlinks") or {}).get("identifiers", [])
            if i.get("type") == "TABLE"
        }
        assert aliases, f"no TABLE symlink sent for {path}"
        for namespace, name in aliases:
            assert name.endswith(table), name
            (node,) = _get(http, "/api/v1/datasets", namespace=namespace, name=name)["datasets"]
            # One node: the path (the smaller identity) canonical, the table its alias.
            assert (node["namespace"], node["name"]) == (FILE, path), node
            assert {"namespace": namespace, "name": name, "renamed": False} in node["aliases"]
            lineage = _get(
                http, "/api/v1/lineage", namespace=namespace, name=name, direction="upstream",
                depth="1",
            )  # fmt: skip
            # The walk names the node as asked (docs/queries.md#conventions).
            assert lineage["root"] == node_id("dataset", namespace, name), lineage["root"]
            assert lineage["edges"], f"no writer of {path} in the graph"


def column_edges(
    http: httpx.Client, name: str, field: str
) -> dict[tuple[str, str], dict[str, Any]]:
    """The upstream column edges of (file, name).field, by (source dataset, source field)."""
    answer = _get(
        http, "/api/v1/column-lineage", namespace=FILE, name=name, field=field,
        direction="upstream", depth="1",
    )  # fmt: skip
    nodes = {n["id"]: n for n in answer["nodes"]}
    out = {}
    for edge in answer["edges"]:
        assert edge["target"] == node_id("field", FILE, name, field), edge
        source = nodes[edge["source"]]
        out[(source["name"], source["field"])] = edge
    return out


def _mapping(edges: dict[tuple[str, str], dict[str, Any]], key: tuple[str, str]) -> str:
    assert key in edges, (key, sorted(edges))
    assert edges[key]["kind"] == "mapping", edges[key]
    return str(edges[key]["class"])


def _indirect(edges: dict[tuple[str, str], dict[str, Any]]) -> set[str]:
    return {s for e in edges.values() for s in e.get("indirect") or []}


def check_column_lineage(http: httpx.Client, layout: Layout) -> None:
    # CSV → parquet: every column as it was.
    for column in ("order_id", "customer_id", "amount", "status"):
        edges = column_edges(http, layout.lake_orders, column)
        assert _mapping(edges, (layout.raw_orders, column)) == "direct", edges
    # The join and aggregation.
    totals = layout.table("customer_totals")
    edges = column_edges(http, totals, "total_amount")
    assert _mapping(edges, (layout.lake_orders, "amount")) == "aggregate", edges
    indirect = _indirect(edges)
    assert {"JOIN", "GROUP_BY"} <= indirect, edges
    edges = column_edges(http, totals, "country")
    assert _mapping(edges, (layout.raw_customers, "country")) == "direct", edges
    edges = column_edges(http, totals, "order_count")
    assert _mapping(edges, (layout.lake_orders, "order_id")) == "aggregate", edges
    # INSERT … SELECT: computed columns are expressions; the WHERE an indirect FILTER.
    facts = layout.table("order_facts")
    assert _mapping(column_edges(http, facts, "order_id"), (layout.lake_orders, "order_id")) == (
        "direct"
    )
    edges = column_edges(http, facts, "amount_eur")
    assert _mapping(edges, (layout.lake_orders, "amount")) == "expression", edges
    assert "FILTER" in _indirect(edges), edges
    edges = column_edges(http, facts, "status_code")
    assert _mapping(edges, (layout.lake_orders, "status")) == "expression", edges


def check_failure_sent(http: httpx.Client, events: list[Event], layout: Layout) -> None:
    """What the agent sends for the failed write: a FAIL whose `spark.exception` run facet
    holds the stack trace (no `errorMessage` facet), then, milliseconds later, another
    event for the same run: a COMPLETE (the SQL execution's end) in the recording, a
    RUNNING in some live runs. All stored."""
    (failed,) = runs_writing(events, layout.rejected)
    sent = [e for e in events if e["run"]["runId"] == failed]
    states = [e["eventType"] for e in sent]
    assert states[0] == "START" and states.count("FAIL") == 1, states
    assert set(states[states.index("FAIL") + 1 :]) <= {"RUNNING", "COMPLETE"}, states
    (fail,) = [e for e in sent if e["eventType"] == "FAIL"]
    trace = fail["run"]["facets"][EXCEPTION]["stackTrace"]
    assert FAIL_MESSAGE in trace.splitlines()[0], trace[:300]
    assert all("errorMessage" not in (e["run"].get("facets") or {}) for e in sent)
    view = _get(http, f"/api/v1/runs/{failed}")
    assert EXCEPTION in view["facets"]  # the trace is kept, as sent
    # The FAIL outranks the later COMPLETE (docs/projection.md#runs, graph version 13).
    assert (view["state"], view["ended_at"]) == ("FAIL", fail["eventTime"]), view


def check_failure_served(http: httpx.Client, events: list[Event], layout: Layout) -> None:
    """The failed write as served: FAIL, and its error text where the agent put it. The
    agent sends no `errorMessage` facet (the spec's standard one, which Embrasure serves as
    the run's `error_message`); its text is in `spark.exception`, a facet of the agent's
    own, served as sent among the run's facets (docs/producers/spark.md#the-error-message)."""
    (failed,) = runs_writing(events, layout.rejected)
    view = _get(http, f"/api/v1/runs/{failed}")
    assert view["state"] == "FAIL", view
    assert view["error_message"] is None, view["error_message"]  # no errorMessage sent
    assert "errorMessage" not in view["facets"], sorted(view["facets"])
    exception = view["facets"][EXCEPTION]
    assert FAIL_MESSAGE in exception["message"], exception["message"]
    assert FAIL_MESSAGE in exception["stackTrace"].splitlines()[0], exception["stackTrace"][:300]


def check_statistics(http: httpx.Client, layout: Layout) -> None:
    """The parquet write's outputStatistics: 6 rows (the CSV's), its bytes and files."""
    runs = _get(http, "/api/v1/datasets/runs", namespace=FILE, name=layout.lake_orders,
                role="output")["runs"]  # fmt: skip
    (write,) = runs
    assert write["state"] == "COMPLETE"
    assert "outputStatistics" in write["outputFacets"], write["outputFacets"]
    stats = write["statistics"]
    assert stats["rowCount"] == 6, stats
    assert stats.get("size", 0) > 0, stats


def check_all(http: httpx.Client, events: list[Event], layout: Layout) -> None:
    check_no_quarantine(http, events)
    check_hierarchy(http, events)
    check_symlinked_table(http, events, layout)
    check_column_lineage(http, layout)
    check_failure_sent(http, events, layout)
    check_failure_served(http, events, layout)
    check_statistics(http, layout)


def _without_trace(event: Event) -> Event:
    """The event with its `spark.exception` facet's stackTrace left out."""
    facets = event.get("run", {}).get("facets") or {}
    if EXCEPTION not in facets:
        return event
    facet = {k: v for k, v in facets[EXCEPTION].items() if k != "stackTrace"}
    return {**event, "run": {**event["run"], "facets": {**facets, EXCEPTION: facet}}}


def _encoded(events: Iterable[Event]) -> list[bytes]:
    return sorted(orjson.dumps(e, option=orjson.OPT_SORT_KEYS) for e in events)


def _first_difference(a: bytes, b: bytes) -> str:
    pairs = enumerate(zip(a, b, strict=False))
    at = next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
    start = max(0, at - 200)
    return f"first difference at byte {at}: {a[start : at + 100]!r} vs {b[start : at + 100]!r}"


def check_same_graph(exports: list[bytes], stored: list[list[Event]]) -> None:
    """Two servers' exports (GET /api/v1/export) byte-identical given what each stored.

    The live agent does not always send both servers the same bytes: it serialises an
    event once per transport of its composite, and a failed query's `spark.exception`
    stackTrace is read from the exception while Spark's query thread is still rewriting
    it (Utils.doTryWithCallerStacktrace adds a `Suppressed: OriginalTryStackTraceException`
    and trims the trace), so the two servers can get two traces of one FAIL
    (docs/producers/spark.md). That difference, and no other, is allowed in what they
    stored; the exports are then compared with each server's trace masked."""
    sent = [_encoded(events) for events in stored]
    if sent[0] != sent[1]:
        bare = [_encoded(map(_without_trace, events)) for events in stored]
        assert bare[0] == bare[1], "the servers stored different events"
        masked = []
        for export, events in zip(exports, stored, strict=True):
            for event in events:
                trace = ((event["run"].get("facets") or {}).get(EXCEPTION) or {}).get("stackTrace")
                if isinstance(trace, str):
                    export = export.replace(orjson.dumps(trace), b'"<spark.exception stackTrace>"')
            masked.append(export)
        exports = masked
    assert exports[0] == exports[1], _first_difference(exports[0], exports[1])
