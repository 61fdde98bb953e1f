"""What JWTs and grants cost (issue 42): the same server answering a static token and a
JWT of the identity provider, alternated A B B A, in one run.

- A: a static token (`emb_…`, scopes ingest and read everywhere: no grant names it).
- B: a JWT of node's oidc-provider (tests/oidc_provider.py, on loopback), obtained once
  by the client credentials grant, whose client is granted `ingest` on `spark` and
  `postgres://*` only: every event is checked namespace by namespace (the benchmark's
  event writes those two), and `read` on one glob per scheme of bench/query.py's
  platform (READ_GLOBS), never `*`: every read then decides, node by node, what the
  reader may see (query/hidden.py), and answers the whole graph, as A's does (checked).

Measured: single events and 500-event batches into `serve --no-projector
--single-process` (the receiver alone, as bench/ingest.py's targets compare), wrk with
the token in its Authorization header; and the lineage of bench/query.py's hubs (depth
10, both directions) through `query.measure_group` with the token, on its platform at
scale 1. The issue's target: B within 5% of A on each.

Results: bench/results/auth-cost.{md,json}. Usage: ``bench/auth_cost.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
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

from embrasure.model import Grant, Token, utc_now
from embrasure.store import open_store
from embrasure.web.auth import digest, new_token

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


def serving(work: Path, source: Path, db: Path, issuer: str) -> servers.Server:
    oidc = ["--oidc-issuer", issuer, "--oidc-audience", RESOURCE]
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


def lineage_part(
    work: Path, source: Path, issuer: str, tokens: dict[str, str], rounds: int, calls: int
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
    server = serving(work, source, db, issuer)
    records = []
    try:
        # The same answers: B's grants cover every namespace of the platform.
        answers = {
            side: [
                httpx.get(
                    f"{server.url}{q.path}",
                    params=q.params,
                    headers={"Authorization": f"Bearer {tokens[side]}"},
                    timeout=600,
                ).json()
                for q in group.queries[:5]
            ]
            for side in "AB"
        }
        assert answers["A"] == answers["B"], "the narrow read grants hid something"
        assert all(n["type"] != "hidden" for a in answers["B"] for n in a["nodes"])
        for side in "ABBA" * rounds:
            headers = {"Authorization": f"Bearer {tokens[side]}"}
            with httpx.Client(base_url=server.url, timeout=600, headers=headers) as client:
                summary, _ = query.measure_group(client, server, group)
            assert summary["non_200"] == 0, summary["non_200_example"]
            ms = summary["p50_ms"]
            records.append({"part": "lineage_hub p50 ms", "side": side, "value": ms, "bad": {}})
            print(f"  lineage_hub {side}: p50 {ms:.2f} ms", flush=True)
    finally:
        server.stop()
    return records


def bearer(token: str) -> str:
    return f"Authorization: Bearer {token}"


def summarise(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for part in dict.fromkeys(r["part"] for r in records):
        a = [r["value"] for r in records if r["part"] == part and r["side"] == "A"]
        b = [r["value"] for r in records if r["part"] == part and r["side"] == "B"]
        higher_is_better = "ms" not in part
        ratio = statistics.median(b) / statistics.median(a)
        cost = ratio if higher_is_better else 1 / ratio  # B's speed over A's
        rows.append(
            {
                "part": part,
                "static_token": statistics.median(a),
                "jwt_and_grants": statistics.median(b),
                "speed_b_over_a": cost,
                "met": cost >= TARGET,
                "a_runs": a,
                "b_runs": b,
            }
        )
    return rows


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"# JWTs and grants against a static token, {results['date']}",
        "",
        "Written by `python bench/auth_cost.py`; how and why: bench/README.md, *What JWTs and"
        f" grants cost*. Raw numbers: [auth-cost.json](auth-cost.json). Code: {results['code']}."
        f" Rounds: A B B A, {results['rounds']} times; 10 s wrk runs, a quiet wait before each.",
        "",
        "| measurement | static token (A) | JWT + namespace grants (B) | B's speed / A's"
        " | target ≥ 0.95 |",
        "|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        lines.append(
            f"| {r['part']} | {r['static_token']:,.2f} | {r['jwt_and_grants']:,.2f} |"
            f" {r['speed_b_over_a']:.3f} | {'met' if r['met'] else 'MISSED'} |"
        )
    lines += ["", "Every run:", "", "| measurement | side | value | non-202 |", "|---|---|---|---|"]
    for r in results["records"]:
        lines.append(f"| {r['part']} | {r['side']} | {r['value']:,.2f} | {r['bad'] or ''} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2, help="repeats of A B B A")
    p.add_argument("--calls", type=int, default=200, help="lineage calls per run")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="embrasure-auth-cost-"))
    # Every server imports this copy: the run measures one version while people edit.
    source = work / "source"
    code = servers.copy_source(source, None)
    provider = OidcProvider(work, clients={CLIENT: SECRET}, groups={}, ttl=3600).start()
    try:
        tokens = {"B": provider.client_token(CLIENT), "A": authorise(work / "authorised.db")}
        records: list[dict[str, Any]] = []
        for workload in (SINGLE, BATCH):
            records += ingest_part(work, source, provider.issuer, tokens, workload, args.rounds)
        records += lineage_part(work, source, provider.issuer, tokens, args.rounds, args.calls)
    finally:
        provider.stop()
    results = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "code": code,
        "rounds": args.rounds,
        "rows": summarise(records),
        "records": records,
    }
    servers.write_results(RESULTS, results, markdown)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
