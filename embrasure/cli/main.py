"""The ``embrasure`` command. Flags come from settings.SETTINGS, so every flag has its
EMBRASURE_* environment variable and its line in docs/settings.md."""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from embrasure import logs
from embrasure.cli import admin as cli_admin
from embrasure.cli import archive as cli_archive
from embrasure.cli import consume as cli_consume
from embrasure.cli import grants as cli_grants
from embrasure.cli import graph as cli_graph
from embrasure.cli import import_marquez as cli_import_marquez
from embrasure.cli import ingest as cli_ingest
from embrasure.cli import retention as cli_retention
from embrasure.cli import subscriptions as cli_subscriptions
from embrasure.cli import tokens as cli_tokens
from embrasure.cli.options import fail, load_settings, open_log_store, setting_options
from embrasure.errors import EmbrasureError
from embrasure.processes import stopping
from embrasure.projector.collector import tune_gc
from embrasure.settings import BY_NAME, Settings, markdown_table
from embrasure.store import migrations

if TYPE_CHECKING:  # imported where a server starts: a CLI command need not load it
    import uvicorn

log = logging.getLogger("embrasure.server")


@click.group()
@click.version_option(package_name="embrasure")
def main() -> None:
    """Embrasure: an OpenLineage lineage server."""


@main.command()
@setting_options(
    "host",
    "port",
    "insecure",
    "oidc_issuer",
    "oidc_audience",
    "oidc_groups_claim",
    "oidc_leeway_seconds",
    "oidc_client_id",
    "oidc_client_secret",
    "oidc_scopes",
    "oidc_session_hours",
    "oidc_session_idle_minutes",
    "db",
    "marquez_port",
    "public_url",
    "subscription_secrets_key",
    "webhook_allow",
    "webhook_ports",
    "no_projector",
    "single_process",
    "upgrade",
    "read_workers",
    "read_nice",
    "read_timeout_seconds",
    "heavy_reads",
    "group_commit_max",
    "group_commit_max_bytes",
    "max_backlog_items",
    "min_free_disk_mb",
    "max_body_memory_mb",
    "body_timeout_seconds",
    "retry_after",
    "graceful_shutdown_seconds",
    "log_level",
    "log_format",
    "db_pool_size",
    "projector_batch_events",
    "projector_processes",
    "notify_settle_seconds",
    "reproject_batch_events",
    "log_compression",
    "retain_log",
    "archive",
    "retain_runs",
    "retention_interval",
    *cli_consume.KAFKA_SETTINGS,
)
# The sockets a supervising serve bound (processes/supervisor.py): its receiver serves
# them, and forwards reads to its read processes' Unix sockets (web/forward.py), which
# are served by processes started with --reads.
@click.option("--listen-fd", "listen_fds", type=int, multiple=True, hidden=True)
@click.option("--forward-reads", "forward_reads", multiple=True, hidden=True)
@click.option("--reads", "reads_only", is_flag=True, hidden=True)
def serve(
    listen_fds: tuple[int, ...], forward_reads: tuple[str, ...], reads_only: bool, **flags: Any
) -> None:
    """Run the server on --host:--port: the receiver, the read processes, the projector,
    retention and the Kafka consumer, each in a process of its own (--single-process:
    threads of this one)."""
    settings = load_settings(flags)
    if reads_only:
        # A read process (docs/operations.md#reads-under-load): it gives the CPU to the
        # receiver and the projector first.
        os.nice(settings.read_nice)
    logs.configure(settings.log_level, settings.log_format)
    if listen_fds:
        sockets = [socket.socket(fileno=fd) for fd in listen_fds]
    else:
        sockets = [listen(settings.host, settings.port)]  # a bad address creates no database
        if settings.marquez_port:
            sockets.append(listen(settings.host, settings.marquez_port))
    try:
        store = open_log_store(settings)
    except EmbrasureError as exc:
        for s in sockets:
            s.close()
        fail(str(exc))
    refuse_auth_off(settings, store, sockets)
    if settings.single_process or listen_fds:
        serve_here(settings, store, sockets, forward_reads, reads_only)
    else:
        store.close()  # upgraded and checked: the processes open their own
        supervise(settings, sockets)


def refuse_auth_off(settings: Settings, store: Any, sockets: list[socket.socket]) -> None:
    """docs/security.md: no token and no issuer means auth is off, which only loopback may
    get away with."""
    from embrasure.web.auth import is_loopback

    auth_on = settings.oidc_issuer or store.tokens()
    if not (is_loopback(settings.host) or settings.insecure or auth_on):
        store.close()
        for s in sockets:
            s.close()
        fail(
            f"refusing to serve {settings.host} with auth off (no bearer token exists): "
            "create one with `embrasure tokens create --scope ... --db ...`, or pass "
            "--insecure to serve anyone who can reach this address"
        )


