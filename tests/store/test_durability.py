"""Durability end to end (docs/architecture.md#durability, docs/receiver.md#durability,
docs/architecture.md#storage).

Every test here drives a real ``embrasure serve`` process over real HTTP on a real SQLite
file: a SIGKILL under load, the fsync-before-202 order seen by strace, a SIGTERM under
load, and a full disk. No mocks.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import dataclasses
import itertools
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from conftest import ServerProcess

pytestmark = pytest.mark.slow

JSON_HEADERS = {"Content-Type": "application/json"}
SINGLE = "/api/v1/lineage"
BATCH = "/api/v1/lineage/batch"
PROBLEM_JSON = "application/problem+json"
T = TypeVar("T")
R = TypeVar("R")


# -- events and load ------------------------------------------------------------------------


def run_event(name: str, padding: int = 0) -> dict[str, Any]:
    """A small, valid START RunEvent; ``name`` makes it (and its body) unique."""
    event: dict[str, Any] = {
        "eventType": "START",
        "eventTime": "2026-11-30T12:00:00.000000Z",
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": "durability", "name": name},
        "inputs": [],
        "outputs": [],
        "producer": "https://example.com/embrasure/tests/test_durability",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }
    if padding:
        # Random text: the log compresses bodies, and these are to fill the disk.
        text = base64.b64encode(os.urandom(padding * 3 // 4)).decode()
        event["job"]["facets"] = {"documentation": {"description": text}}
    return event


def encode(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


@dataclasses.dataclass(frozen=True)
class Ack:
    """A 202 the server sent: what was posted, where, and the receipt."""

    path: str
    body: bytes
    item_count: int
    receipt: dict[str, Any]
    at: float  # time.monotonic() when the 202 was read


@dataclasses.dataclass
class Outcomes:
    acks: list[Ack] = dataclasses.field(default_factory=list)
    transport_errors: list[str] = dataclasses.field(default_factory=list)
    timeouts: list[str] = dataclasses.field(default_factory=list)
    unavailable: list[httpx.Response] = dataclasses.field(default_factory=list)  # 503s
    unexpected: list[str] = dataclasses.field(default_factory=list)  # anything else
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


class Load:
    """``threads`` clients, each posting unique deliveries back to back until stopped.

    Every ``batch_every``-th delivery of a client is a 50-event batch, the rest single
    events. Outcomes are sorted as they come: 202 receipts, transport errors, time-outs,
    503s and anything else. A thread never raises: what goes wrong is recorded.
    """

    def __init__(self, url: str, tag: str, threads: int = 16, batch_every: int = 10) -> None:
        self.url = url
        self.tag = tag
        self.batch_every = batch_every
        self.out = Outcomes()
        self.stopping = threading.Event()
        self.threads = [
            threading.Thread(target=self._client, args=(n,), name=f"load-{n}", daemon=True)
            for n in range(threads)
        ]

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(30)
        assert not any(t.is_alive() for t in self.threads), "a load thread hung"

    def acked(self) -> int:
        with self.out.lock:
            return len(self.out.acks)

    def _client(self, n: int) -> None:
        out = self.out
        with httpx.Client(base_url=self.url, timeout=15.0) as http:
            for i in itertools.count():
                if self.stopping.is_set():
                    return
                name = f"{self.tag}-{n}-{i}"
                if i % self.batch_every == self.batch_every - 1:
                    path, count = BATCH, 50
                    body = encode([run_event(f"{name}-{k}") for k in range(count)])
                else:
                    path, count = SINGLE, 1
                    body = encode(run_event(name))
                try:
                    r = http.post(path, content=body, headers=JSON_HEADERS)
                except httpx.TimeoutException as exc:
                    with out.lock:
                        out.timeouts.append(f"{path}: {exc!r}")
                    continue
                except httpx.TransportError as exc:
                    with out.lock:
                        out.transport_errors.append(f"{path}: {exc!r}")
                    time.sleep(0.01)  # the server is gone or going: do not spin
                    continue
                except Exception as exc:  # recorded, never raised from a thread
                    with out.lock:
                        out.unexpected.append(f"{path}: {exc!r}")
                    continue
                with out.lock:
                    if r.status_code == 202:
                        out.acks.append(Ack(path, body, count, r.json(), time.monotonic()))
                    elif r.status_code == 503:
                        out.unavailable.append(r)
                    else:
                        out.unexpected.append(f"{path}: {r.status_code} {r.text[:500]}")


def in_parallel(items: Sequence[T], work: Callable[[httpx.Client, T], R], url: str) -> list[R]:
    """``work(client, item)`` for every item, from 8 threads with a client each."""
    local = threading.local()
    clients: list[httpx.Client] = []
    lock = threading.Lock()

    def run(item: T) -> R:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(base_url=url, timeout=15.0)
            with lock:
                clients.append(client)
        return work(client, item)

    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            return list(pool.map(run, items))
    finally:
        for client in clients:
            client.close()


def check_receipt_fresh(ack: Ack) -> None:
    """What the 202 itself must say for a new, valid delivery."""
    receipt = ack.receipt
    assert receipt["duplicate"] is False, receipt
    assert receipt["state"] == "accepted", receipt
    assert receipt["item_count"] == ack.item_count, receipt
    assert receipt["invalid_item_count"] == 0, receipt


def verify_stored(url: str, acks: Sequence[Ack], unavailable_ok: bool = False) -> None:
    """Every acknowledged delivery is readable, with its receipt's counts, in a state its
    receipt's state can lead to (the projector moves an accepted delivery on). With
    ``unavailable_ok`` (a full disk) a read may answer 503 store-unavailable instead:
    SQLite's readers too may need a byte of disk (a WAL index that grows), and a 503
    with Retry-After is the honest answer then; any other answer must be right."""
    successors = {
        "accepted": {"accepted", "projected", "partially_projected", "quarantined"},
        "quarantined": {"quarantined"},
    }

    def get(http: httpx.Client, ack: Ack) -> str | None:
        delivery_id = ack.receipt["delivery_id"]
        r = http.get(f"/api/v1/deliveries/{delivery_id}")
        if unavailable_ok and r.status_code == 503:
            problem = r.json()
            if problem["type"].endswith("/store-unavailable") and "retry-after" in r.headers:
                return None
        if r.status_code != 200:
            return f"{delivery_id}: GET answered {r.status_code} {r.text[:300]}"
        doc = r.json()
        want = {
            "delivery_id": delivery_id,
            "item_count": ack.receipt["item_count"],
            "invalid_item_count": ack.receipt["invalid_item_count"],
        }
        got = {k: doc.get(k) for k in want}
        if got != want:
            return f"{delivery_id}: stored {got}, receipt said {want}"
        if doc.get("state") not in successors[ack.receipt["state"]]:
            return f"{delivery_id}: state {doc.get('state')} after receipt {ack.receipt}"
        return None

    problems = [p for p in in_parallel(acks, get, url) if p is not None]
    assert not problems, f"{len(problems)} of {len(acks)} acknowledged deliveries: {problems[:5]}"


def verify_duplicates(url: str, acks: Sequence[Ack]) -> None:
    """Posting an acknowledged body again repeats its receipt with duplicate=true."""

    def repost(http: httpx.Client, ack: Ack) -> str | None:
        r = http.post(ack.path, content=ack.body, headers=JSON_HEADERS)
        if r.status_code != 202:
            return f"{ack.receipt['delivery_id']}: re-post answered {r.status_code} {r.text[:300]}"
        want = {**ack.receipt, "duplicate": True}
        return None if r.json() == want else f"re-post answered {r.json()}, expected {want}"

    problems = [p for p in in_parallel(acks, repost, url) if p is not None]
    assert not problems, f"{len(problems)} of {len(acks)} re-posts: {problems[:5]}"


def integrity_check(db_path: Path) -> int:
    """PRAGMA integrity_check of the file (the server is stopped); the delivery count."""
    with contextlib.closing(sqlite3.connect(db_path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        return int(conn.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0])


# -- 1. SIGKILL under load ------------------------------------------------------------------


def wait_for_acks(load: Load, seconds: float, at_least: int) -> None:
    """Let the load run for ``seconds`` and until ``at_least`` receipts (10 s grace)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or load.acked() < at_least:
        assert time.monotonic() < deadline + 10, f"only {load.acked()} acks in {seconds + 10:.0f} s"
        time.sleep(0.05)


