"""Embrasure's Marquez port beside Marquez (issue 40): the same events into both, the
answers of the compatible routes compared, their speed, and Marquez's history imported.

One run, one machine: Marquez 0.50.0 on PostgreSQL (bench/peers/marquez_server.py,
``--marquez-source``) and ``embrasure serve --marquez-port`` on SQLite, each on a new
database, loaded with bench/query.py's platform at ``--scale`` (0.2: ~10,400 jobs,
~11,700 events of ~10 KB; Marquez took them one POST at a time from 4 clients, as it
has no batch route; Embrasure took them in 200-event batches: the load is not what is
measured here). Parts (``--parts``):

- ``compare``: what both serve through Marquez's API, read the same way from each
  (peer_api.MarquezApi.snapshot: every namespace, dataset, job, job inputs and outputs,
  run states), then per dataset its fields and per root its lineage at depth 20: the
  differences listed and counted by cause;
- ``speed``: warm calls, p50/p99, of ``GET /api/v1/jobs`` (100 a page, offsets across all
  jobs), a namespace's jobs and datasets as marquez-web asks (25 a page), and
  ``lineage?nodeId=`` at depth 20 around hubs and chain tables; on Marquez, on
  Embrasure's Marquez port, and Embrasure's own routes for the same questions
  (``/api/v1/jobs``, ``/api/v1/lineage`` with ``limit=10000``): compat / Marquez is the
  speed-up, compat / native what the compatible layer costs;
- ``import``: ``embrasure import marquez --from`` Marquez's database into a new SQLite
  file, then the same snapshot from it compared with Marquez's and with the Embrasure
  that got the events directly (and their exports' digests).

Results: bench/results/peers-marquez-api.{md,json} (``--out``). Run:
``.venv/bin/python bench/peers/marquez_api.py --marquez-source PATH``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR) not in sys.path:  # run as a script: bench/ holds the shared harness
    sys.path.insert(0, str(BENCH_DIR))

import httpx  # noqa: E402
import query  # noqa: E402
import servers  # noqa: E402
import storage_sizes  # noqa: E402

from peers import marquez_api_report, marquez_server, workloads  # noqa: E402
from peers.peer_api import MarquezApi, Snapshot, segment  # noqa: E402
from peers.targets import running  # noqa: E402

RESULTS = BENCH_DIR / "results"
PARTS = ("compare", "speed", "import")
JSON = {"content-type": "application/json"}
FIELD_SAMPLE = 200  # datasets whose fields are compared
SLOW_CALL_MS = 1000.0
CALL_TIMEOUT_S = 60.0


class Compat:
    """``embrasure serve --marquez-port`` on a new SQLite file."""

    def __init__(self, work: Path, source: Path, db: Path) -> None:
        self.db = db
        self.port = servers.free_port()
        self.server = servers.start_embrasure(
            work, db, source, projector=True, extra=["--marquez-port", str(self.port)]
        )
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop()


def load_embrasure(url: str, platform: query.Platform) -> float:
    bodies, _ = platform.bodies(platform.tasks, 200)
    started = time.monotonic()
    with httpx.Client(base_url=url, timeout=300) as client:
        for body in bodies:
            response = client.post("/api/v1/lineage/batch", content=body, headers=JSON)
            response.raise_for_status()
    wait_projected(url)
    return time.monotonic() - started


def wait_projected(url: str) -> None:
    storage_sizes.wait_projected(url, 1800.0)


# -- compare ---------------------------------------------------------------------------


def snapshot(url: str) -> Snapshot:
    with httpx.Client(base_url=url, timeout=600) as client:
        return MarquezApi().snapshot(client)


def aliases(compat_url: str, nodes: set[tuple[str, str, str]]) -> dict[Any, Any]:
    """For datasets Marquez serves that Embrasure does not list: the node Embrasure finds
    by that name (a symlinked identity is one node there, found by any of its names)."""
    found: dict[Any, Any] = {}
    with httpx.Client(base_url=compat_url, timeout=60) as client:
        for kind, namespace, name in nodes:
            if kind != "dataset":
                continue
            path = f"/api/v1/namespaces/{segment(namespace)}/datasets/{segment(name)}"
            response = client.get(path)
            if response.status_code == 200:
                node = response.json()["id"]
                found[(kind, namespace, name)] = ("dataset", node["namespace"], node["name"])
    return found


def compare_snapshots(
    marquez: Snapshot, compat: Snapshot, alias_of: dict[Any, Any] | None = None
) -> dict[str, Any]:
    """What both serve, Marquez's side read through ``alias_of`` (its identities that
    are aliases of an Embrasure node) for the edges, whose differences are then counted
    apart from those aliases'."""
    alias_of = alias_of or {}
    only_m = marquez.nodes - compat.nodes
    only_e = compat.nodes - marquez.nodes
    causes: Counter[str] = Counter()
    for node in only_m:
        if node in alias_of:
            causes["only Marquez: an alias (symlink) of an Embrasure node"] += 1
        elif node[0] == "job":
            causes["only Marquez: a job"] += 1
        else:
            causes["only Marquez: a dataset Embrasure does not know"] += 1
    for node in only_e:
        causes[f"only Embrasure: a {node[0]}"] += 1
    resolved = {(alias_of.get(a, a), alias_of.get(b, b)) for a, b in marquez.edges}
    shared = marquez.runs.keys() & compat.runs.keys()
    states = Counter(
        f"{marquez.runs[r]} (Marquez) / {compat.runs[r]} (Embrasure)"
        for r in shared
        if marquez.runs[r] != compat.runs[r]
    )
    return {
        "nodes": {"marquez": len(marquez.nodes), "embrasure": len(compat.nodes)},
        "edges": {"marquez": len(marquez.edges), "embrasure": len(compat.edges)},
        "runs": {"marquez": len(marquez.runs), "embrasure": len(compat.runs)},
        "nodes_only_marquez": len(only_m),
        "nodes_only_embrasure": len(only_e),
        "edges_only_marquez": len(marquez.edges - compat.edges),
        "edges_only_embrasure": len(compat.edges - marquez.edges),
        "edges_differ_once_aliases_resolved": len(resolved ^ compat.edges),
        "runs_only_marquez": len(marquez.runs.keys() - compat.runs.keys()),
        "runs_only_embrasure": len(compat.runs.keys() - marquez.runs.keys()),
        "run_states_differ": dict(states),
        "node_causes": dict(causes),
        "examples": {
            "only_marquez": sorted(n for n in only_m if n not in alias_of)[:5],
            "only_embrasure": sorted(only_e)[:5],
            "edges_after_aliases": sorted(resolved ^ compat.edges)[:5],
            "runs_only_marquez": sorted(marquez.runs.keys() - compat.runs.keys())[:5],
            "run_states": sorted(r for r in shared if marquez.runs[r] != compat.runs[r])[:5],
        },
    }


