"""Services, JobEvents and DatasetEvents through the read API (how: tests/graph_api.py)."""

from __future__ import annotations

from typing import Any

import pytest

from graph_api import (
    DBT,
    FLINK,
    ORDERS,
    REPORT,
    Api,
    at,
    daily_run,
    dataset_event,
    dataset_id,
    ds,
    edge,
    facet,
    job_event,
    job_id,
    run_event,
    run_id,
    schema,
)

# == services, JobEvents, DatasetEvents (docs/projection.md#entities-and-identity) =================


def test_input_only_job_event_is_a_service(api: Api) -> None:
    api.ingest(daily_run(1))
    api.ingest(job_event("revenue-dashboard", at(12), inputs=[ds(*REPORT)], namespace="superset"))
    service = job_id("superset", "revenue-dashboard", "service")
    view = api.job("superset", "revenue-dashboard")
    assert (view["id"], view["type"]) == (service, "service")
    doc = api.lineage(*REPORT, direction="downstream")
    assert {
        "id": service,
        "type": "service",
        "namespace": "superset",
        "name": "revenue-dashboard",
    } in doc["nodes"]
    assert edge(doc, dataset_id(*REPORT), service, static=True)["run_count"] == 0
    served = api.get(
        "/api/v1/lineage", type="service", namespace="superset", name="revenue-dashboard"
    )
    assert served["root"] == service


def test_job_type_service_is_a_service(api: Api) -> None:
    job_type = facet(
        "JobTypeJobFacet",
        "2-0-4",
        FLINK,
        processingType="SERVICE",
        integration="FLINK",
        jobType="JOB",
    )
    api.ingest(
        run_event(
            "RUNNING",
            "order-api",
            run_id(1),
            at(9),
            outputs=[ds(*ORDERS)],
            job_facets={"jobType": job_type},
            namespace="flink",
            producer=FLINK,
        )
    )
    view = api.job("flink", "order-api")
    assert (view["id"], view["type"]) == (job_id("flink", "order-api", "service"), "service")
    assert view["facets"]["jobType"] == job_type


def test_a_job_with_run_events_is_a_job(api: Api) -> None:
    api.ingest(job_event("audit", at(8), inputs=[ds(*ORDERS)]))
    assert api.job("dbt", "audit")["type"] == "service"
    api.ingest(
        run_event("COMPLETE", "audit", run_id(1), at(9), inputs=[ds(*ORDERS)], namespace="dbt")
    )
    view = api.job("dbt", "audit")
    assert (view["id"], view["type"]) == (job_id("dbt", "audit"), "job")


def test_static_and_runtime_edges_coexist(api: Api) -> None:
    sql = facet(
        "SQLJobFacet", "1-1-0", DBT, query="select * from public.orders", dialect="postgres"
    )
    api.ingest(
        job_event(
            "model.report",
            at(8),
            inputs=[ds(*ORDERS)],
            outputs=[ds(*REPORT)],
            job_facets={"sql": sql},
        ),
        run_event(
            "COMPLETE",
            "model.report",
            run_id(1),
            at(9),
            inputs=[ds(*ORDERS)],
            outputs=[ds(*REPORT)],
            namespace="dbt",
            producer=DBT,
        ),
    )
    doc = api.lineage(*REPORT, direction="upstream")
    model = job_id("dbt", "model.report")
    for source, target in ((dataset_id(*ORDERS), model), (model, dataset_id(*REPORT))):
        static = edge(doc, source, target, static=True)
        runtime = edge(doc, source, target, static=False)
        assert (static["first_seen"], static["run_count"], static["last_state"]) == (
            at(8),
            0,
            None,
        )
        assert (runtime["first_seen"], runtime["run_count"], runtime["last_state"]) == (
            at(9),
            1,
            "COMPLETE",
        )
    assert len(doc["edges"]) == 4
    assert api.job("dbt", "model.report")["facets"]["sql"] == sql


def test_dataset_event_facets_show_on_the_dataset(api: Api) -> None:
    documentation = facet(
        "DocumentationDatasetFacet", "1-1-0", DBT, description="One row per order."
    )
    ownership = facet(
        "OwnershipDatasetFacet", "1-0-1", DBT, owners=[{"name": "team:payments", "type": "TEAM"}]
    )
    view = api.ingest(
        dataset_event(
            ds(
                *ORDERS,
                schema=schema("id", "amount"),
                documentation=documentation,
                ownership=ownership,
            ),
            at(9),
        )
    )
    assert view["items"][0]["kind"] == "DatasetEvent" and view["state"] == "projected"
    node = api.dataset(*ORDERS)
    assert node["facets"] == {
        "schema": schema("id", "amount"),
        "documentation": documentation,
        "ownership": ownership,
    }
    assert node["fields"] == ["id", "amount"]


@pytest.mark.parametrize(
    ("deleted_at", "removed"),
    [(at(10), False), (at(11), True), (at(12), True)],
    ids=["older-keeps", "same-time-removes", "newer-removes"],
)
def test_deleted_facet_marker(api: Api, deleted_at: str, removed: bool) -> None:
    documentation = facet("DocumentationDatasetFacet", "1-1-0", DBT, description="Orders.")
    api.ingest(dataset_event(ds(*ORDERS, documentation=documentation), at(11)))
    # A deletion marker need not carry the facet's required fields (docs/projection.md#validation).
    view = api.ingest(dataset_event(ds(*ORDERS, documentation={"_deleted": True}), deleted_at))
    assert view["items"][0]["warnings"] == []
    facets = api.dataset(*ORDERS)["facets"]
    assert ("documentation" not in facets) is removed
    if not removed:
        assert facets["documentation"] == documentation


def test_a_later_value_brings_a_deleted_facet_back(api: Api) -> None:
    def documentation(text: str) -> dict[str, Any]:
        return facet("DocumentationDatasetFacet", "1-1-0", DBT, description=text)

    api.ingest_each(
        dataset_event(ds(*ORDERS, documentation=documentation("v1")), at(11)),
        dataset_event(ds(*ORDERS, documentation=documentation("v2")), at(13)),
        dataset_event(ds(*ORDERS, documentation={"_deleted": True}), at(12)),
    )
    assert api.dataset(*ORDERS)["facets"]["documentation"] == documentation("v2")


def test_deleted_null_is_an_ordinary_value(api: Api) -> None:
    documentation = facet(
        "DocumentationDatasetFacet", "1-1-0", DBT, description="Orders.", _deleted=None
    )
    api.ingest(dataset_event(ds(*ORDERS, documentation=documentation), at(11)))
    assert api.dataset(*ORDERS)["facets"]["documentation"] == documentation
