"""A small client of Embrasure's HTTP API over either transport the CLI offers (docs/cli.md):

- ``--url``: a running server, over HTTP (httpx);
- ``--db``: the database itself, through the very same ASGI app the server runs
  (``app.build_app``), driven in-process. The receiver's checks, receipts and duplicate
  detection, and the read API's answers, are then exactly the server's: there is one
  code path, not a second implementation of the API over the store.

Every failure the user can cause or meet (an unreachable URL, a bad --db, a problem+json
answer) becomes a ``ClientError`` whose message is one line naming the cause.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import http
import os
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import orjson

from embrasure.errors import EmbrasureError
from embrasure.settings import BY_NAME, Settings

# A read can walk a large graph; an ingest batch waits for its fsync. Connecting is quick
# or not at all.
TIMEOUT = httpx.Timeout(120.0, connect=5.0)
# The in-process app has no network address; httpx needs some base URL to build requests.
LOCAL_BASE = "http://embrasure.local"
# How often a client waiting for projection asks the server again.
POLL_SECONDS = 0.1

Params = Mapping[str, str | int | None]
# How many requests ``request_many`` has in flight at once.
CONCURRENT_REQUESTS = 32


@dataclasses.dataclass(frozen=True)
class Request:
    """One request of ``Client.request_many``."""

    method: str
    path: str
    params: Params | None = None
    content: bytes | None = None
    headers: Mapping[str, str] | None = None


class ClientError(EmbrasureError):
    """What went wrong, in one line, for ``embrasure: error: …``."""


@dataclasses.dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)

    def _problem(self) -> tuple[str | None, str | None]:
        """An RFC 9457 answer's title and detail (one line), when it is one."""
        try:
            doc = orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return None, None
        if not isinstance(doc, dict) or not isinstance(doc.get("detail"), str):
            return None, None
        title = doc.get("title")
        return (title if isinstance(title, str) else None), " ".join(doc["detail"].split())

    def problem(self, target: str) -> str:
        """The cause of an error answer in one line: a problem's title and detail."""
        title, detail = self._problem()
        if detail is not None:
            return f"{title}: {detail}" if title is not None else detail
        return f"{target} answered HTTP {self.status}"

    def status_line(self) -> str:
        """``404 Not Found``, and the problem's detail when the answer has one."""
        try:
            line = f"{self.status} {http.HTTPStatus(self.status).phrase}"
        except ValueError:
            line = f"HTTP {self.status}"
        _title, detail = self._problem()
        return line if detail is None else f"{line}: {detail}"


def _clean(params: Params | None) -> dict[str, str | int]:
    return {k: v for k, v in (params or {}).items() if v is not None}