def compare_fields(marquez_url: str, compat_url: str, datasets: list[tuple[str, str]]) -> Any:
    """Each dataset's fields (name, type) on both sides."""
    same, differ, missing = 0, [], 0
    with httpx.Client(timeout=60) as client:
        for namespace, name in datasets:
            path = f"/api/v1/namespaces/{segment(namespace)}/datasets/{segment(name)}"
            a, b = client.get(marquez_url + path), client.get(compat_url + path)
            if a.status_code != 200 or b.status_code != 200:
                missing += 1
                continue
            # As sets: Marquez does not keep the schema facet's field order.
            fa = sorted((f["name"], f.get("type")) for f in a.json()["fields"])
            fb = sorted((f["name"], f.get("type")) for f in b.json()["fields"])
            if fa == fb:
                same += 1
            else:
                differ.append({"dataset": [namespace, name], "marquez": fa, "embrasure": fb})
    return {"same": same, "differ": len(differ), "not_on_both": missing, "examples": differ[:3]}


def lineage_ids(url: str, root: tuple[str, str], depth: int) -> set[str]:
    params = {"nodeId": f"dataset:{root[0]}:{root[1]}", "depth": str(depth)}
    response = httpx.get(url + "/api/v1/lineage", params=params, timeout=300)
    response.raise_for_status()
    return {n["id"] for n in response.json()["graph"]}


