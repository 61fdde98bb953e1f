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

A tag is stored under the dataset node's canonical identity, whichever identity the
path names; an untag writes an entry for every identity of the node that carries the tag
(a symlink may have joined identities tagged apart), so the node loses it. A field's tag
is stored in capitals, as Marquez stores it, and names a field of the dataset's current
schema (404 otherwise, as Marquez's ``Field '…' not found``). ``PUT /tags/{tag}`` without
a description keeps the tag's (Marquez's upsert does): the entry carries the description
settled on when it was written.

The writes need the ``admin`` scope once tokens exist (docs/security.md): they change
what every reader sees. With none (the server then binds loopback only, or was told
``--insecure``) they are open, as Marquez's are; marquez-web sends no token.
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
from embrasure.projector.admin import MAX_REASON, MAX_TAG, AdminEntry
from embrasure.query.graph import Graph
from embrasure.query.tags import definitions, holders
from embrasure.receiver.bounds import read_body
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.store.group_commit import GroupCommitter
from embrasure.web.admin import draft, who, writer
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
            appended = [self.committer.append(draft(e, writer(request))) for e in entries]
            receipts = await asyncio.gather(*appended)
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
        description = _description(await read_body(request, MAX_BODY, self.body_seconds))
        if description is None:
            # Marquez keeps a tag's description when a PUT gives none (its TagDao upsert
            # without one). The entry carries the description it settles on, so the
            # projection needs no rule of its own for a missing one.
            description = await read(self.store, lambda r: definitions(r).get(name))
        entry = self._entry(request, "tag", "tag", "", name, tag=name, description=description)
        return await self._write(
            request, [entry], lambda r: {"name": name, "description": definitions(r).get(name)}
        )

    async def tag_dataset(self, request: Request) -> Response:
        return await self._tag_dataset(request, "tag" if request.method == "POST" else "untag")

    async def _tag_dataset(self, request: Request, action: str) -> Response:
        p = request.path_params
        field: str = p.get("field") or ""
        tag = _tag(p["tag"])
        if field:
            tag = tag.upper()  # Marquez's field tags are in capitals (DatasetResource)

        def targets(reader: GraphReader) -> tuple[DatasetId, list[DatasetId]]:
            node = _dataset(reader, p["namespace"], p["dataset"], field)
            if action == "tag":
                return node, [node]  # under the node's canonical identity
            # Every identity that carries the tag, so that the node loses it (a symlink
            # may have joined identities tagged apart; query/tags.py).
            graph = Graph(reader)
            return node, sorted({node, *holders(reader, graph.ids, node, tag, field)})

        node, identities = await read(self.store, targets)
        kind = "field" if field else "dataset"
        entries = [
            self._entry(request, action, kind, *i, tag=tag, field=field or None) for i in identities
        ]
        return await self._write(request, entries, lambda r: dataset_json(Graph(r), node))

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


def _dataset(reader: GraphReader, namespace: str, name: str, field: str = "") -> DatasetId:
    """The node a path names, and with ``field`` one of its fields: 404 as Marquez says.
    A field is one of the dataset's current schema's (the fields its Dataset lists);
    Marquez knows every field any version had."""
    graph = Graph(reader)
    if not any(n["name"] == namespace for n in namespace_jsons(reader)):
        raise not_found(f"Namespace '{namespace}' not found.")
    node = find_dataset(graph, namespace, name)
    if field and field not in {f["name"] for f in dataset_json(graph, node)["fields"]}:
        raise not_found(f"Field '{field}' not found for dataset '{name}'.")
    return node


def _description(body: bytes) -> str | None:
    """The description of a ``PUT /tags/{tag}`` body (Marquez's TagDescription):
    ``{"description": …}``, or an empty body for none."""
    if not body.strip():
        return None
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"the body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise bad_request('the body is a JSON object: {"description": …}')
    description = doc.get("description")
    if description is not None and (
        not isinstance(description, str) or len(description) > MAX_REASON
    ):
        raise bad_request(f"description must be a string of at most {MAX_REASON} characters")
    return description


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