def supervise(settings: Settings, sockets: list[socket.socket]) -> None:
    """The processes of docs/operations.md#processes, until SIGTERM/SIGINT."""
    import shutil
    import tempfile
    from pathlib import Path

    from embrasure.processes.status import STATUS_DIR_ENV, StatusBoard
    from embrasure.processes.supervisor import Stage, Supervisor

    for s in sockets:
        s.listen(LISTEN_BACKLOG)  # connections wait here while a receiver (re)starts
    board_dir = Path(tempfile.mkdtemp(prefix="embrasure-processes-"))
    env = {**os.environ, **settings.environment(), STATUS_DIR_ENV: str(board_dir)}
    off = {BY_NAME["retain_log"].env: "", BY_NAME["retain_runs"].env: ""}
    fds = [s.fileno() for s in sockets]
    receiver_args = ["serve", "--no-projector", *(f"--listen-fd={fd}" for fd in fds)]
    # The read processes (docs/operations.md#reads-under-load) share a Unix socket per
    # port, which the kernel hands each connection of the receiver's to one of them.
    read_sockets = [
        unix_listen(str(board_dir / f"reads-{n}.sock"))
        for n in range(len(fds) if settings.read_workers else 0)
    ]
    read_fds = [s.fileno() for s in read_sockets]
    receiver_args += [f"--forward-reads={s.getsockname()}" for s in read_sockets]
    stages = [
        Stage(
            "receiver",
            receiver_args,
            {**env, **off, BY_NAME["kafka_bootstrap"].env: ""},
            tuple(fds),
            settings.graceful_shutdown_seconds,
        )
    ]
    reader_args = ["serve", "--reads", *(f"--listen-fd={fd}" for fd in read_fds)]
    reader_env = {**env, **off, BY_NAME["kafka_bootstrap"].env: ""}
    for n in range(settings.read_workers):
        stages.append(
            Stage(f"reads-{n + 1}", reader_args, reader_env, tuple(read_fds), 5.0, serves=True)
        )
    if not settings.no_projector:
        stages.append(Stage("projector", ["project"], {**env, **off}))
    if settings.retain_log or settings.retain_runs:
        stages.append(Stage("retention", ["retention", "--loop"], env))
    stages.append(Stage("notifier", ["notify"], env))  # docs/notifications.md#delivery
    if settings.kafka_bootstrap:
        stages.append(Stage("kafka", ["consume"], env))
    shown = show_address(sockets[0])
    log.info("listening on http://%s", shown)
    if settings.marquez_port:
        log.info("Marquez's API on http://%s", show_address(sockets[1]))
    try:
        Supervisor(stages, StatusBoard(board_dir)).run()
    finally:
        for s in [*sockets, *read_sockets]:
            s.close()
        shutil.rmtree(board_dir, ignore_errors=True)


LISTEN_BACKLOG = 2048  # uvicorn's own default


def _announcing_server() -> type[uvicorn.Server]:
    """A uvicorn server that, once it serves, tells the receiver's /readyz so (a read
    process of serve's: processes/status.py ``serving``)."""
    import uvicorn

    from embrasure.processes.status import StatusBoard, announce_serving

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            board = StatusBoard.from_environment()
            if self.started and board is not None:
                announce_serving(board)

    return Announcing


