"""bench/results/peers.md from the run's JSON (bench/peers/marquez.py), and the one-line
progress summaries the run prints."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def _f(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _ratio(value: float | None, marquez: float | None) -> str:
    if value is None or not marquez:
        return "-"
    return f"{value / marquez:.2f}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows] + [""]


def _dig(found: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(found, dict) or key not in found:
            return None
        found = found[key]
    return found


# -- progress lines ---------------------------------------------------------------------------


def ingest_line(found: dict[str, Any]) -> str:
    parts = []
    for label in LOADS:
        w = found.get(label)
        if w is not None:
            parts.append(
                f"{label} {w['events_per_s']:,.0f} events/s p99 {w['latency_ms']['p99']:.0f} ms"
                f" {w['statuses']}"
            )
    return "; ".join(parts) + f"; {_f(found['bytes_per_event'])} B/event"


def visible_line(found: dict[str, Any]) -> str:
    idle, loaded = found["idle"]["visible_ms"] or {}, found["under_load"]["visible_ms"] or {}
    return (
        f"idle p50 {_f(idle.get('p50'), 1)} ms, under load p50 {_f(loaded.get('p50'), 1)} ms"
        f" p99 {_f(loaded.get('p99'), 1)} ms"
    )


def load_line(found: dict[str, Any]) -> str:
    return (
        f"{found['events']:,} events in {found['seconds']:.1f} s ({found['events_per_s']:,.0f}/s),"
        f" statuses {found['statuses']}, visible after {found['visible_after_s']} s"
    )


def query_line(found: dict[str, Any]) -> str:
    cold, warm = found["cold"], found["warm"]
    return (
        f"cold p50 {cold['p50_ms']:.1f} ms max {cold['max_ms']:.1f}; warm p50 "
        f"{warm['p50_ms']:.1f} p99 {warm['p99_ms']:.1f} ms; size {warm['median_size']}"
        + (f"; not 200: {dict(warm['not_200'])}" if warm["not_200"] else "")
    )


# -- the page -----------------------------------------------------------------------------------


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    targets = report["targets"]
    lines = [
        "# Embrasure beside Marquez",
        "",
        f"Run {m['date']} on {m['nproc']} cores ({m['cpu']}), `bench/peers/marquez.py`"
        f" ({report['seconds']:,} s). Embrasure {m['commit']} (Python {m['python']}, SQLite"
        f" {m['sqlite']}); Marquez {report['marquez']} ({report.get('marquez_origin', '?')};"
        f" {report.get('java', 'Java')}); PostgreSQL {report.get('postgresql', '?')}, the same"
        " local cluster for both servers. Settings: "
        + ", ".join(f"{k} {v}" for k, v in report["settings"].items() if k not in ("out",))
        + ".",
        "",
        f"Other processes kept {report['others_busy_cores_at_start']} cores busy at the start"
        f" and {report['others_busy_cores_at_end']} at the end; each part records its own"
        " figure below. The machine is shared (other sessions run their tests and benches), so"
        " these figures are indicative: rerun on a quiet machine before quoting them.",
        "",
        *[
            f"Rerun {r['date']} ({r['commit']}): {', '.join(r['settings']['parts'])} of"
            f" {', '.join(r['settings']['targets'])} ({r['seconds']} s; others kept"
            f" {r['others_busy_cores_at_start']} cores busy at its start); those parts' figures"
            " below are the rerun's.\n"
            for r in report.get("reruns", ())
        ],
        "Ratios are Embrasure / Marquez: above 1 is Embrasure faster for a rate, below 1 is"
        " Embrasure faster for a time or smaller for a size.",
        "",
    ]
    lines += _ingest(targets) + _visibility(targets) + _sizes(targets)
    lines += _queries(targets) + _correctness(targets)
    return "\n".join(lines)


def _by_target(
    targets: dict[str, Any], value: Callable[[dict[str, Any]], float | None]
) -> tuple[dict[str, float | None], float | None]:
    values = {n: value(t) for n, t in targets.items()}
    return values, values.get("marquez")


LOADS = {
    "single": "1 event / POST, all of one job",
    "single_distinct_jobs": "1 event / POST, each another job",
    "batch": "500 events / POST (Embrasure only: Marquez has no batch route)",
}


def _ingest(targets: dict[str, Any]) -> list[str]:
    if not any("ingest" in t for t in targets.values()):
        return []
    rows = []
    marquez = targets.get("marquez", {}).get("ingest", {})
    for label, title in LOADS.items():
        m_rate = _dig(marquez, label, "stored_per_s")
        for name, t in targets.items():
            w = _dig(t, "ingest", label)
            if w is None:
                continue
            lat = w["latency_ms"]
            bad = {s: n for s, n in w["statuses"].items() if not s.startswith("2")}
            if w["socket_errors"]:
                bad["socket"] = w["socket_errors"]
            rows.append(
                [
                    title,
                    name,
                    f"{_f(w['events_per_s'])} / {_f(w.get('stored_per_s'))}",
                    " / ".join(_f(lat[k], 1) for k in ("p50", "p90", "p99", "max")),
                    str(bad or "none"),
                    f"{_f(w.get('graph_caught_up_s'), 1)} / {_f(w.get('settled_s'), 1)}",
                    _ratio(w.get("stored_per_s"), m_rate) if label != "batch" else "-",
                ]
            )
    busy = ", ".join(
        f"{n} {t['ingest']['others_busy_cores_before']} / {t['ingest']['machine_busy_cores']}"
        for n, t in targets.items()
        if "ingest" in t
    )
    headers = [
        "load",
        "target",
        "events/s: 2xx in wrk's window / stored until idle",
        "latency ms p50 / p90 / p99 / max",
        "non-2xx",
        "after the load: graph caught up / server idle (s)",
        "stored/s E/M",
    ]
    return [
        "## Ingest: single events with unique runIds",
        "",
        "wrk with bench/ingest.lua, 64 connections, 2 threads, one ~4.7 KB RunEvent per POST"
        " (bench/ingest_load.py's template, every runId and output dataset unique), after a"
        " warm-up run of its own. First every event names the same job (the template's), then"
        " every event another job (the counter in the job's name too). Embrasure answers 202"
        " once the delivery is fsync'd and projects it asynchronously (the whole `serve`,"
        " projector on, as users run it); Marquez answers 201 once it has written the event"
        " and its graph rows. Events/s: the 2xx answers wrk saw in its window, and the events"
        " the server stored from the start of the load until it was idle again. After"
        " the load: the seconds until Embrasure's projector had every event in the graph"
        " (Marquez: none), then until the server's process was idle (Marquez goes on serving"
        " the requests wrk left in flight when it stopped).",
        "",
        f"Busy cores, others before / the machine during the single run: {busy}.",
        "",
        *_table(headers, rows),
    ]


def _visibility(targets: dict[str, Any]) -> list[str]:
    if not any("visibility" in t for t in targets.values()):
        return []
    _, m_idle = _by_target(targets, lambda t: _dig(t, "visibility", "idle", "visible_ms", "p50"))
    _, m_load = _by_target(
        targets, lambda t: _dig(t, "visibility", "under_load", "visible_ms", "p50")
    )
    rows = []
    for name, t in targets.items():
        v = t.get("visibility")
        if v is None:
            continue
        idle, loaded = v["idle"], v["under_load"]
        iv, lv = idle["visible_ms"] or {}, loaded["visible_ms"] or {}
        bg = v.get("background_load") or {}
        rows.append(
            [
                name,
                _f(_dig(idle, "ack_ms", "p50"), 1),
                " / ".join(_f(iv.get(k), 1) for k in ("p50", "p90", "max")),
                " / ".join(_f(lv.get(k), 1) for k in ("p50", "p90", "max")),
                _f(bg.get("events_per_s")),
                str(idle["never_visible"] + loaded["never_visible"]),
                f"{_ratio(iv.get('p50'), m_idle)} / {_ratio(lv.get('p50'), m_load)}",
            ]
        )
    headers = [
        "target",
        "idle: POST answered p50 (ms)",
        "idle: visible p50 / p90 / max (ms)",
        "under load: visible p50 / p90 / max (ms)",
        "background events/s",
        "never visible (60 s)",
        "visible p50 E/M idle / load",
    ]
    return [
        "## Time until a posted event is answered by the lineage API",
        "",
        "One event POSTed (a new output dataset), then `GET /api/v1/lineage` of that dataset"
        " at depth 1 asked in a loop until the answer shows the event's job writing it: the"
        " time from the start of the POST to that answer, one event at a time. Idle, then with"
        " wrk keeping 8 connections of other single events going.",
        "",
        *_table(headers, rows),
    ]


def _sizes(targets: dict[str, Any]) -> list[str]:
    _, m_ingest = _by_target(targets, lambda t: _dig(t, "ingest", "bytes_per_event"))
    _, m_platform = _by_target(targets, lambda t: _dig(t, "platform_load", "bytes_per_event"))
    rows = []
    for name, t in targets.items():
        i = _dig(t, "ingest", "bytes_per_event")
        p = _dig(t, "platform_load", "bytes_per_event")
        if i is None and p is None:
            continue
        rows.append(
            [
                name,
                _f(i),
                _f(p),
                f"{_ratio(i, m_ingest)} / {_ratio(p, m_platform)}",
            ]
        )
    if not rows:
        return []
    return [
        "## Database size on disk per event",
        "",
        "Growth of the database from empty (after its migrations) to after the load, over"
        " the events stored: SQLite's file and WAL; PostgreSQL's `pg_database_size`. The"
        " ingest events are single ~4.7 KB RunEvents of a few hundred jobs (the warm-up and"
        " measured runs, and for Embrasure before its batch run); the platform events are"
        " bench/query.py's (~10 KB, a 20-column schema and column lineage each). Embrasure"
        " keeps every event's body (zstd-compressed) beside the graph; Marquez keeps each"
        " event as JSON in `lineage_events` beside its graph and versions.",
        "",
        *_table(["target", "ingest events B/event", "platform events B/event", "E/M"], rows),
    ]


def _queries(targets: dict[str, Any]) -> list[str]:
    if not any("queries" in t for t in targets.values()):
        return []
    lines = [
        "## Queries on the same generated platform",
        "",
        "bench/query.py's platform, every event POSTed one at a time by 4 clients to each"
        " target. Cold: the server restarted on its database, then each root asked once"
        " (groups in the order below, so the first group also pays a JVM's first calls);"
        " warm: one pass more, then the calls counted. Roots: 5 hub tables and 5 tables of"
        " the deepest chains (lineage), fields of chain tables, jobs that ran twice. Embrasure"
        " is asked with `limit=10000` (Marquez's lineage has no limit). The depths are not the"
        " same walk: Embrasure's counts dataset ↔ job edges, upstream and downstream apart;"
        " Marquez's counts job-to-job hops through any dataset two jobs share (so siblings of"
        " a hub's readers are in it): compare the sizes before the times.",
        "",
    ]
    for name, t in targets.items():
        if "platform_load" in t:
            p = t["platform_load"]
            lines.append(f"- {name}: {load_line(p)}.")
    lines.append("")
    groups: dict[str, dict[str, Any]] = {}
    for name, t in targets.items():
        for group, found in (_dig(t, "queries", "groups") or {}).items():
            groups.setdefault(group, {})[name] = found
    rows = []
    for by_target in groups.values():
        marquez = _dig(by_target.get("marquez"), "warm", "p50_ms")
        for name, found in by_target.items():
            cold, warm = found["cold"], found["warm"]
            size = warm["median_size"]
            bad = dict(warm["not_200"]) | dict(cold["not_200"])
            rows.append(
                [
                    found["title"],
                    name,
                    f"{_f(cold['p50_ms'], 1)} / {_f(cold['max_ms'], 1)}",
                    f"{_f(warm['p50_ms'], 1)} / {_f(warm['p99_ms'], 1)} ({warm['calls']})",
                    ", ".join(f"{k} {_f(v)}" for k, v in size.items()) or "-",
                    str(bad or "none"),
                    _ratio(warm["p50_ms"], marquez),
                ]
            )
    headers = [
        "query",
        "target",
        "cold p50 / max (ms)",
        "warm p50 / p99 (ms) (calls)",
        "answer size (median)",
        "not 200",
        "warm p50 E/M",
    ]
    return lines + _table(headers, rows)


def _correctness(targets: dict[str, Any]) -> list[str]:
    if not any("correctness" in t for t in targets.values()):
        return []
    lines = [
        "## The same events in two orders",
        "",
        "The shared OpenLineage corpus (tests/corpus.py makes its templates sendable),"
        " grouped into runs by runId. Forward: runs in corpus order, START before COMPLETE,"
        " each event once, one per POST. Backward: runs reversed, COMPLETE before START, every"
        " event twice (Embrasure: first in batches of 7, then one per POST; Marquez: one per"
        " POST both times). Each order to a fresh database; the nodes, dataset ↔ job edges and"
        " run states each target serves are compared between its two orders.",
        "",
    ]
    rows = []
    for name, t in targets.items():
        c = t.get("correctness")
        if c is None:
            continue
        served = " · ".join(
            f"{o}: {s['nodes']} nodes, {s['edges']} edges, {s['runs']} runs"
            for o, s in c["served"].items()
        )
        kinds = ", ".join(f"{k} {v}" for k, v in c["by_kind"].items() if v) or "none"
        if c.get("export_identical") is not None:
            kinds += "; export byte-identical: " + ("yes" if c["export_identical"] else "no")
        answers = " · ".join(f"{o}: {v['statuses']}" for o, v in c["sent"].items())
        rows.append([name, f"{c['events']} ({c['runs']} runs)", answers, served, kinds])
    lines += _table(["target", "events", "answers", "served", "differences"], rows)
    for name, t in targets.items():
        c = t.get("correctness")
        refused: dict[str, list[Any]] = {}
        for sent in (c or {}).get("sent", {}).values():
            for reason, n, first in sent["refusals"]:
                refused.setdefault(reason, [0, first])[0] += n
        if refused:
            lines += [
                f"### {name}: why events were refused (both orders, the 10 commonest of each)",
                "",
            ]
            ranked = sorted(refused.items(), key=lambda kv: -kv[1][0])
            lines += [f"- `{r}`: {n} POSTs, first `{first}`" for r, (n, first) in ranked]
            lines.append("")
        if c is None or not c["explained"]:
            continue
        lines += [f"### {name}: the differences and the events naming them", ""]
        for d in c["explained"]:
            events = "; ".join(d["events"][:6]) + (" …" if len(d["events"]) > 6 else "")
            lines.append(f"- {d['kind']}: `{d['what']}` — {events or 'no corpus event names it'}")
        lines.append("")
    return lines