@pytest.mark.parametrize("mode", [(), ("--single-process",)], ids=["processes", "single-process"])
def test_sigkill_under_load_loses_no_acknowledged_delivery(
    db_path: Path, mode: tuple[str, ...]
) -> None:
    server = ServerProcess(db_path, *mode).start()
    restarted: ServerProcess | None = None
    try:
        with Load(server.url, "crash") as load:
            wait_for_acks(load, seconds=2.0, at_least=300)
            acked_before_kill = load.acked()
            server.kill()  # SIGKILL to every process at once, while 16 clients post
            time.sleep(0.2)  # let every client see the dead server
        out = load.out
        assert not out.unexpected, out.unexpected[:5]
        assert not out.unavailable, [r.text for r in out.unavailable[:5]]
        assert not out.timeouts, out.timeouts[:5]
        # The kill landed on a loaded server: clients were cut off mid-request or refused.
        assert out.transport_errors, "no client noticed the kill: the load was not running"
        acks = out.acks
        assert len(acks) >= acked_before_kill >= 300, "too few acknowledgements to mean anything"
        for ack in acks:
            check_receipt_fresh(ack)
        assert len({a.receipt["delivery_id"] for a in acks}) == len(acks)
        assert any(a.path == BATCH for a in acks) and any(a.path == SINGLE for a in acks)

        restarted = ServerProcess(db_path).start()
        verify_stored(restarted.url, acks)
        verify_duplicates(restarted.url, acks)  # idempotency survived the crash too
        restarted.terminate()
        stored = integrity_check(db_path)
        assert stored >= len(acks)
        print(
            f"\nSIGKILL: {len(acks)} deliveries acknowledged "
            f"({sum(a.item_count for a in acks)} events), all found and deduplicated after "
            f"restart; {stored} stored; {len(out.transport_errors)} connection errors"
        )
    finally:
        server.stop()
        if restarted is not None:
            restarted.stop()