def unix_listen(path: str) -> socket.socket:
    """A listening Unix socket at ``path`` (the read processes': only this user's)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    os.chmod(path, 0o600)
    sock.listen(LISTEN_BACKLOG)
    return sock


def show_address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"  # RFC 3986: IPv6 in []


def serve_here(
    settings: Settings,
    store: Any,
    sockets: list[socket.socket],
    forward_reads: Sequence[str] = (),
    reads_only: bool = False,
) -> None:
    """The server in this process: the receiver, and unless --no-projector the projector,
    retention and the Kafka consumer as its threads; with ``forward_reads``, its reads
    forwarded to those sockets; ``reads_only``: a read process of serve's."""
    import uvicorn
    from starlette.types import ASGIApp

    from embrasure.app import build_app
    from embrasure.lifecycle.trimmed import ArchivedBodies
    from embrasure.marquez.http import PortDispatch
    from embrasure.notify.sender import Sender
    from embrasure.notify.targets import webhook_targets
    from embrasure.projector.worker import Projector

    archived = ArchivedBodies(settings.archive)
    projector = (
        None
        if settings.no_projector or reads_only
        else Projector(store, projector_limits(settings), archived=archived)
    )
    retention = None if reads_only else cli_retention.retention_loop(settings, store)
    app = build_app(
        settings,
        store,
        projector=projector,
        retention=retention,
        kafka=None if reads_only else cli_consume.kafka_source(settings),
        forward_reads_to=forward_reads,
    )
    served: ASGIApp = app
    if len(sockets) > 1:  # the Marquez port's (a read process's: its Unix socket's path)
        address = sockets[1].getsockname()
        marquez_port = address if isinstance(address, str) else address[1]
        served = PortDispatch(app, marquez_port, app.state.marquez)
    config = uvicorn.Config(
        served,
        host=settings.host,
        port=settings.port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level=settings.log_level,
        log_config=None,  # uvicorn's loggers go through ours (logs.configure): one format
        timeout_graceful_shutdown=settings.graceful_shutdown_seconds,
    )
    tune_gc()
    server = (_announcing_server() if reads_only else uvicorn.Server)(config)
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then re-raises the signal to the
    # handler that was installed before it started. That handler is the server's own:
    # re-raised, it changes nothing (we close the store and exit 0), and a signal that
    # arrives before uvicorn has installed its handler (a supervisor that dies while this
    # process starts: processes/supervisor.py) stops the server as soon as it has
    # started, where a no-op would drop it and leave the process serving on, orphaned.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, server.handle_exit)
    if not reads_only:
        log.info("listening on http://%s", show_address(sockets[0]))
    if settings.marquez_port and not reads_only:
        log.info("Marquez's API on http://%s", show_address(sockets[1]))
    # The notifications' sender (docs/notifications.md#delivery), a thread of this
    # process beside its projector (a receiver alone, a stage of `serve`, has neither).
    stop_sending = threading.Event()
    sender = threading.Thread(
        target=Sender(
            store,
            settings.ui_url(),
            settings.subscription_secrets_key,
            targets=webhook_targets(settings),
        ).run,
        args=(stop_sending,),
        name="embrasure-notify",
        daemon=True,
    )
    if projector is not None:
        sender.start()
    try:
        server.run(sockets=sockets)
    finally:
        stop_sending.set()
        if sender.is_alive():
            sender.join(timeout=15)
        store.close()


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound before anything else runs: a port another process
    holds, or an address this machine does not have, is one line (docs/cli.md)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        fail(f"--host {host!r} is not an address or a name this machine resolves ({exc.strerror})")
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        why = exc.strerror or str(exc)
        if exc.errno == errno.EADDRINUSE:
            why += ": another process listens there (stop it, or pass another --port)"
        fail(f"cannot listen on {host}:{port}: {why}")
    return sock


def projector_limits(settings: Settings) -> Any:
    from datetime import timedelta

    from embrasure.projector.worker import ProjectorLimits

    return ProjectorLimits(
        batch_events=settings.projector_batch_events,
        notify_settle=timedelta(seconds=settings.notify_settle_seconds),
        rebuild_events=settings.reproject_batch_events,
        processes=settings.projector_processes,
    )


def open_db(flags: dict[str, Any]) -> Any:
    """The store of a command that works on an existing database (never creates one)."""
    from embrasure.store import open_store, redact

    settings = load_settings(flags)
    try:
        return open_store(settings.db, pool_size=settings.db_pool_size, create=False)
    except EmbrasureError as exc:
        fail(f"--db {redact(settings.db)}: {exc}")


@main.command()
@setting_options(
    "db",
    "log_level",
    "log_format",
    "db_pool_size",
    "projector_batch_events",
    "projector_processes",
    "notify_settle_seconds",
    "reproject_batch_events",
    "retain_log",
    "archive",
    "retain_runs",
    "retention_interval",
)
def project(**flags: Any) -> None:
    """Run the projector alone (beside `serve --no-projector`), until SIGTERM. On
    PostgreSQL, several may run at once, in any processes: they share the log. With
    --retain-log or --retain-runs, also a retention pass every --retention-interval."""
    from embrasure.lifecycle.trimmed import ArchivedBodies
    from embrasure.projector.worker import Projector
    from embrasure.store import redact

    settings = load_settings(flags)
    logs.configure(settings.log_level, settings.log_format)
    store = open_db(flags)
    # One line on start, as serve's "listening on": what it works on, and how much.
    with store.reader() as reader:
        backlog = reader.backlog()
    position = store.position()
    log.info(
        "projecting %s from position %d: %d deliveries (%d events) pending",
        redact(settings.db),
        position,
        backlog.deliveries,
        backlog.items,
        extra={"position": position, "pending_deliveries": backlog.deliveries},
    )
    archived = ArchivedBodies(settings.archive)
    projector = Projector(store, projector_limits(settings), archived=archived)
    retention = cli_retention.retention_loop(settings, store)
    tune_gc()
    stop = stopping.stop_event()
    projector.start()
    if retention is not None:
        retention.start()
    stopping.wait_until_set(stop)
    if retention is not None:
        retention.stop()
    projector.stop()
    store.close()


