"""``GET /api/v1/impact`` (docs/queries.md#column-lineage-and-impact): everything downstream
of a dataset or a field, one shortest path each, and whether a masked mapping lies on it."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from graph_api import (
    AGGREGATION,
    CUSTOMERS,
    DBT,
    IDENTITY,
    ORDERS,
    Api,
    at,
    column_lineage,
    dataset_id,
    ds,
    field_id,
    input_field,
    job_event,
    job_id,
    run_event,
    run_id,
)

REPORT = ("postgres://db:5432", "analytics.order_report")
DASHBOARD = ("postgres://db:5432", "analytics.dashboard")
MASKED = ("DIRECT", "TRANSFORMATION", True)
JOB1, JOB2 = job_id("dbt", "report"), job_id("dbt", "dashboard")
SERVICE = job_id("bi", "superset", "service")


@pytest.fixture
def api(client: TestClient) -> Api:
    return Api(client)


def platform(api: Api) -> None:
    """orders → report (total = sum(amount), email_hash = masked(email)) → dashboard
    (revenue = total, contact = email_hash); a BI service reads the dashboard."""
    api.ingest(
        run_event(
            "COMPLETE",
            "report",
            run_id(1),
            at(9),
            inputs=[ds(*ORDERS), ds(*CUSTOMERS)],
            outputs=[
                ds(
                    *REPORT,
                    columnLineage=column_lineage(
                        {
                            "total": [input_field(ORDERS, "amount", AGGREGATION)],
                            "email_hash": [input_field(CUSTOMERS, "email", MASKED)],
                        }
                    ),
                )
            ],
            namespace="dbt",
            producer=DBT,
        ),
        run_event(
            "COMPLETE",
            "dashboard",
            run_id(2),
            at(10),
            inputs=[ds(*REPORT)],
            outputs=[
                ds(
                    *DASHBOARD,
                    columnLineage=column_lineage(
                        {
                            "revenue": [input_field(REPORT, "total", IDENTITY)],
                            "contact": [input_field(REPORT, "email_hash", IDENTITY)],
                        }
                    ),
                )
            ],
            namespace="dbt",
            producer=DBT,
        ),
        job_event("superset", at(11), inputs=[ds(*DASHBOARD)], namespace="bi"),
    )


def impact(api: Api, dataset: tuple[str, str], **params: Any) -> dict[str, Any]:
    doc: dict[str, Any] = api.get("/api/v1/impact", namespace=dataset[0], name=dataset[1], **params)
    return doc


def by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["node"]["id"]: item for item in doc["items"]}


def test_impact_of_a_field_follows_column_lineage_with_jobs_on_the_path(api: Api) -> None:
    platform(api)
    doc = impact(api, ORDERS, field="amount")
    assert doc["root"] == field_id(ORDERS, "amount")
    items = by_id(doc)
    assert set(items) == {
        JOB1,
        field_id(REPORT, "total"),
        dataset_id(*REPORT),
        JOB2,
        field_id(DASHBOARD, "revenue"),
        dataset_id(*DASHBOARD),
    }
    revenue = items[field_id(DASHBOARD, "revenue")]
    assert revenue["distance"] == 2
    assert revenue["path"] == [
        field_id(ORDERS, "amount"),
        JOB1,
        field_id(REPORT, "total"),
        JOB2,
        field_id(DASHBOARD, "revenue"),
    ]
    assert revenue["node"] == {
        "id": field_id(DASHBOARD, "revenue"),
        "type": "field",
        "namespace": DASHBOARD[0],
        "name": DASHBOARD[1],
        "field": "revenue",
    }
    assert items[dataset_id(*REPORT)]["path"][-2:] == [
        field_id(REPORT, "total"),
        dataset_id(*REPORT),
    ]
    assert items[JOB1]["path"] == [field_id(ORDERS, "amount"), JOB1]
    assert not any(item["masked"] for item in doc["items"])
    # Nearest first.
    assert [i["distance"] for i in doc["items"]] == sorted(i["distance"] for i in doc["items"])


def test_a_masked_mapping_marks_every_path_through_it(api: Api) -> None:
    platform(api)
    items = by_id(impact(api, CUSTOMERS, field="email"))
    assert items[field_id(REPORT, "email_hash")]["masked"] is True
    # Masked upstream stays masked downstream, even through an identity mapping.
    assert items[field_id(DASHBOARD, "contact")]["masked"] is True
    assert items[field_id(DASHBOARD, "contact")]["distance"] == 2


def test_impact_of_a_dataset_covers_datasets_jobs_services_and_fields(api: Api) -> None:
    platform(api)
    doc = impact(api, ORDERS)
    assert doc["root"] == dataset_id(*ORDERS)
    items = by_id(doc)
    assert {
        JOB1,
        dataset_id(*REPORT),
        JOB2,
        dataset_id(*DASHBOARD),
        SERVICE,
        field_id(REPORT, "total"),
        field_id(DASHBOARD, "revenue"),
    } == set(items)
    assert items[SERVICE]["path"] == [
        dataset_id(*ORDERS),
        JOB1,
        dataset_id(*REPORT),
        JOB2,
        dataset_id(*DASHBOARD),
        SERVICE,
    ]
    assert items[SERVICE]["distance"] == 5
    assert items[SERVICE]["node"]["type"] == "service"
    assert items[field_id(DASHBOARD, "revenue")]["path"] == [
        dataset_id(*ORDERS),
        field_id(ORDERS, "amount"),
        JOB1,
        field_id(REPORT, "total"),
        JOB2,
        field_id(DASHBOARD, "revenue"),
    ]
    # The customers' masked email is not downstream of orders.
    assert field_id(REPORT, "email_hash") not in items


def test_depth_and_limit_bound_the_answer(api: Api) -> None:
    platform(api)
    near = by_id(impact(api, ORDERS, depth=1))
    assert set(near) == {JOB1, field_id(REPORT, "total")}
    capped = impact(api, ORDERS, limit=2)
    assert len(capped["items"]) == 2 and capped["truncated"] is True
    assert impact(api, ORDERS)["truncated"] is False


def test_a_field_without_lineage_an_unknown_field_and_an_unknown_dataset(api: Api) -> None:
    platform(api)
    doc = impact(api, DASHBOARD, field="revenue")  # named by column lineage, read by none
    assert doc == {
        "root": field_id(DASHBOARD, "revenue"),
        "items": [],
        "truncated": False,
        "hidden": None,
    }
    never = api.problem(
        "GET",
        "/api/v1/impact",
        404,
        namespace=DASHBOARD[0],
        name=DASHBOARD[1],
        field="nothing_here",
    )
    assert never["type"] == "https://embrasure.dev/problems/field-not-found"
    problem = api.problem("GET", "/api/v1/impact", 404, namespace="nowhere", name="nothing")
    assert "nowhere" in problem["detail"]
    api.problem("GET", "/api/v1/impact", 400, namespace="only")
