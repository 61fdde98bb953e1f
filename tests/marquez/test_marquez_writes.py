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
from embrasure.model import Token
from embrasure.projector.worker import Projector, reproject
from embrasure.settings import Settings
from embrasure.store import open_store
from embrasure.web import auth

from graph_api import (
    HIVE_TABLE,
    ORDERS,
    REPORT,
    WAREHOUSE_PATH,
    Api,
    at,
    daily_run,
    ds,
    run_event,
    run_id,
    schema,
    spark_reads_table,
    spark_writes_path,
)


@pytest.fixture
def live(db_url: str) -> Iterator[tuple[Api, TestClient]]:
    """The app with its projector running (as `serve` runs it), and its Marquez port."""
    store = open_store(db_url)
    app = build_app(Settings(db=db_url), store, projector=Projector(store))
    with TestClient(app) as main, TestClient(app.state.marquez) as marquez:
        yield Api(main), marquez
    store.close()


def loaded(api: Api) -> None:
    posted(
        api,
        run_event(
            "COMPLETE",
            "daily",
            run_id(1),
            at(9),
            inputs=[ds(*ORDERS, schema=schema("id", "email"))],
            outputs=[ds(*REPORT)],
        ),
    )


def posted(api: Api, *events: Any) -> None:
    """Post the events and wait for the app's projector to apply them (a projector of
    the test's own could find them taken by it, on PostgreSQL, and return first)."""
    receipt = api.post(*events)
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


def test_a_field_tag_names_a_field_of_the_dataset(live: tuple[Api, TestClient]) -> None:
    api, marquez = live
    loaded(api)
    missing = call(marquez, "POST", path(*ORDERS) + "/fields/nothing/tags/PII", 404)
    assert missing["message"] == f"Field 'nothing' not found for dataset '{ORDERS[1]}'."
    call(marquez, "DELETE", path(*ORDERS) + "/fields/nothing/tags/PII", 404)
    # Taken off by the name the dataset shows (in capitals) or as first given.
    call(marquez, "POST", path(*ORDERS) + "/fields/email/tags/pii")
    gone = call(marquez, "DELETE", path(*ORDERS) + "/fields/email/tags/pii")
    assert {f["name"]: f["tags"] for f in gone["fields"]} == {"id": [], "email": []}


def test_a_tags_description_is_kept_until_another_is_given(
    live: tuple[Api, TestClient],
) -> None:
    _, marquez = live
    put = "/api/v1/tags/PII"
    assert call(marquez, "PUT", put, json={"description": "personal"}) == {
        "name": "PII",
        "description": "personal",
    }
    # Marquez's upsert without a description keeps the one the tag has.
    assert call(marquez, "PUT", put, json={})["description"] == "personal"
    assert call(marquez, "PUT", put)["description"] == "personal"
    assert call(marquez, "PUT", put, json={"description": "data"})["description"] == "data"
    call(marquez, "PUT", put, 400, json={"description": "x" * 1001})
    call(marquez, "PUT", put, 400, json=["personal"])
    call(marquez, "PUT", put, 400, json={"description": 3})
    assert call(marquez, "GET", "/api/v1/tags")["tags"] == [{"name": "PII", "description": "data"}]


def test_a_tag_taken_off_stays_a_tag(live: tuple[Api, TestClient]) -> None:
    """Marquez keeps a tag once used: marquez-web offers the listed ones to pick."""
    api, marquez = live
    loaded(api)
    call(marquez, "POST", path(*ORDERS) + "/tags/gold")
    call(marquez, "DELETE", path(*ORDERS) + "/tags/gold")
    assert call(marquez, "GET", "/api/v1/tags")["tags"] == [{"name": "gold", "description": None}]
    assert call(marquez, "GET", "/api/v1/tags?limit=1&offset=1")["tags"] == []


def test_a_symlinked_dataset_is_tagged_and_untagged_by_any_identity(
    live: tuple[Api, TestClient],
) -> None:
    """A tag is stored under the node's canonical identity; a node joined by a later
    symlink keeps the tags of each identity, and an untag takes the tag off all."""
    api, marquez = live
    posted(api, spark_reads_table())
    call(marquez, "POST", path(*HIVE_TABLE) + "/tags/PII")  # the table alone, for now
    posted(api, spark_writes_path())  # the table is now a name of the warehouse path
    via_path = call(marquez, "GET", path(*WAREHOUSE_PATH))
    node = (via_path["namespace"], via_path["name"])
    assert node == WAREHOUSE_PATH  # the PII tag is on an alias
    assert via_path["tags"] == ["PII"]
    assert call(marquez, "POST", path(*HIVE_TABLE) + "/tags/gold")["tags"] == ["PII", "gold"]
    assert call(marquez, "DELETE", path(*WAREHOUSE_PATH) + "/tags/PII")["tags"] == ["gold"]
    assert call(marquez, "GET", path(*HIVE_TABLE))["tags"] == ["gold"]
    reproject(api.store)
    assert call(marquez, "GET", path(*HIVE_TABLE))["tags"] == ["gold"]


def test_deleting_what_is_not_there_is_404(live: tuple[Api, TestClient]) -> None:
    api, marquez = live
    loaded(api)
    ns = quote(ORDERS[0], safe="")
    assert call(marquez, "DELETE", path(ORDERS[0], "nothing"), 404)["message"] == (
        "Dataset 'nothing' not found."
    )
    call(marquez, "DELETE", path("nowhere", ORDERS[1]), 404)
    call(marquez, "DELETE", "/api/v1/namespaces/spark/jobs/nothing", 404)
    call(marquez, "DELETE", "/api/v1/namespaces/nowhere", 404)
    call(marquez, "POST", "/api/v1/namespaces/spark/jobs/nothing/tags/x", 404)
    assert call(marquez, "GET", f"/api/v1/namespaces/{ns}")["name"] == ORDERS[0]
    assert api.get("/api/v1/admin/hidden")["hidden"] == []


def add_token(db_url: str, scope: str) -> str:
    token_id, text = auth.new_token()
    store = open_store(db_url)
    store.add_token(Token(token_id, auth.digest(text), frozenset([scope]), None, "", "t", None))
    store.close()
    return text


def test_with_tokens_the_writes_need_the_admin_scope(db_url: str) -> None:
    """Once tokens exist, a write needs ``admin`` (it changes what every reader sees);
    reading tags needs ``read``. Without tokens (loopback) all is open, as Marquez is."""
    tokens = {scope: add_token(db_url, scope) for scope in ("read", "admin")}
    store = open_store(db_url)
    app = build_app(Settings(db=db_url), store, projector=Projector(store))
    try:
        with TestClient(app.state.marquez) as marquez, TestClient(app):
            put = "/api/v1/tags/PII"
            assert marquez.put(put, json={}).status_code == 401
            read_only = {"Authorization": f"Bearer {tokens['read']}"}
            assert marquez.put(put, json={}, headers=read_only).status_code == 403
            admin = {"Authorization": f"Bearer {tokens['admin']}"}
            assert marquez.put(put, json={}, headers=admin).status_code == 200
            assert marquez.get("/api/v1/tags", headers=read_only).json()["tags"] == [
                {"name": "PII", "description": None}
            ]
            r = marquez.delete("/api/v1/namespaces/spark", headers=read_only)
            assert r.status_code == 403
    finally:
        store.close()