# -- 2. fsync before 202, seen by strace ----------------------------------------------------

STRACE_SYSCALLS = (
    "write,writev,pwrite64,pwritev,pwritev2,sendto,sendmsg,fsync,fdatasync,sync_file_range"
)
WRITE_CALLS = {"write", "writev", "pwrite64", "pwritev", "pwritev2", "sendto", "sendmsg"}
SYNC_CALLS = {"fsync", "fdatasync"}
_LINE = re.compile(r"^(?P<pid>\d+)\s+(?P<ts>\d\d:\d\d:\d\d\.\d+)\s+(?P<text>.*)$")
_RESUMED = re.compile(r"^<\.\.\. (?P<name>\w+) resumed>(?P<rest>.*)$")
_CALL = re.compile(
    r"^(?P<name>\w+)\((?P<fd>\d+)<(?P<path>(?:TCP|TCPv6|UNIX):\[[^\]]*\]|[^>]*)>(?P<args>.*)$"
)
_RETURN = re.compile(r"\)\s+=\s+(?P<ret>-?\d+|\?)(?P<err>[^<]*)(?:<[\d.]+>)?\s*$")


@dataclasses.dataclass(frozen=True)
class Syscall:
    """One traced call. ``start`` and ``end`` are positions in strace's output: strace
    prints a call's entry and exit in the order it sees them, and a tracee stays stopped
    until strace has handled its stop, so position order is causal order across threads."""

    pid: int
    name: str
    fd: int
    path: str
    text: str
    ret: int | None
    start: int
    end: int
    start_ts: str
    end_ts: str