def compare_lineage(marquez_url: str, compat_url: str, roots: list[tuple[str, str]]) -> Any:
    out = []
    for root in roots:
        a, b = lineage_ids(marquez_url, root, 20), lineage_ids(compat_url, root, 20)
        out.append(
            {
                "root": list(root),
                "marquez_nodes": len(a),
                "embrasure_nodes": len(b),
                "both": len(a & b),
            }
        )
    return out


# -- speed -----------------------------------------------------------------------------


def timed(client: httpx.Client, url: str, params: dict[str, str]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        response = client.get(url, params=params, timeout=CALL_TIMEOUT_S)
    except httpx.TimeoutException:
        return {"ms": CALL_TIMEOUT_S * 1000, "status": "timeout", "bytes": 0}
    ms = (time.perf_counter() - started) * 1000
    return {"ms": ms, "status": response.status_code, "bytes": len(response.content)}


def measure(calls: Callable[[], Iterator[tuple[str, dict[str, str]]]], count: int) -> Any:
    """One warm-up pass over ``calls``' questions, then ``count`` calls cycling over them."""
    asks = list(calls())
    with httpx.Client() as client:
        warm = []
        for url, params in asks:
            warm.append(timed(client, url, params))
            if warm[-1]["status"] == "timeout":
                # A server that cannot answer one question in CALL_TIMEOUT_S is not asked
                # again: the figure is that it did not answer.
                return {"calls": len(warm), "timed_out": params, "p50_ms": None, "p99_ms": None}
        # A question that takes seconds gets fewer calls (each of its roots once at
        # least), so that one slow walk cannot take the run's whole budget.
        if statistics.fmean(w["ms"] for w in warm) > SLOW_CALL_MS:
            count = max(len(asks), count // 6)
        servers.wait_for_quiet(5.0)
        others = servers.busy_cores(0.5)
        done = [timed(client, *asks[i % len(asks)]) for i in range(count)]
    times = [d["ms"] for d in done]
    return {
        "calls": len(done),
        "p50_ms": servers.percentile(times, 50),
        "p99_ms": servers.percentile(times, 99),
        "median_bytes": statistics.median(d["bytes"] for d in done),
        "not_200": dict(Counter(str(d["status"]) for d in done if d["status"] != 200)),
        "others_busy_cores_before": round(others, 2),
    }


def speed(
    marquez_url: str, compat_url: str, native_url: str, platform: query.Platform, count: int
) -> dict[str, Any]:
    jobs = len(platform.tasks)
    offsets = [0, jobs // 4, jobs // 2, 3 * jobs // 4, max(0, jobs - 100)]
    plan = workloads.query_plan(platform)
    roots = [(r.namespace, r.name) for r in plan[0].roots]

    def jobs_page(base: str) -> Callable[[], Iterator[tuple[str, dict[str, str]]]]:
        return lambda: (
            (base + "/api/v1/jobs", {"limit": "100", "offset": str(o)}) for o in offsets
        )

    def ns_page(
        base: str, what: str, ns: str
    ) -> Callable[[], Iterator[tuple[str, dict[str, str]]]]:
        path = f"{base}/api/v1/namespaces/{segment(ns)}/{what}"
        return lambda: iter([(path, {"limit": "25", "offset": "0"})])

    def lineage(base: str, hops: int) -> Callable[[], Iterator[tuple[str, dict[str, str]]]]:
        return lambda: (
            (base + "/api/v1/lineage", {"nodeId": f"dataset:{ns}:{name}", "depth": str(hops)})
            for ns, name in roots
        )

    def native_lineage(edges: int) -> Callable[[], Iterator[tuple[str, dict[str, str]]]]:
        def asks() -> Iterator[tuple[str, dict[str, str]]]:
            for ns, name in roots:
                params = {"type": "dataset", "namespace": ns, "name": name}
                yield (
                    native_url + "/api/v1/lineage",
                    params | {"depth": str(edges), "limit": "10000"},
                )

        return asks

    groups: dict[str, dict[str, Any]] = {
        "jobs_100": {
            "title": f"GET /api/v1/jobs, 100 a page, offsets 0 to {offsets[-1]:,} of {jobs:,}",
            "marquez": jobs_page(marquez_url),
            "compat": jobs_page(compat_url),
            "native": lambda: iter([(native_url + "/api/v1/jobs", {"limit": "100"})]),
        },
        "ns_jobs_25": {
            "title": "a namespace's jobs, 25 a page (marquez-web's jobs page)",
            "marquez": ns_page(marquez_url, "jobs", query.JOB_NS),
            "compat": ns_page(compat_url, "jobs", query.JOB_NS),
            "native": lambda: iter(
                [(native_url + "/api/v1/jobs", {"namespace": query.JOB_NS, "limit": "25"})]
            ),
        },
        "ns_datasets_25": {
            "title": "a namespace's datasets, 25 a page (marquez-web's datasets page)",
            "marquez": ns_page(marquez_url, "datasets", query.WAREHOUSE),
            "compat": ns_page(compat_url, "datasets", query.WAREHOUSE),
            "native": lambda: iter(
                [(native_url + "/api/v1/datasets", {"namespace": query.WAREHOUSE, "limit": "25"})]
            ),
        },
        "lineage_d20": {
            "title": "lineage?nodeId= of a dataset, depth 20 (hubs and chain tables); own"
            " route: depth 20 edges, its cap (the Marquez port walks 41, up to 10,000 nodes)",
            "marquez": lineage(marquez_url, 20),
            "compat": lineage(compat_url, 20),
            "native": native_lineage(20),
        },
        "lineage_d9": {
            "title": "lineage?nodeId= of a dataset, depth 9: the Marquez port walks 19 edges,"
            " as the own route asked for depth 19 (the same walk: the shape's cost alone)",
            "marquez": lineage(marquez_url, 9),
            "compat": lineage(compat_url, 9),
            "native": native_lineage(19),
        },
    }
    out: dict[str, Any] = {}
    for name, group in groups.items():
        found = {"title": group["title"]}
        for side in ("marquez", "compat", "native"):
            found[side] = measure(group[side], count)
            print(f"[speed] {name} {side}: {found[side]['p50_ms']} ms p50", flush=True)
        out[name] = found
    return out


# -- import ----------------------------------------------------------------------------


def import_history(
    marquez_db: str,
    work: Path,
    source: Path,
    marquez: Snapshot,
    direct: Snapshot,
    alias_of: dict[Any, Any],
) -> dict[str, Any]:
    db = work / "imported.db"
    argv = [sys.executable, "-m", "embrasure", "import", "marquez", "--from", marquez_db]
    argv += ["--db", f"sqlite:///{db}"]
    started = time.monotonic()
    done = subprocess.run(
        argv, cwd=work, capture_output=True, text=True, env=servers.child_env(source)
    )
    seconds = time.monotonic() - started
    out: dict[str, Any] = {"exit": done.returncode, "seconds": round(seconds, 1)}
    out["output_tail"] = (done.stdout + done.stderr).strip().splitlines()[-8:]
    if done.returncode != 0:
        return out
    compat = Compat(work, source, db)
    try:
        wait_projected(compat.server.url)
        imported = snapshot(compat.url)
    finally:
        compat.stop()
    out["vs_marquez"] = compare_snapshots(marquez, imported, alias_of)
    out["vs_direct"] = compare_snapshots(direct, imported)
    out["same_as_direct"] = (
        imported.nodes == direct.nodes
        and imported.edges == direct.edges
        and imported.runs == direct.runs
    )
    return out


# -- the run ---------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="embrasure-marquez-api-"))
    code = servers.copy_source(work, None)
    platform = query.Platform(args.scale)
    report: dict[str, Any] = {
        "machine": servers.machine_facts(code),
        "marquez": marquez_server.VERSION,
        "marquez_origin": marquez_server.origin(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "jobs": len(platform.tasks),
        "others_busy_cores_at_start": round(servers.busy_cores(2.0), 2),
    }
    started = time.monotonic()
    with running("marquez", work, work) as marquez:
        bodies = workloads.platform_events(platform)
        report["marquez_load"] = workloads.load_platform(marquez, bodies, args.clients)
        print(f"[load] Marquez: {report['marquez_load']['events_per_s']:.1f} events/s", flush=True)
        compat = Compat(work, work, work / "embrasure.db")
        try:
            report["embrasure_load_s"] = round(load_embrasure(compat.server.url, platform), 1)
            print(f"[load] Embrasure: {report['embrasure_load_s']} s", flush=True)
            if "compare" in args.parts or "import" in args.parts:
                # Reading all of Marquez back: a request a job for its runs, and its job
                # listing reads each job's latest runs (0.16 s a job at 10,400 jobs).
                m_snap, e_snap = snapshot(marquez.url), snapshot(compat.url)
                alias_of = aliases(compat.url, m_snap.nodes - e_snap.nodes)
            if "compare" in args.parts:
                found = compare_snapshots(m_snap, e_snap, alias_of)
                sample = sorted(d[1:] for d in m_snap.nodes & e_snap.nodes if d[0] == "dataset")
                found["fields"] = compare_fields(marquez.url, compat.url, sample[:FIELD_SAMPLE])
                plan = workloads.query_plan(platform)
                roots = [(r.namespace, r.name) for r in plan[0].roots]
                found["lineage_d20"] = compare_lineage(marquez.url, compat.url, roots)
                report["compare"] = found
                print(f"[compare] {json.dumps(found['node_causes'])}", flush=True)
            if "speed" in args.parts:
                report["speed"] = speed(
                    marquez.url, compat.url, compat.server.url, platform, args.calls
                )
            if "import" in args.parts:
                report["import"] = import_history(
                    marquez.db_url, work, work, m_snap, e_snap, alias_of
                )
        finally:
            compat.stop()
    report["seconds"] = round(time.monotonic() - started)
    report["others_busy_cores_at_end"] = round(servers.busy_cores(2.0), 2)
    report["work"] = str(work)
    return report


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--scale", type=float, default=0.2, help="bench/query.py platform")
    parser.add_argument("--clients", type=int, default=4, help="concurrent POSTs to Marquez")
    parser.add_argument("--calls", type=int, default=30, help="warm calls per question")
    parser.add_argument("--quick", action="store_true", help="scale 0.01, results/tmp/")
    parser.add_argument("--out", type=Path, default=None, help="results path, no suffix")
    parser.add_argument(
        "--marquez-source", type=Path, default=None, help=marquez_server.SOURCE_HELP
    )
    parser.add_argument("--render", action="store_true", help="only OUT.md again, from OUT.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.scale, args.calls = 0.01, 10
    if args.out is None:
        args.out = RESULTS / ("tmp/peers-marquez-api" if args.quick else "peers-marquez-api")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        report = json.loads(args.out.with_suffix(".json").read_text())
    else:
        marquez_server.require_java()
        marquez_server.fetch(source=args.marquez_source)
        report = run(args)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    args.out.with_suffix(".md").write_text(marquez_api_report.markdown(report))
    print(f"wrote {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
