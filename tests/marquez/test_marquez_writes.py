"""Marquez's writes on the Marquez port: tags on datasets, fields and jobs, tag
definitions, soft delete (embrasure/marquez/writes.py, docs/marquez.md), each an
administrative entry in the log, answered once the projector applied it; on both
backends, with the projector running in the app as `serve` runs it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from embrasure.app import build_app
from embrasure.projector.worker import Projector, reproject
from embrasure.settings import Settings
from embrasure.store import open_store

from graph_api import ORDERS, REPORT, Api, at, daily_run, ds, run_event, run_id, schema


@pytest.fixture
def live(db_url: str) -> Iterator[tuple[Api, TestClient]]:
    """The app with its projector running (as `serve` runs it), and its Marquez port."""
    store = open_store(db_url)
    app = build_app(Settings(db=db_url), store, projector=Projector(store))
    with TestClient(app) as main, TestClient(app.state.marquez) as marquez:
        yield Api(main), marquez
    store.close()


def loaded(api: Api) -> None:
    receipt = api.post(
        run_event(
            "COMPLETE",
            "daily",
            run_id(1),
            at(9),
            inputs=[ds(*ORDERS, schema=schema("id", "email"))],
            outputs=[ds(*REPORT)],
        )
    )
    deadline = time.monotonic() + 30
    while api.delivery(receipt["delivery_id"])["state"] == "accepted":
        assert time.monotonic() < deadline
        time.sleep(0.02)


def path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/datasets/{quote(name, safe='')}"


def call(marquez: TestClient, method: str, url: str, status: int = 200, **kw: Any) -> Any:
    r = marquez.request(method, url, **kw)
    assert r.status_code == status, r.text
    return r.json()


def test_tags_on_a_dataset_its_field_and_a_job(live: tuple[Api, TestClient]) -> None:
    api, marquez = live
    loaded(api)
    tagged = call(marquez, "POST", path(*ORDERS) + "/tags/PII")
    assert tagged["tags"] == ["PII"]
    field = call(marquez, "POST", path(*ORDERS) + "/fields/email/tags/sensitive")
    assert {f["name"]: f["tags"] for f in field["fields"]} == {"id": [], "email": ["SENSITIVE"]}
    assert call(marquez, "GET", path(*ORDERS))["tags"] == ["PII"]
    job = call(marquez, "POST", "/api/v1/namespaces/spark/jobs/daily/tags/finance")
    assert job["tags"] == ["finance"]
    call(marquez, "PUT", "/api/v1/tags/PII", json={"description": "personal data"})
    tags = call(marquez, "GET", "/api/v1/tags")["tags"]
    assert tags == [
        {"name": "PII", "description": "personal data"},
        {"name": "SENSITIVE", "description": None},
        {"name": "finance", "description": None},
    ]
    untagged = call(marquez, "DELETE", path(*ORDERS) + "/tags/PII")
    assert untagged["tags"] == []
    assert call(marquez, "DELETE", "/api/v1/namespaces/spark/jobs/daily/tags/finance")["tags"] == []
    # Event-sourced: a graph rebuilt from the log has the same tags.
    reproject(api.store)
    assert call(marquez, "GET", path(*ORDERS))["fields"][1]["tags"] == ["SENSITIVE"]
    assert call(marquez, "POST", path(ORDERS[0], "nothing") + "/tags/x", 404)["code"] == 404


def test_soft_delete(live: tuple[Api, TestClient]) -> None:
    api, marquez = live
    loaded(api)
    was = call(marquez, "GET", path(*REPORT))
    assert call(marquez, "DELETE", path(*REPORT)) == was  # the dataset as it was
    assert call(marquez, "GET", path(*REPORT), 404)["code"] == 404
    listed = call(marquez, "GET", f"/api/v1/namespaces/{quote(REPORT[0], safe='')}/datasets")
    assert [d["name"] for d in listed["datasets"]] == [ORDERS[1]]
    job = call(marquez, "DELETE", "/api/v1/namespaces/spark/jobs/daily")
    assert job["name"] == "daily"
    assert call(marquez, "GET", "/api/v1/namespaces/spark/jobs/daily", 404)["code"] == 404
    # The hide is Embrasure's: its own API says who hid it and why.
    hidden = api.get("/api/v1/admin/hidden")["hidden"]
    assert {(h["type"], h["name"]) for h in hidden} == {("dataset", REPORT[1]), ("job", "daily")}
    assert call(marquez, "DELETE", "/api/v1/namespaces/spark")["name"] == "spark"
    names = [n["name"] for n in call(marquez, "GET", "/api/v1/namespaces")["namespaces"]]
    assert "spark" not in names
    assert call(marquez, "DELETE", "/api/v1/namespaces/spark", 404)["code"] == 404


def test_without_a_projector_the_write_is_accepted(api: Api, marquez: TestClient) -> None:
    """The in-process app without a projector (`serve --no-projector`): 202, durable."""
    api.ingest(daily_run(1))
    import embrasure.marquez.writes as writes

    writes.APPLIED_WITHIN_S, saved = 0.1, writes.APPLIED_WITHIN_S
    try:
        answer = call(marquez, "POST", path(*ORDERS) + "/tags/PII", 202)
    finally:
        writes.APPLIED_WITHIN_S = saved
    assert answer["code"] == 202 and len(answer["delivery_ids"]) == 1
    api.project()
    assert call(marquez, "GET", path(*ORDERS))["tags"] == ["PII"]