def parse_strace(trace: str) -> list[Syscall]:
    """The fd-annotated calls of an ``strace -f -tt -T -yy`` log, unfinished/resumed
    pairs joined (a pid has at most one call in flight)."""
    pending: dict[int, tuple[str, int, str]] = {}
    calls: list[Syscall] = []
    for position, line in enumerate(trace.splitlines()):
        m = _LINE.match(line)
        if m is None:
            continue
        pid, ts, text = int(m["pid"]), m["ts"], m["text"]
        if text.startswith(("+++", "---")):
            continue  # exits and signals
        start, start_ts = position, ts
        resumed = _RESUMED.match(text)
        if resumed is not None:
            if pid not in pending:
                continue  # its entry happened before the trace began
            head, start, start_ts = pending.pop(pid)
            text = head + resumed["rest"]
        elif text.endswith("<unfinished ...>"):
            pending[pid] = (text.removesuffix("<unfinished ...>").rstrip(), position, ts)
            continue
        call = _CALL.match(text)
        if call is None:
            continue  # not a call on an annotated fd
        ret_m = _RETURN.search(text)
        ret = int(ret_m["ret"]) if ret_m is not None and ret_m["ret"] != "?" else None
        calls.append(
            Syscall(
                pid,
                call["name"],
                int(call["fd"]),
                call["path"],
                call["args"],
                ret,
                start,
                position,
                start_ts,
                ts,
            )
        )
    return calls