class Client(abc.ABC):
    """The API as the CLI uses it; ``target`` names the server or database in messages."""

    target: str

    @abc.abstractmethod
    def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """Send one request; raise ClientError only when no answer came back."""

    def request_many(self, requests: Sequence[Request]) -> list[Reply]:
        """Send ``requests`` together, up to CONCURRENT_REQUESTS at a time, and return
        their replies in the same order. Deliveries that arrive together are committed
        together by the receiver's group commit (docs/receiver.md), one fsync for many,
        where one at a time each waits for its own."""
        return [
            self.request(r.method, r.path, params=r.params, content=r.content, headers=r.headers)
            for r in requests
        ]

    @abc.abstractmethod
    def wait_for_projection(self, delivery_id: str, timeout: float) -> bool:
        """Return once the delivery (and so every one before it in the log) is projected,
        True; or False when ``timeout`` seconds passed first."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def where(self, path: str) -> str:
        """Where a request to ``path`` went, for messages."""

    def hint(self, status: int) -> str:
        """What to check when a request is refused with ``status`` ("" when nothing)."""
        return ""

    def failure(self, method: str, path: str, reply: Reply) -> str:
        """A refused request in one line: what was asked, the answer, what to check."""
        hint = self.hint(reply.status)
        return f"{method} {self.where(path)}: {reply.status_line()}" + (
            f" — {hint}" if hint else ""
        )

    def get(self, path: str, params: Params | None = None) -> Any:
        return self._json(self.request("GET", path, params=params))

    def post(self, path: str, params: Params | None = None, content: bytes | None = None) -> Any:
        headers = {"Content-Type": "application/json"} if content is not None else None
        return self._json(
            self.request("POST", path, params=params, content=content, headers=headers)
        )

    def _json(self, reply: Reply) -> Any:
        if reply.status >= 400:
            raise ClientError(reply.problem(self.target))
        try:
            return reply.json()
        except orjson.JSONDecodeError:
            raise ClientError(f"{self.target} answered something that is not JSON") from None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HttpClient(Client):
    """A running server, over HTTP."""

    def __init__(self, url: str, token: str = "") -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ClientError(f"--url {url!r} is not an http:// or https:// URL")
        self.target = url.rstrip("/")
        self._token = token
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        # As many kept-alive connections as request_many's threads. With fewer (httpx
        # keeps 20 by default) httpcore 1.0.9 closes an idle connection whenever the
        # pool holds more connections than that, possibly one it has just handed to
        # another thread, whose request then fails with EBADF (encode/httpcore#1110;
        # seen once in CI in `import marquez --url`).
        limits = httpx.Limits(
            max_connections=CONCURRENT_REQUESTS, max_keepalive_connections=CONCURRENT_REQUESTS
        )
        self._http = httpx.Client(
            base_url=self.target, timeout=TIMEOUT, headers=auth, limits=limits
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        try:
            r = self._http.request(
                method, path, params=_clean(params), content=content, headers=headers
            )
        except httpx.ConnectError as exc:
            raise ClientError(
                f"cannot connect to {self.target} ({exc}): is `embrasure serve` running "
                "there? (--db URL reads the database directly)"
            ) from None
        except httpx.TimeoutException:
            raise ClientError(f"{self.target} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise ClientError(f"request to {self.target} failed: {exc}") from None
        return Reply(r.status_code, r.headers, r.content)

    def request_many(self, requests: Sequence[Request]) -> list[Reply]:
        from concurrent.futures import ThreadPoolExecutor

        def one(r: Request) -> Reply:
            return self.request(
                r.method, r.path, params=r.params, content=r.content, headers=r.headers
            )

        with ThreadPoolExecutor(min(CONCURRENT_REQUESTS, max(len(requests), 1))) as pool:
            return list(pool.map(one, requests))

    def where(self, path: str) -> str:
        return f"{self.target}{path}"

    def hint(self, status: int) -> str:
        path = urllib.parse.urlsplit(self.target).path
        if status == 404 and path.strip("/"):
            # The CLI adds /api/v1/…: a URL that has a path already doubles it.
            return f"did you give --url the server's root, not {path}?"
        if status == 404:
            return "is --url an Embrasure server?"
        if status == 401 and not self._token:
            return "give one with --token or EMBRASURE_TOKEN"
        return ""

    def wait_for_projection(self, delivery_id: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            state = self.get(f"/api/v1/deliveries/{delivery_id}")["state"]
            if state != "accepted":
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_SECONDS)

    def close(self) -> None:
        self._http.close()


class LocalClient(Client):
    """The database itself, through the server's ASGI app run in this process.

    The app's lifespan runs as in ``embrasure serve`` (it starts the group committer that
    makes a receipt mean "fsync'd"), on one event loop kept for the client's life
    (asyncio.Runner), so each request is one ``run`` on that loop. The app is built
    without its projector thread: ``wait_for_projection`` projects in this process
    instead, so a command returns with the graph up to date. A server's projector may
    run on the same database meanwhile; projectors share the log safely (each
    transaction re-checks the position under the write lock).
    """

    def __init__(self, db: str, settings: Settings, *, create: bool) -> None:
        from embrasure.app import build_app
        from embrasure.store import open_store, redact

        try:
            self.store = open_store(db, create=create)
        except EmbrasureError as exc:
            raise ClientError(f"--db {redact(db)}: {exc}") from None
        self.target = redact(db)
        # Whoever can open the database needs no token to read it through the API.
        self._app = build_app(
            dataclasses.replace(settings, db=db), self.store, projector=None, enforce_auth=False
        )
        self._runner = asyncio.Runner()
        self._to_app: asyncio.Queue[dict[str, Any]] | None = None
        self._from_app: asyncio.Queue[dict[str, Any]] | None = None
        self._lifespan: asyncio.Task[None] | None = None
        self._http: httpx.AsyncClient | None = None
        try:
            self._runner.run(self._start())
        except BaseException:
            self._runner.close()
            self.store.close()
            raise

    async def _start(self) -> None:
        # The ASGI lifespan protocol, as a server speaks it: startup before any request,
        # shutdown (which commits whatever is queued) at the end.
        self._to_app, self._from_app = asyncio.Queue(), asyncio.Queue()
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        self._lifespan = asyncio.ensure_future(
            self._app(scope, self._to_app.get, self._from_app.put)  # type: ignore[arg-type]
        )
        await self._to_app.put({"type": "lifespan.startup"})
        message = await self._from_app.get()
        if message["type"] != "lifespan.startup.complete":
            raise ClientError(f"--db {self.target}: {message.get('message', 'startup failed')}")
        transport = httpx.ASGITransport(app=self._app, raise_app_exceptions=False)
        self._http = httpx.AsyncClient(transport=transport, base_url=LOCAL_BASE, timeout=TIMEOUT)

    async def _stop(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        if self._lifespan is not None and self._to_app is not None and self._from_app:
            await self._to_app.put({"type": "lifespan.shutdown"})
            await self._from_app.get()
            await self._lifespan

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        assert self._http is not None
        r = self._runner.run(
            self._http.request(
                method, path, params=_clean(params), content=content, headers=headers
            )
        )
        return Reply(r.status_code, r.headers, r.content)

    def request_many(self, requests: Sequence[Request]) -> list[Reply]:
        http = self._http
        assert http is not None
        slots = asyncio.Semaphore(CONCURRENT_REQUESTS)

        async def one(r: Request) -> httpx.Response:
            async with slots:
                return await http.request(
                    r.method, r.path, params=_clean(r.params), content=r.content, headers=r.headers
                )

        async def every() -> list[httpx.Response]:
            return await asyncio.gather(*(one(r) for r in requests))

        return [Reply(r.status_code, r.headers, r.content) for r in self._runner.run(every())]

    def where(self, path: str) -> str:
        return f"{path} on --db {self.target}"

    def wait_for_projection(self, delivery_id: str, timeout: float) -> bool:
        from embrasure.projector.worker import Projector

        try:
            Projector(self.store).run_until_caught_up()
        except EmbrasureError as exc:  # the store could not commit (locked, disk full…)
            raise ClientError(f"--db {self.target}: projection failed: {exc}") from None
        return True

    def close(self) -> None:
        try:
            self._runner.run(self._stop())
        finally:
            self._runner.close()
            self.store.close()


def _given(name: str, flags: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    value = flags.get(name)
    if value is not None:
        return str(value)
    return environ.get(BY_NAME[name].env)


def open_client(
    flags: Mapping[str, Any],
    settings: Settings,
    *,
    prefer_db: bool = False,
    create: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Client:
    """The client for a command's --url / --db flags.

    A flag on the command line decides (both at once is an error); without one, an
    EMBRASURE_URL in the environment picks the server, else an EMBRASURE_DB the
    database; else the default: the server at settings.url, or with ``prefer_db`` (demo)
    the default database. ``create``: whether a missing SQLite file may be created
    (writes may; a read from a mistyped path should say so, not answer from a new, empty
    database).
    """
    environ = os.environ if environ is None else environ
    url_flag, db_flag = flags.get("url"), flags.get("db")
    if url_flag is not None and db_flag is not None:
        raise ClientError("give --url (a running server) or --db (a database), not both")
    if db_flag is not None:
        return LocalClient(str(db_flag), settings, create=create)
    if url_flag is not None:
        return HttpClient(str(url_flag), settings.token)
    if _given("url", {}, environ) is not None:
        return HttpClient(settings.url, settings.token)
    if _given("db", {}, environ) is not None or prefer_db:
        return LocalClient(settings.db, settings, create=create)
    return HttpClient(settings.url, settings.token)
