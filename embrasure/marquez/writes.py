"""Marquez's writes (docs/marquez.md#sources-and-tags, #soft-delete): tags on datasets,
fields and jobs, tag definitions, and soft delete of a dataset, a job or a namespace.

Each is an administrative entry in Embrasure's log (projector/admin.py), appended through
the group commit like a producer's delivery and projected like one, so ``reproject``
keeps it and every server of a PostgreSQL deployment sees it. Marquez answers such a
write with the entity as it now is; so does this port once the projector has applied the
entry (it runs in the same server, usually within milliseconds). When it has not within
``APPLIED_WITHIN_S`` (a server started with ``--no-projector``, a long backlog), the
answer is ``202`` with the delivery's id: the write is durable and will apply.

Soft delete is the admin hide (docs/operations.md#hiding-datasets-jobs-and-namespaces),
answered, as Marquez does, with the entity as it was. Marquez un-deletes an entity on
its next event; a hide lasts until an unhide (``POST /api/v1/admin/unhide``).

A field's tag is stored in capitals, as Marquez stores it. The writes need the ``admin``
scope once tokens exist (docs/security.md); with none, on loopback, they are open, as
Marquez's are.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from embrasure.errors import LogUnavailable, StoreUnavailable
from embrasure.marquez.datasets import dataset_json, find_dataset
from embrasure.marquez.http import bad_request, not_found, route
from embrasure.marquez.jobs import find_job, job_json
from embrasure.marquez.model import paging
from embrasure.marquez.namespaces import namespace_jsons
from embrasure.model import DatasetId, JobId, utc_now
from embrasure.projector.admin import MAX_TAG, AdminEntry
from embrasure.query.graph import Graph
from embrasure.query.tags import definitions
from embrasure.receiver.bounds import read_body
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.store.group_commit import GroupCommitter
from embrasure.web.admin import draft, who
from embrasure.web.auth import requires
from embrasure.web.responses import json_response, read

APPLIED_WITHIN_S = 10.0
POLL_S = 0.02
DELETED = "DELETE on the Marquez API"  # the hide's reason
MAX_BODY = 64 * 1024


class WriteRoutes:
    def __init__(self, store: Store, committer: GroupCommitter, body_seconds: float) -> None:
        self.store = store
        self.committer = committer
        self.body_seconds = body_seconds

    # -- the entry, then the answer --------------------------------------------------

    async def _write(
        self, request: Request, entries: list[AdminEntry], then: Callable[[GraphReader], Any]
    ) -> Response:
        try:
            receipts = await asyncio.gather(*(self.committer.append(draft(e)) for e in entries))
        except StoreUnavailable as exc:
            raise LogUnavailable(f"The change was not stored: {exc}. Retry later.") from exc
        ids = [r.delivery_id for r in receipts]
        if not await self._applied(ids):
            return json_response(
                {
                    "code": 202,
                    "message": "Stored; the projector has not applied it yet.",
                    "delivery_ids": ids,
                },
                status_code=202,
            )
        return json_response(await read(self.store, then))

    async def _applied(self, delivery_ids: list[str]) -> bool:
        deadline = time.monotonic() + APPLIED_WITHIN_S

        def done(reader: GraphReader) -> bool:
            rows = [reader.delivery(i) for i in delivery_ids]
            return all(r is not None and r.state != "accepted" for r in rows)

        while not await read(self.store, done):
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(POLL_S)
        return True

    def _entry(
        self, request: Request, action: str, kind: str, ns: str, name: str, **more: Any
    ) -> AdminEntry:
        return AdminEntry(action, kind, ns, name, utc_now(), who(request), **more)

    # -- tags -------------------------------------------------------------------------

    async def list_tags(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            limit, offset = paging(request)
            tags = [{"name": n, "description": d} for n, d in definitions(reader).items()]
            return {"tags": tags[offset : offset + limit]}

        return json_response(await read(self.store, work))

    async def define_tag(self, request: Request) -> Response:
        name = _tag(request.path_params["tag"])
        body = await read_body(request, MAX_BODY, self.body_seconds)
        description = None
        if body.strip():
            try:
                doc = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise bad_request(f"the body is not JSON: {exc}") from None
            description = doc.get("description") if isinstance(doc, dict) else None
            if description is not None and not isinstance(description, str):
                raise bad_request("description must be a string")
        entry = self._entry(request, "tag", "tag", "", name, tag=name, description=description)
        return await self._write(
            request, [entry], lambda r: {"name": name, "description": definitions(r).get(name)}
        )

    async def tag_dataset(self, request: Request) -> Response:
        return await self._tag_dataset(request, "tag" if request.method == "POST" else "untag")

    async def _tag_dataset(self, request: Request, action: str) -> Response:
        p = request.path_params
        node = await read(self.store, lambda r: _dataset(r, p["namespace"], p["dataset"]))
        field = p.get("field")
        tag = _tag(p["tag"])
        if field is not None:
            tag = tag.upper()  # Marquez's field tags are in capitals (DatasetResource)
            entry = self._entry(request, action, "field", *node, tag=tag, field=field)
        else:
            entry = self._entry(request, action, "dataset", *node, tag=tag)
        return await self._write(request, [entry], lambda r: dataset_json(Graph(r), node))

    async def tag_job(self, request: Request) -> Response:
        p = request.path_params
        action = "tag" if request.method == "POST" else "untag"
        job = await read(self.store, lambda r: find_job(Graph(r), p["namespace"], p["job"]))
        entry = self._entry(request, action, "job", job.namespace, job.name, tag=_tag(p["tag"]))
        return await self._write(request, [entry], lambda r: job_json(Graph(r), job))

    # -- soft delete ---------------------------------------------------------------------

    async def delete_dataset(self, request: Request) -> Response:
        p = request.path_params

        def before(reader: GraphReader) -> tuple[DatasetId, dict[str, Any]]:
            graph = Graph(reader)
            node = _dataset(reader, p["namespace"], p["dataset"])
            return node, dataset_json(graph, node)

        node, was = await read(self.store, before)
        entry = self._entry(request, "hide", "dataset", *node, reason=DELETED)
        return await self._write(request, [entry], lambda r: was)

    async def delete_job(self, request: Request) -> Response:
        p = request.path_params

        def before(reader: GraphReader) -> tuple[JobId, dict[str, Any]]:
            graph = Graph(reader)
            job = find_job(graph, p["namespace"], p["job"])
            return job, job_json(graph, job)

        job, was = await read(self.store, before)
        entry = self._entry(request, "hide", "job", job.namespace, job.name, reason=DELETED)
        return await self._write(request, [entry], lambda r: was)

    async def delete_namespace(self, request: Request) -> Response:
        name = request.path_params["namespace"]

        def before(reader: GraphReader) -> dict[str, Any]:
            for namespace in namespace_jsons(reader):
                if namespace["name"] == name:
                    return namespace
            raise not_found(f"Namespace '{name}' not found.")

        was = await read(self.store, before)
        entry = self._entry(request, "hide", "namespace", name, "", reason=DELETED)
        return await self._write(request, [entry], lambda r: was)


def _dataset(reader: GraphReader, namespace: str, name: str) -> DatasetId:
    graph = Graph(reader)
    if not any(n["name"] == namespace for n in namespace_jsons(reader)):
        raise not_found(f"Namespace '{namespace}' not found.")
    return find_dataset(graph, namespace, name)


def _tag(name: str) -> str:
    if not name or len(name) > MAX_TAG:
        raise bad_request(f"a tag's name is 1 to {MAX_TAG} characters")
    return name


def routes(store: Store, committer: GroupCommitter, body_seconds: float) -> list[BaseRoute]:
    api = WriteRoutes(store, committer, body_seconds)
    read_scope, admin = requires("read"), requires("admin")
    dataset = "/namespaces/{namespace}/datasets/{dataset}"
    job = "/namespaces/{namespace}/jobs/{job}"
    out: list[BaseRoute] = [
        route("/tags", read_scope(api.list_tags)),
        route("/tags/{tag}", admin(api.define_tag), "PUT"),
        route(dataset, admin(api.delete_dataset), "DELETE"),
        route(job, admin(api.delete_job), "DELETE"),
        route("/namespaces/{namespace}", admin(api.delete_namespace), "DELETE"),
    ]
    for method in ("POST", "DELETE"):
        out += [
            route(dataset + "/tags/{tag}", admin(api.tag_dataset), method),
            route(dataset + "/fields/{field}/tags/{tag}", admin(api.tag_dataset), method),
            route(job + "/tags/{tag}", admin(api.tag_job), method),
        ]
    return out
