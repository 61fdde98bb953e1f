"""What JWTs, grants and web UI sessions cost (issues 42 and 50): the same server
answering a static token, a JWT of the identity provider and a signed-in person's session
cookie, alternated A B B A (A B C C B A for reads), in one run.

- A: a static token (`emb_…`, scopes ingest and read everywhere: no grant names it).
- B: a JWT of node's oidc-provider (tests/oidc_provider.py, on loopback), obtained once
  by the client credentials grant, whose client is granted `ingest` on `spark` and
  `postgres://*` only: every event is checked namespace by namespace (the benchmark's
  event writes those two), and `read` on one glob per scheme of bench/query.py's
  platform (READ_GLOBS), never `*`: every read then decides, node by node, what the
  reader may see (query/hidden.py), and answers the whole graph, as A's does (checked).
- C (reads only): the web UI's session cookie of a person whose group has B's read
  grants; its session row (access/sign_in.py) is read at every request, so an ended
  session is refused at once on every server. The session is made in the database as a
  sign-in makes it (SignIn.open_session): the sign-in itself is a browser's.

Measured: single events and 500-event batches into `serve --no-projector
--single-process` (the receiver alone, as bench/ingest.py's targets compare), wrk with
the token in its Authorization header; and, on bench/query.py's platform at scale 1, the
lineage of its hubs (depth 10, both directions) through `query.measure_group` and the
web UI's first page (`GET /api/v1/namespaces`, the cheapest read, where a per-request
cost shows most), each with the token or the cookie. The issues' target: B, and C,
within 5% of A on each.

Results: bench/results/auth-cost.{md,json}. Usage: ``bench/auth_cost.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import query
import servers
from ingest_load import BATCH, SINGLE, Workload, ensure_wrk, event_template, run_wrk

from embrasure.access.jwt_bearer import IdentityProvider, JwtVerifier
from embrasure.access.sign_in import Session, SignIn
from embrasure.model import Grant, Token, utc_now
from embrasure.store import open_store
from embrasure.web.auth import SESSION_COOKIE, digest, new_token

from oidc_provider import RESOURCE, OidcProvider

RESULTS = Path(__file__).parent / "results" / "auth-cost"
CLIENT, SECRET = "bench", "bench-secret"
INGEST_GLOBS = ("spark", "postgres://*")
READ_GLOBS = ("postgres://*", "s3://*", "hive://*", "spark://*", "airflow://*")
TARGET = 0.95


def authorise(db: Path) -> str:
    """The grants of the JWT's client, and a static token; returns the token."""
    store = open_store(f"sqlite:///{db}", create=True)
    try:
        for i, glob in enumerate(INGEST_GLOBS):
            store.add_grant(Grant(f"g{i}", f"client:{CLIENT}", "ingest", glob, utc_now(), None))
        for i, glob in enumerate(READ_GLOBS):
            store.add_grant(Grant(f"r{i}", f"client:{CLIENT}", "read", glob, utc_now(), None))
        token_id, text = new_token()
        scopes = frozenset({"ingest", "read"})
        store.add_token(Token(token_id, digest(text), scopes, None, "bench", utc_now(), None))
        return text
    finally:
        store.close()


def signed_in(db: Path, issuer: str, ui_client: tuple[str, str]) -> str:
    """A person's web UI session, as a sign-in stores it, its group granted B's reads;
    returns the cookie's value."""
    store = open_store(f"sqlite:///{db}")
    try:
        for i, glob in enumerate(READ_GLOBS):
            store.add_grant(Grant(f"s{i}", "group:bench-readers", "read", glob, utc_now(), None))
        hours = 8 * 3600
        sign_in = SignIn(
            JwtVerifier(IdentityProvider(issuer), RESOURCE),
            *ui_client,
            "openid",
            hours,
            3600,
            store,
            lambda: store.server_secret("session-cookies"),
        )
        person = Session(
            "reader", issuer, "reader", ("bench-readers",), int(time.time()) + hours, "x"
        )
        return sign_in.open_session(person, None)
    finally:
        store.close()