@main.command()
@setting_options(
    "db",
    "public_url",
    "host",
    "port",
    "subscription_secrets_key",
    "webhook_allow",
    "webhook_ports",
    "log_level",
    "log_format",
    "db_pool_size",
)
def notify(**flags: Any) -> None:
    """Send the notifications the projector decided (docs/notifications.md#delivery),
    until SIGTERM; `serve` runs it as a process of its own."""
    from embrasure.notify.sender import Sender
    from embrasure.notify.targets import webhook_targets

    settings = load_settings(flags)
    logs.configure(settings.log_level, settings.log_format)
    store = open_db(flags)
    stop = stopping.stop_event()
    log.info("sending notifications")
    try:
        Sender(
            store,
            settings.ui_url(),
            settings.subscription_secrets_key,
            targets=webhook_targets(settings),
        ).run(stop)
    finally:
        store.close()


@main.command()
@setting_options(
    "db", "projector_batch_events", "projector_processes", "reproject_batch_events", "archive"
)
def reproject(**flags: Any) -> None:
    """Rebuild the graph from the whole log beside the served one, then swap to it.
    Bodies retention moved out of the database are read from --archive."""
    import time

    from embrasure.lifecycle.trimmed import ArchivedBodies
    from embrasure.projector.worker import reproject as rebuild

    settings = load_settings(flags)
    store = open_db(flags)
    tune_gc()
    started = time.monotonic()
    try:
        generation = rebuild(store, projector_limits(settings), ArchivedBodies(settings.archive))
    except EmbrasureError as exc:
        fail(str(exc))
    finally:
        store.close()
    click.echo(
        f"reprojected into graph generation {generation} in {time.monotonic() - started:.1f} s"
    )


@main.command()
@setting_options("db")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    default="-",
    help="File to write (default: standard output).",
)
def export(output: str, **flags: Any) -> None:
    """Write the whole graph as canonical JSON (the same as GET /api/v1/export)."""
    from embrasure.query.export import export_chunks

    # A file appears only once whole: the export is written beside it, then renamed
    # (not standard output, a pipe or a device such as /dev/null).
    direct = output == "-" or (os.path.exists(output) and not os.path.isfile(output))
    target = output if direct else output + ".partial"
    store = open_db(flags)
    try:
        with store.reader() as reader, click.open_file(target, "wb") as out:
            for piece in export_chunks(reader):
                out.write(piece)
            out.write(b"\n")
    finally:
        store.close()
    if target != output:
        os.replace(target, output)


@main.command("settings")
def settings_command() -> None:
    """Print every setting (flag, environment variable, default) as a Markdown table."""
    click.echo(markdown_table(), nl=False)


@main.group()
def db() -> None:
    """Database schema commands."""


@db.command()
@setting_options("db")
def upgrade(**flags: Any) -> None:
    """Apply pending schema migrations (safe to run from several processes at once)."""
    from embrasure.store import open_store, redact

    settings = load_settings(flags)
    try:
        store = open_store(settings.db, upgrade=True)
    except EmbrasureError as exc:
        fail(str(exc))
    store.close()
    applied, name = store.migrations_applied, redact(settings.db)
    latest = migrations.LATEST
    if applied and applied[0] == 1:
        click.echo(f"{name}: schema created (version {latest})")
    elif applied:
        click.echo(f"{name}: schema upgraded from version {applied[0] - 1} to {latest}")
    else:
        click.echo(f"{name}: schema is up to date (version {latest})")


for command in (
    cli_ingest.COMMANDS
    + cli_graph.COMMANDS
    + cli_tokens.COMMANDS
    + cli_grants.COMMANDS
    + cli_subscriptions.COMMANDS
    + cli_admin.COMMANDS
    + cli_archive.COMMANDS
    + cli_retention.COMMANDS
    + cli_consume.COMMANDS
    + cli_import_marquez.COMMANDS
):
    main.add_command(command)


if __name__ == "__main__":
    main()
