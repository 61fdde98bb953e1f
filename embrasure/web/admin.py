"""Admin endpoints (scope ``admin``,
docs/operations.md#hiding-datasets-jobs-and-namespaces): hide and unhide datasets, jobs and
namespaces, and list what is hidden.

A hide or unhide is appended to the delivery log as an administrative entry, through the
same group commit as producers' deliveries, and answered 202 once durable; the projector
applies it like any delivery (projector/admin.py), so ``reproject`` keeps it. What a
hidden entity means for reads is in hidden.py.

- ``POST /api/v1/admin/hide`` ``{"type": "dataset"|"job"|"namespace", "namespace": …,
  "name": … (not for a namespace), "reason": …}``: 404 when nothing of that name is known
  (a typo would otherwise hide nothing, silently).
- ``POST /api/v1/admin/unhide`` with the same body. A dataset hidden under one identity
  is shown again by unhiding any identity of its node: one entry per hidden identity.
- ``GET /api/v1/admin/hidden``: what is hidden, who hid it, when and why.
- ``POST /api/v1/admin/sign-out`` ``{"subject": …}`` or ``{"everyone": true}``: end the
  web UI sessions of one person, or of everyone, at once (access/sign_in.py); answers
  how many were live.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from embrasure.errors import LogUnavailable, StoreUnavailable
from embrasure.model import DatasetId, DeliveryDraft, Principal, Receipt, Writer, utc_now
from embrasure.projector.admin import KINDS, MAX_REASON, PROVIDER_KEY, ROUTE, AdminEntry
from embrasure.query.entities import Identities
from embrasure.query.hidden import Hidden
from embrasure.receiver.bounds import read_body
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.store.group_commit import GroupCommitter
from embrasure.store.rows import DatasetRow, JobRow
from embrasure.web.auth import requires
from embrasure.web.params import (
    MAX_LIMIT,
    TEXT_TRIPLE_CURSOR,
    bad_body,
    decode_cursor,
    encode_cursor,
    entity_named,
    integer,
    json_object,
    not_found,
)
from embrasure.web.responses import answer, json_response, read

MAX_BODY = 64 * 1024  # an admin request is a few names


class AdminApi:
    def __init__(self, store: Store, committer: GroupCommitter, body_seconds: float) -> None:
        self.store = store
        self.committer = committer
        self.body_seconds = body_seconds

    async def hide(self, request: Request) -> Response:
        return await self._decide(request, "hide")

    async def unhide(self, request: Request) -> Response:
        return await self._decide(request, "unhide")

    async def _decide(self, request: Request, action: str) -> Response:
        try:
            kind, namespace, name, reason = _request(
                await read_body(request, MAX_BODY, self.body_seconds)
            )
            targets = await read(self.store, lambda r: _targets(r, action, kind, namespace, name))
            by = who(request)
            at = utc_now()
            entries = [AdminEntry(action, kind, ns, n, at, by, reason) for ns, n in targets]
            appended = [self.committer.append(draft(e, writer(request))) for e in entries]
            receipts = await asyncio.gather(*appended)
        except StoreUnavailable as exc:
            # Reading the targets or appending them, nothing was stored (errors.py).
            raise LogUnavailable(f"The {action} was not stored: {exc}. Retry later.") from exc
        return json_response(
            {
                "action": action,
                "state": "accepted",
                "entries": [_entry_json(e, r) for e, r in zip(entries, receipts, strict=True)],
            },
            status_code=202,
        )

    async def hidden(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            limit = integer(request, "limit", 100, 1, MAX_LIMIT)
            after = decode_cursor(request, TEXT_TRIPLE_CURSOR)
            found = Hidden.of(reader).entries()
            if after is not None:
                found = [e for e in found if _order(e) > tuple(after)]
            more = len(found) > limit
            return {
                "hidden": found[:limit],
                "next_cursor": encode_cursor(list(_order(found[limit - 1]))) if more else None,
            }

        return await answer(self.store, work)

    async def sign_out(self, request: Request) -> Response:
        doc = json_object(
            await read_body(request, MAX_BODY, self.body_seconds),
            '{"subject": …} or {"everyone": true}',
        )
        subject, everyone = doc.get("subject"), doc.get("everyone")
        if set(doc) - {"subject", "everyone"} or (subject is None) == (everyone is not True):
            raise bad_body('name one person, {"subject": …}, or {"everyone": true}')
        if subject is not None and (not isinstance(subject, str) or not subject):
            raise bad_body("subject must be a non-empty string")
        at = int(time.time())
        ended = await run_in_threadpool(
            self.store.end_sessions, at, f"ended by {who(request)}", None, subject
        )
        return json_response({"ended": ended})

    def routes(self) -> list[Route]:
        admin = requires("admin")
        return [
            Route("/api/v1/admin/sign-out", admin(self.sign_out), methods=["POST"]),
            Route("/api/v1/admin/hide", admin(self.hide), methods=["POST"]),
            Route("/api/v1/admin/unhide", admin(self.unhide), methods=["POST"]),
            Route("/api/v1/admin/hidden", admin(self.hidden), methods=["GET"]),
        ]


def _request(body: bytes) -> tuple[str, str, str, str | None]:
    """(kind, namespace, name, reason) of a hide or unhide request body."""
    doc = json_object(body, '{"type": …, "namespace": …, "name": …}')
    kind, namespace, name = entity_named(doc, "type", KINDS)
    reason = doc.get("reason")
    if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON):
        raise bad_body(f"reason must be a string of at most {MAX_REASON} characters")
    return kind, namespace, name, reason


def _targets(
    reader: GraphReader, action: str, kind: str, namespace: str, name: str
) -> list[tuple[str, str]]:
    """The (namespace, name) identities to write entries for."""
    ids = Identities(reader)
    given = DatasetId(namespace, name)
    if action == "hide":
        if not _known(reader, ids, kind, given):
            what = f"namespace {namespace}" if kind == "namespace" else f"{kind} {namespace} {name}"
            raise not_found(f"No {what} is known: nothing to hide.")
        return [(namespace, name)]
    if kind != "dataset":
        return [(namespace, name)]
    # Every hidden identity of the node, so that the node is shown again.
    node = ids.canonical([given])[given]
    hidden = Hidden(reader, ids).datasets
    members = [m for m in ids.members([node])[node] if m in hidden]
    return [(m.namespace, m.name) for m in sorted({given, *members})]


def _known(reader: GraphReader, ids: Identities, kind: str, given: DatasetId) -> bool:
    """Whether the graph knows the dataset (by any identity), job or namespace."""
    namespace, name = given
    if kind == "dataset":
        return bool(reader.rows(DatasetRow, ("ns", "name"), [ids.canonical([given])[given]]))
    if kind == "job":
        return bool(reader.rows(JobRow, ("ns", "name"), [(namespace, name)]))
    return bool(
        reader.page(DatasetRow, None, 1, namespace) or reader.page(JobRow, None, 1, namespace)
    )


def draft(entry: AdminEntry, by: Writer | None) -> DeliveryDraft:
    """An administrative entry as a delivery for the log (route ``admin``), appended by
    ``by``."""
    body = entry.to_json()
    return DeliveryDraft(
        provider_key=PROVIDER_KEY,
        idempotency_key=None,
        body_sha256=hashlib.sha256(body).hexdigest(),
        body=body,
        route=ROUTE,
        item_count=1,
        rejections=(),
        received_at=entry.at,
        writer=by,
    )


def _entry_json(entry: AdminEntry, receipt: Receipt) -> dict[str, Any]:
    return {
        "type": entry.kind,
        "namespace": entry.namespace,
        "name": entry.name if entry.kind != "namespace" else None,
        "delivery_id": receipt.delivery_id,
    }


def who(request: Request) -> str | None:
    """Who asked (Principal.who), None while auth is off."""
    principal: Principal | None = getattr(request.state, "principal", None)
    return principal.who if principal is not None else None


def writer(request: Request) -> Writer | None:
    """The request's authenticated writer, recorded with its deliveries
    (docs/security.md#audit); None while auth is off."""
    principal: Principal | None = getattr(request.state, "principal", None)
    return principal.writer if principal is not None else None


def _order(entry: dict[str, Any]) -> tuple[str, str, str]:
    return (entry["type"], entry["namespace"], entry["name"] or "")