def serving(
    work: Path, source: Path, db: Path, issuer: str, ui_client: tuple[str, str] | None = None
) -> servers.Server:
    oidc = ["--oidc-issuer", issuer, "--oidc-audience", RESOURCE]
    if ui_client is not None:
        oidc += ["--oidc-client-id", ui_client[0], "--oidc-client-secret", ui_client[1]]
    return servers.start_embrasure(work, db, source, single_process=True, extra=oidc)


def ingest_part(
    work: Path,
    source: Path,
    issuer: str,
    tokens: dict[str, str],
    workload: Workload,
    rounds: int,
) -> list[dict[str, Any]]:
    """Each run on a fresh copy of the authorised database (``authorised``) and a fresh
    server, as bench/ingest.py measures: a log that only grows would pass the backlog
    bound and answer 429s."""
    wrk, template = ensure_wrk(), work / "template.json"
    template.write_bytes(event_template())
    records = []
    for side in "ABBA" * rounds:
        db = work / f"ingest-{workload.name}.db"
        for leftover in work.glob(f"{db.name}*"):
            leftover.unlink()
        shutil.copyfile(work / "authorised.db", db)
        servers.wait_for_quiet(8)
        server = serving(work, source, db, issuer)
        try:
            header = [bearer(tokens[side])]
            run_wrk(wrk, server.url, workload, 3, 0, template, header)  # warm-up
            run = run_wrk(wrk, server.url, workload, 10, 1, template, header)
        finally:
            server.stop()
        bad = {s: n for s, n in run.statuses.items() if s != 202}
        events = run.count(202) * workload.events_per_body / run.duration_s
        records.append({"part": workload.name, "side": side, "value": events, "bad": bad})
        print(f"  {workload.name} {side}: {events:,.0f} events/s {bad or ''}", flush=True)
    return records


def reads_part(
    work: Path,
    source: Path,
    issuer: str,
    ui_client: tuple[str, str],
    tokens: dict[str, str],
    rounds: int,
    calls: int,
) -> list[dict[str, Any]]:
    platform = query.Platform(1.0)
    tasks = platform.tasks
    first = max(1, round(len(tasks) * 0.1))
    group = next(g for g in query.query_groups(platform, first, calls) if g.name == "lineage_hub")
    db = work / "query.db"
    bodies, events = platform.bodies(tasks, 200)
    print(f"  lineage: loading and projecting {events:,} events", flush=True)
    loader = servers.start_embrasure(work, db, source)  # auth off while loading
    try:
        query.load(loader.url, bodies, events, 4)
    finally:
        loader.stop()
    query.project(work, source, db, events)
    tokens = {**tokens, "A": authorise(db)}
    cookie = signed_in(db, issuer, ui_client)
    server = serving(work, source, db, issuer, ui_client)

    def client(side: str) -> httpx.Client:
        if side == "C":
            return httpx.Client(base_url=server.url, timeout=600, cookies={SESSION_COOKIE: cookie})
        headers = {"Authorization": f"Bearer {tokens[side]}"}
        return httpx.Client(base_url=server.url, timeout=600, headers=headers)

    records = []
    try:
        # The same answers: B's and C's grants cover every namespace of the platform.
        answers = {}
        for side in "ABC":
            with client(side) as http:
                answers[side] = [
                    http.get(q.path, params=q.params).json() for q in group.queries[:5]
                ]
        assert answers["A"] == answers["B"] == answers["C"], "the read grants hid something"
        assert all(n["type"] != "hidden" for a in answers["B"] for n in a["nodes"])
        for side in "ABCCBA" * rounds:
            with client(side) as http:
                summary, _ = query.measure_group(http, server, group)
                assert summary["non_200"] == 0, summary["non_200_example"]
                page = first_page(http, calls)
            ms = summary["p50_ms"]
            records.append({"part": "lineage_hub p50 ms", "side": side, "value": ms, "bad": {}})
            records.append({"part": "namespaces p50 ms", "side": side, "value": page, "bad": {}})
            print(
                f"  lineage_hub {side}: p50 {ms:.2f} ms; namespaces p50 {page:.2f} ms", flush=True
            )
    finally:
        server.stop()
    return records


