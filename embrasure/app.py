"""build_app: the routes, the error handlers and the lifespan that runs group commit."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute

from embrasure import ui
from embrasure.access.jwt_bearer import IdentityProvider, JwtVerifier
from embrasure.access.sign_in import SignIn
from embrasure.errors import (
    ArchiveError,
    LogUnavailable,
    Problem,
    ReadTooLong,
    ReplayError,
    StoreUnavailable,
)
from embrasure.lifecycle.retention import RetentionLoop
from embrasure.lifecycle.trimmed import ArchivedBodies
from embrasure.marquez.http import build_marquez_app
from embrasure.marquez.routes import marquez_routes
from embrasure.notify.targets import webhook_targets
from embrasure.processes.status import (
    KafkaView,
    Processes,
    RemoteKafka,
    RemoteRetention,
    RetentionView,
    StatusBoard,
)
from embrasure.projector.worker import Projector
from embrasure.receiver.backpressure import Backpressure, BodyBudget
from embrasure.receiver.bounds import Limits, MiB
from embrasure.receiver.routes import Receiver
from embrasure.settings import Settings
from embrasure.store import Store
from embrasure.store.group_commit import GroupCommitter
from embrasure.web.admin import AdminApi
from embrasure.web.api import ReadApi
from embrasure.web.auth import Guard, requires
from embrasure.web.deliveries import DeliveriesApi
from embrasure.web.forward import Forwarder, forward_reads
from embrasure.web.health import Health
from embrasure.web.metrics import Metrics
from embrasure.web.openapi import document as openapi
from embrasure.web.read_bounds import ReadBounds
from embrasure.web.sign_in import routes as sign_in_routes
from embrasure.web.subscriptions import SubscriptionsApi

if TYPE_CHECKING:  # imported when used: librdkafka only loads for a server that consumes
    from embrasure.receiver.kafka import KafkaSource
from embrasure.web.responses import ErrorHandlers


def build_app(
    settings: Settings,
    store: Store,
    limits: Limits | None = None,
    projector: Projector | None = None,
    *,
    enforce_auth: bool = True,
    retention: RetentionLoop | None = None,
    kafka: KafkaSource | None = None,
    forward_reads_to: Sequence[str] = (),
) -> Starlette:
    """The ASGI app. With ``projector``, the lifespan also runs it in a thread; so with
    ``retention`` (``serve --retain-log``), whose passes /metrics and /readyz report, and
    with ``kafka`` (``serve --kafka-bootstrap``) a consumer whose messages join the HTTP
    deliveries' group commits.
    Without ``enforce_auth`` (a --db client command's in-process app) no token is asked
    for. With ``forward_reads_to`` (``serve``'s receiver: the read processes' sockets,
    the main port's then the Marquez port's), reads are forwarded (web/forward.py)."""
    committer = GroupCommitter(store, settings.group_commit_max, settings.group_commit_max_bytes)
    backpressure = Backpressure(
        store, settings.max_backlog_items, settings.min_free_disk_mb * MiB, settings.retry_after
    )
    budget = BodyBudget(settings.max_body_memory_mb * MiB, settings.retry_after)
    receiver = Receiver(
        committer,
        limits or Limits(),
        backpressure,
        budget,
        settings.body_timeout_seconds,
    )
    read_api = ReadApi(store)
    archived = ArchivedBodies(settings.archive)
    deliveries_api = DeliveriesApi(store, archived)
    admin_api = AdminApi(store, committer, settings.body_timeout_seconds)
    subscriptions_api = SubscriptionsApi(
        store,
        settings.body_timeout_seconds,
        settings.subscription_secrets_key,
        webhook_targets(settings),
    )
    consumer = None
    if kafka is not None:
        from embrasure.receiver.kafka import KafkaConsumer

        consumer = KafkaConsumer(
            kafka, committer, limits or Limits(), backpressure.refusing_now, settings.retry_after
        )
    # Under serve's supervisor, retention and the consumer are processes of their own:
    # what they report comes from the board (processes/status.py).
    board = StatusBoard.from_environment()
    processes = Processes(board) if board is not None else None
    retention_view: RetentionView | None = retention
    kafka_view: KafkaView | None = consumer
    if board is not None:
        retention_view = retention_view or RemoteRetention(board)
        kafka_view = kafka_view or RemoteKafka(board)
    health = Health(
        store, settings.retry_after, backpressure, retention_view, kafka_view, processes
    )

    bounds = ReadBounds(settings.read_timeout_seconds or None, settings.heavy_reads)
    forwarders = [Forwarder(path, bounds.timeout) for path in forward_reads_to]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        committer.start()
        if consumer is not None:
            consumer.start()
        if projector is not None:
            projector.start()
        if retention is not None:
            retention.start()
        try:
            yield
        finally:
            # Uvicorn has answered or dropped every request by now, and the consumer ends
            # with its batch committed; commit what is queued.
            if consumer is not None:
                consumer.stop()
            committer.stop()
            if retention is not None:
                retention.stop()  # between two segments: what it archived is recorded
            if projector is not None:
                projector.stop()
            for forwarder in forwarders:
                await forwarder.close()

    # Every error a route raises has one handler (web/responses.py), registered here.
    # Starlette picks the handler of the exception's nearest class: LogUnavailable's
    # wins over that of StoreUnavailable, its base.
    errors = ErrorHandlers(settings.retry_after)
    exception_handlers = {
        Problem: errors.problem,
        ReplayError: errors.replay_refused,
        ArchiveError: errors.archive_failed,
        LogUnavailable: errors.log_unavailable,
        ReadTooLong: errors.read_too_long,
        StoreUnavailable: errors.store_unavailable,
        HTTPException: errors.http_error,  # no such route (404) or method (405)
        Exception: errors.internal_error,
    }
    metrics = Metrics(store, backpressure, retention_view, kafka_view, processes)
    routes: list[BaseRoute] = [
        *receiver.routes(requires("ingest")),
        *deliveries_api.routes(),
        *read_api.routes(),
        *health.routes(),
        *admin_api.routes(),
        *subscriptions_api.routes(),
        *metrics.routes(),
        *ui.routes(),
        *sign_in_routes(),
    ]
    app = Starlette(
        routes=[*routes, *openapi.routes(limits, routes)],
        middleware=[metrics.middleware()],
        lifespan=lifespan,
        exception_handlers=exception_handlers,
    )
    app.state.store = store
    app.state.committer = committer
    app.state.read_bounds = bounds
    app.state.kafka = consumer
    verifier = jwt_verifier(settings)
    app.state.sign_in = sign_in = ui_sign_in(settings, verifier, store)
    app.state.guard = Guard(store, enforce=enforce_auth, jwt=verifier, sign_in=sign_in)
    # Marquez's API (docs/marquez.md), served on a port of its own by `serve
    # --marquez-port` (marquez/http.py PortDispatch): its routes, and producers' POSTs.
    app.state.marquez = build_marquez_app(
        app,
        [
            *marquez_routes(store, archived, committer, settings.body_timeout_seconds),
            *receiver.routes(requires("ingest")),
            *health.routes(),
        ],
        settings.retry_after,
    )
    for forwarder, served in zip(forwarders, (app, app.state.marquez), strict=False):
        forward_reads(served.routes, forwarder, bounds)
    return app


def jwt_verifier(settings: Settings) -> JwtVerifier | None:
    """The identity provider's JWTs, when --oidc-issuer names one
    (docs/security.md#jwts-from-the-identity-provider)."""
    if not settings.oidc_issuer:
        return None
    return JwtVerifier(
        IdentityProvider(settings.oidc_issuer),
        settings.oidc_audience,
        settings.oidc_groups_claim,
        settings.oidc_leeway_seconds,
    )


def ui_sign_in(settings: Settings, verifier: JwtVerifier | None, store: Store) -> SignIn | None:
    """People's sign-in to the web UI, when --oidc-client-id names its client."""
    if verifier is None or not settings.oidc_client_id:
        return None
    return SignIn(
        verifier,
        settings.oidc_client_id,
        settings.oidc_client_secret,
        settings.oidc_scopes,
        settings.oidc_session_hours * 3600,
        settings.oidc_session_idle_minutes * 60,
        store,
        lambda: store.server_secret("session-cookies"),
    )