def strace_child(proc: subprocess.Popen[bytes]) -> int:
    """The pid of the process strace started (the server)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise AssertionError("strace started no child")


def test_fsync_of_the_wal_completes_before_the_202_is_written(tmp_path: Path) -> None:
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not on PATH (CI installs it: apt-get install -y strace)")
    db_path = tmp_path / "traced.db"
    trace_path = tmp_path / "server.strace"
    # -f: every thread, with its pid; -yy: paths and TCP endpoints beside each fd;
    # --seccomp-bpf: stop only on the traced calls, so the server runs near full speed.
    wrapper: tuple[str, ...] = (
        *(strace, "-f", "-tt", "-T", "-yy", "-s", "65536", "-o", str(trace_path)),
        *("--seccomp-bpf", "-e", f"trace={STRACE_SYSCALLS}"),
    )
    server = ServerProcess(db_path, wrapper=wrapper)
    child: int | None = None
    n = 30
    run_tag = uuid.uuid4().hex[:12]
    markers = [f"fsyncmark{run_tag}x{i:03d}" for i in range(n)]
    try:
        server.start(timeout=60)
        assert server.proc is not None
        child = strace_child(server.proc)
        start = threading.Barrier(n)

        def post(marker: str) -> dict[str, Any]:
            # One connection per request, so each response is on its own socket.
            with httpx.Client(base_url=server.url, timeout=30.0) as http:
                start.wait(10)
                r = http.post(SINGLE, content=encode(run_event(marker)), headers=JSON_HEADERS)
            assert r.status_code == 202, r.text
            receipt: dict[str, Any] = r.json()
            return receipt

        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            receipts = list(pool.map(post, markers))
        os.kill(child, signal.SIGTERM)  # strace itself blocks fatal signals
        server.proc.wait(60)
        child = None
    finally:
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        server.stop()

    calls = parse_strace(trace_path.read_text(errors="replace"))
    wal = str(db_path) + "-wal"
    wal_writes = [c for c in calls if c.name in WRITE_CALLS and c.path == wal and (c.ret or 0) > 0]
    wal_syncs = [c for c in calls if c.name in SYNC_CALLS and c.path == wal and c.ret == 0]
    sock_writes = [
        c for c in calls if c.name in WRITE_CALLS and c.path.startswith("TCP") and (c.ret or 0) > 0
    ]
    # Sanity: the trace sees what it must, or every check below would pass vacuously.
    assert wal_writes, f"no write to {wal} in the trace"
    assert wal_syncs, f"no fsync/fdatasync of {wal} in the trace"
    assert sum('"HTTP/1.1 202 ' in c.text for c in sock_writes) >= n

    fsyncs_used: set[int] = set()
    for marker, receipt in zip(markers, receipts, strict=True):
        delivery_id = receipt["delivery_id"]
        # (a) the first WAL write holding the delivery's row (the body beside it is
        # zstd-compressed, so its marker need not show in the bytes written; the id
        # is stored as text, and only the append writes it)
        write = next((c for c in wal_writes if delivery_id in c.text), None)
        assert write is not None, f"{marker} ({delivery_id}) never written to the WAL"
        # (b) the first sync of that file started after the write returned
        sync = next(
            (c for c in wal_syncs if c.fd == write.fd and c.start > write.end),
            None,
        )
        assert sync is not None, f"{delivery_id}: no fsync of the WAL after its write"
        # (c) the response: the write carrying the receipt, and the status line before it
        body_writes = [c for c in sock_writes if delivery_id in c.text]
        assert len(body_writes) == 1, f"{delivery_id}: {len(body_writes)} response writes"
        body_write = body_writes[0]
        status_write = [
            c
            for c in sock_writes
            if c.path == body_write.path and c.start <= body_write.start and '"HTTP/1.1 ' in c.text
        ][-1]
        assert '"HTTP/1.1 202 ' in status_write.text, status_write.text[:200]
        assert write.end < sync.end < status_write.start, (
            f"{delivery_id}: WAL write at {write.end_ts} (line {write.end}), fsync done at "
            f"{sync.end_ts} (line {sync.end}), 202 written at {status_write.start_ts} "
            f"(line {status_write.start}): the 202 went out before the fsync completed"
        )
        fsyncs_used.add(sync.start)
    print(
        f"\nstrace: {n} receipts matched: WAL write < fsync done < 202 written; "
        f"{len(fsyncs_used)} WAL fsyncs covered them ({len(wal_syncs)} in the trace)"
    )


# -- 3. SIGTERM under load ------------------------------------------------------------------

GRACEFUL_SECONDS = 5


def test_sigterm_under_load_exits_cleanly_and_keeps_every_202(db_path: Path) -> None:
    server = ServerProcess(db_path, "--graceful-shutdown-seconds", str(GRACEFUL_SECONDS))
    server.start()
    assert server.proc is not None
    restarted: ServerProcess | None = None
    try:
        with Load(server.url, "sigterm") as load:
            wait_for_acks(load, seconds=1.0, at_least=100)
            sent_at = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            try:
                returncode = server.proc.wait(GRACEFUL_SECONDS + 10)
            except subprocess.TimeoutExpired:
                pytest.fail(f"no exit {GRACEFUL_SECONDS + 10} s after SIGTERM")
            exit_seconds = time.monotonic() - sent_at
            time.sleep(0.2)  # clients now meet a closed port
        out = load.out
        # A request either got its 202, a 503, or a connection error: nothing else.
        assert not out.unexpected, out.unexpected[:5]
        assert not out.timeouts, out.timeouts[:5]
        for r in out.unavailable:
            assert r.headers["content-type"] == PROBLEM_JSON, r.headers
            assert "retry-after" in r.headers, r.headers
        assert out.transport_errors, "no client was refused: the load was not running"
        acks = out.acks
        assert len(acks) >= 100
        for ack in acks:
            check_receipt_fresh(ack)
        after_signal = sum(a.at > sent_at for a in acks)

        restarted = ServerProcess(db_path).start()
        verify_stored(restarted.url, acks)  # every 202 survived the shutdown
        print(
            f"\nSIGTERM: exit code {returncode} after {exit_seconds:.2f} s; {len(acks)} "
            f"deliveries acknowledged ({after_signal} read after the signal), all found after "
            f"restart; {len(out.unavailable)} answered 503, "
            f"{len(out.transport_errors)} connection errors"
        )
        assert exit_seconds < GRACEFUL_SECONDS, f"exit took {exit_seconds:.1f} s"
        assert returncode == 0, (
            f"`embrasure serve` exited with {returncode} on SIGTERM, expected 0 "
            f"(log: {server.log_path.read_text()[-2000:]!r})"
        )
    finally:
        server.stop()
        if restarted is not None:
            restarted.stop()


# -- 4. full disk: 503, then recovery ------------------------------------------------------


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        pytest.skip(f"cannot mount a tmpfs (needs root): {exc} {detail.decode().strip()}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_full_disk_answers_503_then_recovers(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "small", "4m") as disk:
        filler = disk / "filler"
        filler.write_bytes(b"\0" * (2 * 1024 * 1024))
        db_path = disk / "embrasure.db"
        # The free-disk bound off, to reach the real thing: a commit that fails (ENOSPC).
        server = ServerProcess(db_path, "--min-free-disk-mb", "0")
        server.log_path = tmp_path / "server.log"  # not on the disk we fill
        server.start()
        assert server.proc is not None
        try:
            acks: list[Ack] = []
            refused: httpx.Response | None = None
            refused_body = b""
            with httpx.Client(base_url=server.url, timeout=15.0) as http:
                for i in range(500):
                    body = encode(run_event(f"full-{i}", padding=64 * 1024))
                    r = http.post(SINGLE, content=body, headers=JSON_HEADERS)
                    if r.status_code != 202:
                        refused, refused_body = r, body
                        break
                    acks.append(Ack(SINGLE, body, 1, r.json(), time.monotonic()))
                assert refused is not None, "the 4 MiB disk never filled up"
                assert acks, "the very first delivery was refused"
                assert refused.status_code == 503, refused.text
                assert refused.headers["content-type"] == PROBLEM_JSON
                assert int(refused.headers["retry-after"]) >= 1
                problem = refused.json()
                assert problem["status"] == 503 and problem["type"] and problem["detail"]
                assert "delivery_id" not in problem

                # Still full: still 503, and the server keeps serving reads.
                again = http.post(SINGLE, content=refused_body, headers=JSON_HEADERS)
                assert again.status_code == 503, again.text
                assert server.proc.poll() is None, "the server died on a full disk"
                assert http.get("/healthz").status_code == 200
                verify_stored(server.url, acks, unavailable_ok=True)

                # Free 2 MiB: the projection and the WAL's checkpoint (store/checkpoints.py)
                # that the full disk held back take their share of it first.
                filler.unlink()
                retried = http.post(SINGLE, content=refused_body, headers=JSON_HEADERS)
                assert retried.status_code == 202, retried.text
                assert retried.json()["duplicate"] is False  # the 503s stored nothing
                fresh_body = encode(run_event("after-space-freed"))
                fresh = http.post(SINGLE, content=fresh_body, headers=JSON_HEADERS)
                assert fresh.status_code == 202, fresh.text
                acks += [
                    Ack(SINGLE, refused_body, 1, retried.json(), time.monotonic()),
                    Ack(SINGLE, fresh_body, 1, fresh.json(), time.monotonic()),
                ]
            verify_stored(server.url, acks)
            assert server.proc.poll() is None, "the server died"
            server.kill()
            # Exactly the acknowledged deliveries are in the log, in a sound file.
            assert integrity_check(db_path) == len(acks)
            print(
                f"\nfull disk: {len(acks) - 2} acknowledged before the 503 "
                f"({problem['detail']!r}), 2 after freeing space"
            )
        finally:
            server.stop()


def test_the_free_disk_bound_refuses_with_429_before_the_disk_is_full(tmp_path: Path) -> None:
    """With the bound (8 MiB of a 16 MiB disk here, far more than a second of this
    client's writes) the receiver stops first: 429, not a failed commit."""
    with small_tmpfs(tmp_path / "small", "16m") as disk:
        db_path = disk / "embrasure.db"
        server = ServerProcess(db_path, "--min-free-disk-mb", "8", "--no-projector")
        server.log_path = tmp_path / "server.log"
        server.start()
        try:
            acks: list[Ack] = []
            with httpx.Client(base_url=server.url, timeout=15.0) as http:
                for i in range(400):
                    body = encode(run_event(f"bounded-{i}", padding=64 * 1024))
                    r = http.post(SINGLE, content=body, headers=JSON_HEADERS)
                    if r.status_code != 202:
                        break
                    acks.append(Ack(SINGLE, body, 1, r.json(), time.monotonic()))
                    time.sleep(0.02)  # let the 1 s load measurement see the disk fill
                assert r.status_code == 429, r.text
                assert "free beside the delivery log" in r.json()["detail"]
                assert int(r.headers["retry-after"]) >= 1
                assert acks
                verify_stored(server.url, acks)
                assert http.get("/readyz").status_code == 503
        finally:
            server.stop()