def first_page(http: httpx.Client, calls: int) -> float:
    """The p50 in ms of ``calls`` GETs of the web UI's first page, after a few."""
    for _ in range(5):
        http.get("/api/v1/namespaces")
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        reply = http.get("/api/v1/namespaces")
        times.append((time.perf_counter() - started) * 1000)
        assert reply.status_code == 200, reply.text
    return statistics.median(times)


def bearer(token: str) -> str:
    return f"Authorization: Bearer {token}"


SIDES = {"A": "static token", "B": "JWT + namespace grants", "C": "UI session + grants"}


def summarise(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for part in dict.fromkeys(r["part"] for r in records):
        runs = {
            side: [r["value"] for r in records if r["part"] == part and r["side"] == side]
            for side in SIDES
        }
        median = {side: statistics.median(v) for side, v in runs.items() if v}
        higher_is_better = "ms" not in part
        # Each side's speed over A's: a rate's ratio, or a time's inverse ratio.
        speed = {
            side: (m / median["A"] if higher_is_better else median["A"] / m)
            for side, m in median.items()
            if side != "A"
        }
        rows.append(
            {
                "part": part,
                "medians": median,
                "speed_over_a": speed,
                "met": all(v >= TARGET for v in speed.values()),
                "runs": runs,
            }
        )
    return rows


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"# JWTs, grants and UI sessions against a static token, {results['date']}",
        "",
        "Written by `python bench/auth_cost.py`; how and why: bench/README.md, *What JWTs,"
        " grants and sessions cost*. Raw numbers: [auth-cost.json](auth-cost.json)."
        f" Code: {results['code']}. Rounds: A B B A (reads: A B C C B A),"
        f" {results['rounds']} times; 10 s wrk runs, a quiet wait before each."
        f" Load average after: {results['load_after']}.",
        "",
        "| measurement | "
        + " | ".join(f"{name} ({s})" for s, name in SIDES.items())
        + " | B's speed / A's | C's speed / A's | C's / B's (the session alone) |"
        " target ≥ 0.95 over A |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        cells = [f"{r['medians'][s]:,.2f}" if s in r["medians"] else "" for s in SIDES]
        speed = r["speed_over_a"]
        ratios = [f"{speed[s]:.3f}" if s in speed else "" for s in "BC"]
        ratios.append(f"{speed['C'] / speed['B']:.3f}" if "C" in speed else "")
        lines.append(
            f"| {r['part']} | {' | '.join(cells)} | {' | '.join(ratios)} |"
            f" {'met' if r['met'] else 'MISSED'} |"
        )
    lines += ["", "Every run:", "", "| measurement | side | value | non-202 |", "|---|---|---|---|"]
    for r in results["records"]:
        lines.append(f"| {r['part']} | {r['side']} | {r['value']:,.2f} | {r['bad'] or ''} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2, help="repeats of A B B A")
    p.add_argument("--calls", type=int, default=200, help="lineage calls per run")
    p.add_argument("--reads-only", action="store_true", help="leave out the ingest parts")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="embrasure-auth-cost-"))
    # Every server imports this copy: the run measures one version while people edit.
    source = work / "source"
    code = servers.copy_source(source, None)
    provider = OidcProvider(work, clients={CLIENT: SECRET}, groups={}, ttl=3600)
    ui_client = provider.ui_client()
    provider.start()
    try:
        tokens = {"B": provider.client_token(CLIENT), "A": authorise(work / "authorised.db")}
        records: list[dict[str, Any]] = []
        if not args.reads_only:
            for workload in (SINGLE, BATCH):
                records += ingest_part(work, source, provider.issuer, tokens, workload, args.rounds)
        records += reads_part(
            work, source, provider.issuer, ui_client, tokens, args.rounds, args.calls
        )
    finally:
        provider.stop()
    results = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "code": code,
        "rounds": args.rounds,
        "load_after": round(os.getloadavg()[0], 2),
        "rows": summarise(records),
        "records": records,
    }
    servers.write_results(RESULTS, results, markdown)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
