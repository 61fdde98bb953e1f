"""Shared fixtures: real SQLite files, real PostgreSQL databases, a real server process
over real HTTP.

``db_url`` runs a test on both backends: a new SQLite file, and a new PostgreSQL database
(``CREATE DATABASE embrasure_test_<random>`` on EMBRASURE_TEST_PG, default
postgresql://postgres@127.0.0.1:5432/postgres, dropped afterwards). When no PostgreSQL
answers there, the PostgreSQL half is skipped and says why.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import httpx
import orjson
import psycopg
import pytest
from hypothesis import settings
from starlette.testclient import TestClient

from embrasure.app import build_app
from embrasure.cli import demo
from embrasure.projector.worker import Projector
from embrasure.receiver.bounds import Limits
from embrasure.settings import Settings
from embrasure.store import open_store
from embrasure.store.migrations import GRAPH_FILE
from embrasure.store.sqlite_files import graph_path_of

import kafka_broker
from http_client import HTTP

if TYPE_CHECKING:
    from click.testing import Result

    from embrasure.store import Store

    import graph_api

# No per-example deadline: these tests check behaviour, not speed (bench/ measures that),
# and on a loaded 2-core machine a pure function can take longer than hypothesis's 200 ms.
settings.register_profile("embrasure", deadline=None)
settings.load_profile("embrasure")

# The OpenLineage spec and the producers' corpus: ../shared beside the checkout, or where
# EMBRASURE_TEST_SHARED says (a clone elsewhere); without it the conformance tests skip.
SHARED = Path(
    os.environ.get("EMBRASURE_TEST_SHARED") or Path(__file__).resolve().parents[2] / "shared"
)
OPENLINEAGE = SHARED / "openlineage"


# The smallest valid RunEvent, for tests about transport rather than lineage.
MINIMAL_EVENT = {
    "eventType": "START",
    "eventTime": "2026-11-30T09:00:00Z",
    "producer": "https://example.com/test",
    "run": {"runId": "0190a2d4-5f1c-7d2e-9a3b-4c5d6e7f8091"},
    "job": {"namespace": "demo", "name": "hello"},
}


def one_error_line(result: Result) -> str:
    """The command failed with exactly one `embrasure: error:` line and no traceback."""
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("embrasure: error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PG_ADMIN = os.environ.get("EMBRASURE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
BACKENDS = ("sqlite", "postgresql")


@functools.cache
def pg_unreachable() -> str | None:
    """Why the PostgreSQL half of the suite cannot run, or None when it can."""
    try:
        psycopg.connect(PG_ADMIN, connect_timeout=3).close()
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"no PostgreSQL at {PG_ADMIN} ({first}): PostgreSQL tests skipped"
    return None


def pg_url(database: str) -> str:
    return PG_ADMIN.rsplit("/", 1)[0] + "/" + database


_templates: list[str] = []  # the session's migrated template database, once made


def pg_template() -> str:
    """A database with the current schema, made once a session: a test database copied
    from it skips the migrations (~0.25 s a test). Dropped at the end of the session."""
    if not _templates:
        name = f"embrasure_template_{secrets.token_hex(6)}"
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        open_store(pg_url(name)).close()
        _templates.append(name)
    return _templates[0]


# The suite's slowest files, longest first (seconds of a run's --durations=0 on this
# 2-core machine, 2026-12-07), run before every other file: under xdist's --dist loadfile
# a file runs whole on one worker, and a long one started late was the run's tail while
# the other workers sat idle. Only an order: a file not named runs after these.
SLOWEST_FIRST = (
    "tests/receiver/test_kafka_faults.py",  # 163
    "tests/store/test_processes.py",  # 108
    "tests/notify/test_demo_notifications.py",  # 102
    "tests/web/test_route_security.py",  # 102
    "tests/web/test_auth.py",  # 70
    "tests/producers/test_spark_capture.py",  # 69
    "tests/receiver/test_receiver.py",  # 61
    "tests/ui/test_ui_browser.py",  # 60
    "tests/lifecycle/test_retention_faults.py",  # 59
    "tests/test_docs.py",  # 59
    "tests/web/test_jwt.py",  # 55
    "tests/producers/test_producers_hierarchy.py",  # 55
    "tests/projector/test_order_independence.py",  # 54
    "tests/store/test_durability.py",  # 54
    "tests/notify/test_downstream_notifications.py",  # 54
    "tests/lifecycle/test_retention.py",  # 53
    "tests/store/test_scale_out.py",  # 51
    "tests/producers/test_producers_client.py",  # 50
    "tests/receiver/test_kafka.py",  # 49
    "tests/cli/test_cli_commands.py",  # 47
    "tests/producers/test_flink_agent.py",  # 45
    "tests/ui/test_sign_in.py",  # 45
    "tests/store/test_serve_processes.py",  # 44
    "tests/producers/test_spark_agent.py",  # 39
    "tests/cli/test_import_marquez.py",  # 37
    "tests/producers/test_flink_capture.py",  # 37
    "tests/notify/test_notify_server.py",  # 35
    "tests/store/test_postgres.py",  # 33
    "tests/query/test_as_of.py",  # 31
    "tests/web/test_admin.py",  # 30
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest files first (SLOWEST_FIRST); scripts/test keeps this order for xdist
    (--no-loadscope-reorder). A stable sort: within a file, and after the named ones,
    the order stays as collected."""
    rank = {path: n for n, path in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for name in _templates:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def unavailable(what: str, reason: str) -> NoReturn:
    """Skip for want of ``what`` (a tool the tests run for real), or fail under CI,
    which must run every half of the suite."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"no {what}, which CI needs: {reason}")
    pytest.skip(f"no {what}: {reason}")


def no_postgresql() -> NoReturn:
    """Skip the PostgreSQL half, or fail under CI (it must run there)."""
    reason = pg_unreachable() or "no PostgreSQL server"
    if os.environ.get("CI") == "true":
        pytest.fail(reason.replace("tests skipped", "tests cannot run under CI"))
    pytest.skip(reason)


@contextlib.contextmanager
def pg_database(migrated: bool = False) -> Iterator[str]:
    """A new PostgreSQL database for one test, empty or (``migrated``) with the schema
    already applied, as Embrasure leaves a new database; dropped afterwards."""
    if pg_unreachable() is not None:
        no_postgresql()
    name = f"embrasure_test_{secrets.token_hex(6)}"
    template = f" TEMPLATE {pg_template()}" if migrated else ""
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}{template}")
    try:
        yield pg_url(name)
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def pg_reset(url: str) -> str:
    """Empty a test database again (faster than a new one, for hypothesis examples)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    return url


def run_sql(db_url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """One statement straight on the database, outside Embrasure (``?`` placeholders):
    to set a test's scene as another program would have left it."""
    if db_url.startswith("sqlite:///"):
        with contextlib.closing(sqlite_files(db_url.removeprefix("sqlite:///"))) as conn:
            rows = conn.execute(sql, params).fetchall()
            conn.commit()
            return rows
    with psycopg.connect(db_url, autocommit=True) as pg:
        cursor = pg.execute(sql.replace("?", "%s"), params)
        return cursor.fetchall() if cursor.description else []


def sqlite_files(path: str | Path) -> sqlite3.Connection:
    """A plain connection to a SQLite store's two files (store/sqlite_files.py): the
    graph's as main (so a table made is a graph table), the log's attached as ``log``;
    either's tables named unqualified."""
    conn = sqlite3.connect(graph_path_of(str(path)))
    conn.execute("ATTACH DATABASE ? AS log", (str(path),))
    return conn


def as_one_sqlite_file(path: Path | str, record: bool = True) -> None:
    """The SQLite store at ``path`` as a version before 17 left it: one file, the
    graph's tables (made by the same DDL) in the log's, versions 17 and later not
    recorded (unless ``record`` is false: a test that sets the versions itself)."""
    graph = graph_path_of(str(path))
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("ATTACH DATABASE ? AS graph", (graph,))
        conn.execute("BEGIN")
        rows = conn.execute(
            "SELECT type, name, sql FROM graph.sqlite_master"
            " WHERE type IN ('table', 'index') AND sql IS NOT NULL ORDER BY type DESC"
        ).fetchall()
        for kind, name, sql in rows:
            conn.execute(sql)  # unqualified: made in the log's file
            if kind == "table":
                conn.execute(f"INSERT INTO main.{name} SELECT * FROM graph.{name}")
        if record:  # 17 and what came after it (their tables gone: made again)
            conn.execute("DELETE FROM embrasure_schema WHERE version >= ?", (GRAPH_FILE,))
            conn.execute("DROP TABLE IF EXISTS sessions")  # 18
        conn.execute("COMMIT")
        # The graph's file emptied, not removed: a store still open keeps its file.
        conn.execute("BEGIN")
        for kind, name, _sql in rows:
            if kind == "table":
                conn.execute(f"DROP TABLE graph.{name}")
        conn.execute("COMMIT")


def pytest_report_header() -> str:
    return f"PostgreSQL: {pg_unreachable() or PG_ADMIN + ' (reachable)'}"


@pytest.fixture(autouse=True)
def _no_terminal_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-xdist's workers (execnet) export COLUMNS=80 and LINES=24, and the CLI's
    tables wrap to COLUMNS when it is set (cli/options.py): every test sees what a pipe
    without them sees, serial or not."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A new database on each backend: the test runs twice. (On PostgreSQL the schema
    is there already, copied from a template; ``empty_db_url`` has none.)"""
    if backend == "sqlite":
        yield sqlite_url(tmp_path / "embrasure.db")
    else:
        with pg_database(migrated=True) as url:
            yield url


@pytest.fixture
def empty_db_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A new, empty database on each backend: for what creates the schema."""
    if backend == "sqlite":
        yield sqlite_url(tmp_path / "embrasure.db")
    else:
        with pg_database() as url:
            yield url


@pytest.fixture
def pg_db() -> Iterator[str]:
    """A new PostgreSQL database (with the schema), for what only PostgreSQL has."""
    with pg_database(migrated=True) as url:
        yield url


@pytest.fixture
def fresh_db(backend: str, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """A function returning the URL of an empty database each time it is called, for
    hypothesis examples: a new SQLite file; on PostgreSQL, one of two databases in turn,
    emptied (faster than a new one), so that two may be open at once."""
    if backend == "sqlite":
        yield lambda: sqlite_url(Path(tempfile.mkdtemp(dir=tmp_path)) / "e.db")
        return
    with pg_database() as first, pg_database() as second:
        turns = itertools.cycle([first, second])
        yield lambda: pg_reset(next(turns))


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process under it (serve's processes are in groups of their own)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            parent = int(stat.read_text().rpartition(")")[2].split()[1])
            children.setdefault(parent, []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo += children.get(tree[-1], [])
    return tree


def demo_graph(prefix: str) -> tuple[str, Store]:
    """A SQLite file holding `embrasure demo`'s platform, ingested over the API and
    projected (removed at exit): the graph the schemathesis modules answer about, made
    when they are imported, since they parametrize over operations at collection."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    db = f"sqlite:///{folder / 'api.db'}"
    store = open_store(db)
    with TestClient(build_app(Settings(db=db), store)) as client:
        reply = client.post(
            "/api/v1/lineage/batch",
            content=orjson.dumps(demo.events()),
            headers={"Content-Type": "application/json"},
        )
        assert reply.status_code == 202, reply.text
    Projector(store).run_until_caught_up()
    return db, store


def stacks(*pids: int) -> str:
    """Each of ``pids`` and the processes under it: its command line and every thread's
    Python stack (py-spy dump), for the message of a test that found it still running."""
    py_spy = Path(sys.executable).parent / "py-spy"
    out = []
    for pid in [p for top in pids for p in process_tree(top)]:
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            out.append(f"pid {pid}: {cmdline}")
        try:
            dump = subprocess.run(
                [str(py_spy), "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60
            )
            out.append(dump.stdout + dump.stderr)
        except (OSError, subprocess.TimeoutExpired) as exc:
            out.append(f"(no py-spy dump: {exc})")
    return "\n".join(out)


def crash(pid: int) -> None:
    """SIGKILL to ``pid`` and every process under it at once, as a power cut would. Each
    is stopped first (SIGSTOP, the tree walked again until no new process appears), so
    none runs between the kills: serve's processes ask for SIGTERM when their parent
    dies (processes/supervisor.py), and a child told of its parent's death would shut
    down cleanly, which is not a crash."""
    stopped: list[int] = []
    while fresh := [p for p in process_tree(pid) if p not in stopped]:
        for p in fresh:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGSTOP)
        stopped += fresh
    for p in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)


class ServerProcess:
    """`embrasure serve` in a child process, on a free port, with its own database (a
    SQLite file's path, or any database URL)."""

    def __init__(
        self,
        db: Path | str,
        *extra: str,
        wrapper: tuple[str, ...] = (),
        log_dir: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.db_url = sqlite_url(db) if isinstance(db, Path) else db
        self.extra = extra
        self.env = {**os.environ, **env} if env else None  # EMBRASURE_* set for it alone
        self.wrapper = wrapper
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        if isinstance(db, Path):
            self.log_path = db.with_suffix(f".{self.port}.log")
        else:
            self.log_path = (log_dir or Path(tempfile.gettempdir())) / f"serve.{self.port}.log"

    def start(self, timeout: float = 20.0) -> ServerProcess:
        cmd = [
            *self.wrapper,
            sys.executable,
            "-m",
            "embrasure",
            "serve",
            "--db",
            self.db_url,
            "--port",
            str(self.port),
            *self.extra,
        ]
        with open(self.log_path, "ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log_path.read_text()}")
            with contextlib.suppress(httpx.HTTPError, ValueError):
                # Answering, and its read processes serving (docs/operations.md#health):
                # /readyz is 503 for other reasons too, which tests cause on purpose.
                ready = HTTP.get(self.url + "/readyz", timeout=1)
                if ready.status_code == 200 or "starting" not in ready.json():
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"server did not start:\n{self.log_path.read_text()}")

    def kill(self) -> None:
        """serve and every process it runs (docs/operations.md#processes) killed at once
        (``crash``): no chance to clean up."""
        assert self.proc is not None
        crash(self.proc.pid)
        self.proc.wait()

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "embrasure.db"


@pytest.fixture
def server(db_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(db_url, log_dir=tmp_path).start()
    try:
        yield proc
    finally:
        proc.stop()


def make_client(db: Path | str, limits: Limits | None = None) -> TestClient:
    url = sqlite_url(db) if isinstance(db, Path) else db
    store = open_store(url)
    app = build_app(Settings(db=url), store, limits)
    return TestClient(app)


@pytest.fixture
def client(db_url: str) -> Iterator[TestClient]:
    """The app in-process (ASGI) on a real database of each backend, lifespan running."""
    with make_client(db_url) as c:
        yield c
    c.app.state.store.close()  # type: ignore[attr-defined]


def requires_shared() -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not OPENLINEAGE.is_dir(), reason=f"{OPENLINEAGE} is absent (conformance data)"
    )


os.environ.setdefault("EMBRASURE_LOG_LEVEL", "warning")


@pytest.fixture
def marquez(client: TestClient) -> Iterator[TestClient]:
    """The Marquez port's app (embrasure/marquez/) in process, beside the ``client`` app
    whose lifespan runs the group commit (events are posted there, with ``api``)."""
    with TestClient(client.app.state.marquez) as c:  # type: ignore[attr-defined]
        yield c


@pytest.fixture
def api(client: TestClient) -> graph_api.Api:
    """The read API's test client (tests/graph_api.py) over the ``client`` app."""
    from graph_api import Api  # imported here: graph_api imports this module

    return Api(client)


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka_broker.Broker]:
    """A real Kafka broker (tests/kafka_broker.py) shared by the session; tests use
    topics of their own. Without Java or Maven the Kafka tests are skipped, and fail
    under CI, as the PostgreSQL half does."""
    broker = kafka_broker.Broker(tmp_path_factory.mktemp("kafka"))
    try:
        broker.start()
    except kafka_broker.KafkaUnavailable as exc:
        unavailable("Kafka broker", str(exc))
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def receiver() -> Iterator[Any]:
    """A webhook receiver on loopback (tests/webhook_receiver.py), closed after the test."""
    from webhook_receiver import Receiver

    from embrasure.notify.webhooks import new_secret

    r = Receiver(new_secret())
    yield r
    r.close()
