"""The ingest benchmark's terminal table and markdown report, from its results dict."""

from __future__ import annotations

from typing import Any

SERVER_LABEL = {
    "null": "null receiver",
    "embrasure": "receiver alone (serve --no-projector --single-process)",
    "serve": "serve (a process per stage)",
    "serve-1p": "serve --single-process (threads)",
}
WORKLOAD_LABEL = {"single": "single event", "batch": "500-event batch"}


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _ms(value: float) -> str:
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%"


def _failures(record: dict[str, Any]) -> str:
    """Non-202 statuses and socket errors of a run (warm-up included), or "none"."""
    parts = [f"HTTP {s}: {n}" for s, n in record["non_202"].items()]
    parts += [f"{kind} errors: {n}" for kind, n in record["socket_errors"].items()]
    parts += [f"warm-up HTTP {s}: {n}" for s, n in record["warmup_non_202"].items()]
    parts += [f"warm-up {k} errors: {n}" for k, n in record["warmup_socket_errors"].items()]
    return ", ".join(parts) or "none"


def one_line(record: dict[str, Any]) -> str:
    """Progress line printed after each measured run."""
    return (
        f"{_n(record['req_per_s']):>7} req/s {_n(record['events_per_s']):>7} events/s  "
        f"p50 {_ms(record['p50_ms'])} ms  p99 {_ms(record['p99_ms'])} ms  "
        f"RSS {record['rss_mib']:.0f} MiB  other CPU {record['other_cpu_cores']:.2f}  "
        f"failures: {_failures(record)}"
    )


def _verdict_text(verdict: dict[str, Any]) -> str:
    if verdict["met"]:
        return "met"
    return (
        f"MISSED by {verdict['shortfall_points']:.0f} points "
        f"(needs {verdict['speedup_needed']:.1f}x the throughput)"
    )


def _result_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for workload, by_server in results["summary"]["cells"].items():
        for server, cell in by_server.items():
            rows.append(
                [
                    WORKLOAD_LABEL[workload],
                    SERVER_LABEL[server],
                    _n(cell["req_per_s"]),
                    _n(cell["events_per_s"]),
                    _ms(cell["p50_ms"]),
                    _ms(cell["p99_ms"]),
                    f"{cell['rss_mib']:.0f} / {cell['hwm_mib']:.0f}",
                    f"{cell['server_cpu_cores']:.2f} ({cell['main_thread_cpu_cores']:.2f})",
                    _n(cell["main_thread_us_per_req"]),
                    f"{cell['wrk_cpu_cores']:.2f}",
                    f"{cell['other_cpu_cores']:.2f}",
                    _disk(cell),
                    _drain(cell),
                ]
            )
    return rows


RESULT_HEADER = [
    "workload",
    "server",
    "req/s",
    "events/s",
    "p50 ms",
    "p99 ms",
    "RSS / peak MiB",
    "server CPU (main thread)",
    "main thread µs/req",
    "wrk CPU",
    "other CPU",
    "disk B/event: files, written",
    "backlog after, drained in s",
]


def _drain(cell: dict[str, float]) -> str:
    if "backlog_after" not in cell:
        return "-"
    drained = f"{cell['drain_s']:.1f}" if "drain_s" in cell else "not within 120 s"
    return f"{_n(cell['backlog_after'])}, {drained}"


def _disk(cell: dict[str, float]) -> str:
    if "file_bytes_per_event" not in cell:
        return "-"
    return f"{_n(cell['file_bytes_per_event'])}, {_n(cell['write_bytes_per_event'])}"


def _target_rows(results: dict[str, Any]) -> list[list[str]]:
    summary = results["summary"]
    single, batch = summary["targets"]["single"], summary["targets"]["batch"]
    cells = summary["cells"]
    return [
        [
            "single-event durable ingest / null receiver (req/s)",
            f"{_n(cells['single']['embrasure']['req_per_s'])} / "
            f"{_n(cells['single']['null']['req_per_s'])} = {_pct(single['ratio'])}",
            ", ".join(_pct(r) for r in single["per_repeat"]),
            f"≥ {_pct(single['target'])}",
            _verdict_text(single),
        ],
        [
            "batched ingest / parse ceiling (events/s)",
            f"{_n(cells['batch']['embrasure']['events_per_s'])} / "
            f"{_n(summary['parse_ceiling'])} = {_pct(batch['ratio'])}",
            ", ".join(_pct(r) for r in batch["per_repeat"]),
            f"≥ {_pct(batch['target'])}",
            _verdict_text(batch),
        ],
        *(_serve_row(summary, name) for name in ("single", "batch")),
        _drain_row(summary["targets"]["drain"]),
    ]


def _serve_row(summary: dict[str, Any], workload: str) -> list[str]:
    verdict, cells = summary["targets"][f"serve_{workload}"], summary["cells"][workload]
    return [
        f"serve / receiver alone, {WORKLOAD_LABEL[workload]}s (events/s)",
        f"{_n(cells['serve']['events_per_s'])} / {_n(cells['embrasure']['events_per_s'])}"
        f" = {_pct(verdict['ratio'])}",
        ", ".join(_pct(r) for r in verdict["per_repeat"]),
        f"≥ {_pct(verdict['target'])}",
        _verdict_text(verdict),
    ]


def _drain_row(drain: dict[str, Any]) -> list[str]:
    runs = ", ".join("over 120" if d is None else f"{d:.1f}" for d in drain["per_run"])
    return [
        "serve: seconds from the end of the load until the backlog is empty",
        f"slowest {drain['seconds']:.1f} s",
        runs,
        f"≤ {drain['target']:.0f} s",
        "met" if drain["met"] else "MISSED",
    ]


TARGET_HEADER = ["ratio", "medians", "per repeat", "target", "result"]


def _plain_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _parse_rows(results: dict[str, Any]) -> list[list[str]]:
    rates = results["summary"]["parse_rates"]
    names = dict.fromkeys(k.rpartition(", gc ")[0] for k in rates)
    return [[name, _n(rates[f"{name}, gc on"]), _n(rates[f"{name}, gc off"])] for name in names]


def table(results: dict[str, Any]) -> str:
    """What the terminal shows at the end of a run."""
    summary = results["summary"]
    repeats = results["config"]["repeats"]
    return "\n\n".join(
        [
            f"Medians of {repeats} runs ({results['machine']['date']}):",
            _plain_table(RESULT_HEADER, _result_rows(results)),
            f"Parse ceiling, one process, events/s: {_n(summary['parse_ceiling'])}",
            _plain_table(["parser", "gc on", "gc off"], _parse_rows(results)),
            _plain_table(TARGET_HEADER, _target_rows(results)),
            "Failed requests: " + _failure_summary(results),
        ]
    )


def _failure_summary(results: dict[str, Any]) -> str:
    failed = [
        f"{r['workload']}/{r['server']} #{r['repeat']}: {_failures(r)}"
        for r in results["runs"]
        if _failures(r) != "none"
    ]
    lost = [
        f"{r['workload']} #{r['repeat']}: {r['lost_acknowledged']} acknowledged deliveries "
        "not in the log"
        for r in results["runs"]
        if r.get("lost_acknowledged")
    ]
    bad_receipts = [
        f"{r['workload']} #{r['repeat']}: {r['receipts']['ok']}/{r['receipts']['checked']} "
        "sampled receipts found as sent"
        for r in results["runs"]
        if r.get("receipts") and r["receipts"]["ok"] != r["receipts"]["checked"]
    ]
    problems = failed + lost + bad_receipts
    return "; ".join(problems) if problems else "none (every response was 202)"


def _runs_rows(results: dict[str, Any]) -> list[list[str]]:
    return [
        [
            str(r["repeat"]),
            WORKLOAD_LABEL[r["workload"]],
            SERVER_LABEL[r["server"]],
            _n(r["req_per_s"]),
            _n(r["events_per_s"]),
            _ms(r["p50_ms"]),
            _ms(r["p99_ms"]),
            f"{r['rss_mib']:.0f} / {r['hwm_mib']:.0f}",
            f"{r['server_cpu_cores']:.2f} ({r['main_thread_cpu_cores']:.2f})",
            f"{r['other_cpu_cores']:.2f}",
            f"{r['waited_for_quiet_s']:.0f}",
            _failures(r),
            _receipts(r),
        ]
        for r in results["runs"]
    ]


def _receipts(record: dict[str, Any]) -> str:
    if "receipts" not in record:
        return "-"
    stored = record.get("stored") or {}
    checked = record["receipts"] or {"ok": 0, "checked": 0}
    return (
        f"{checked['ok']}/{checked['checked']} sampled receipts found; "
        f"{_n(stored.get('deliveries', 0))} stored ≥ {_n(record['acked_deliveries'])} acked"
    )


def _profile_section(profile: dict[str, Any]) -> str:
    lines = [
        f"### {WORKLOAD_LABEL[profile['workload']]}",
        "",
        f"py-spy `record --native --rate 50` for {profile['seconds']} s in the middle of a "
        f"wrk run (same load); raw collapsed stacks: [{profile['raw_stacks']}]"
        f"({profile['raw_stacks']}). Throughput while profiled (py-spy pauses the process "
        f"to unwind): {_n(profile['req_per_s_while_profiled'])} req/s. Server CPU "
        f"{profile['server_cpu_cores']:.2f} cores, of which the main (event-loop) thread "
        f"{profile['main_thread_cpu_cores']:.2f}.",
        "",
        "| thread | samples | waiting for the GIL | cyclic gc | fsync | outside embrasure/ code |",
        "|---|---|---|---|---|---|",
    ]
    for t in profile["threads"]:
        lines.append(
            f"| {t['thread']} | {t['samples']} | {_pct(t['gil_wait_share'])} | "
            f"{_pct(t['gc_share'])} | {_pct(t['fsync_share'])} | "
            f"{_pct(t['outside_project_share'])} |"
        )
    for t in profile["threads"][:2]:
        top = ", ".join(f"{name} {_pct(share)}" for name, share in t["top_inclusive"][:10])
        leaf = ", ".join(f"{name} {_pct(share)}" for name, share in t["top_leaf"][:6])
        lines += ["", f"- **{t['thread']}**, inclusive: {top}", f"  - innermost frames: {leaf}"]
    return "\n".join(lines)


def markdown(results: dict[str, Any], json_name: str, readme: str) -> str:
    """The dated report; ``readme`` is bench/README.md relative to the report."""
    machine, cfg = results["machine"], results["config"]
    libs = ", ".join(f"{k} {v}" for k, v in machine["libraries"].items())
    sections = [
        f"# Ingest benchmark, {machine['date']}",
        f"Written by `python bench/ingest.py` in {cfg['elapsed_s'] / 60:.1f} min; raw numbers "
        f"in [{json_name}]({json_name}); how it measures, and what bounds Embrasure "
        f"(profiles and A/B experiments): [bench/README.md]({readme}).",
        "## Targets",
        _md_table(TARGET_HEADER, _target_rows(results)),
        f"## Results (medians of {cfg['repeats']} runs)",
        "Four servers, each measured in turn within a repeat: the null receiver; the "
        "receiver alone (`serve --no-projector --single-process`: what the receiver "
        "targets compare); `serve` as users run it (a process per stage: receiver, "
        "projector); and `serve --single-process` (the same stages as threads of one "
        "process, as serve ran before). For the two that project: the backlog when the "
        "load stopped, and the seconds until the projector had it all. "
        f"Each run: a fresh server, {cfg['warmup_s']} s warm-up, {cfg['duration_s']} s "
        "measured by wrk. Throughput counts 202 responses only. Latency is wrk's, per "
        "request (for a batch, per 500 events). RSS is VmRSS / VmHWM after the run, summed "
        "over the server's processes. CPU is in cores over the measured window: the server's "
        "processes (the receiver's main event-loop thread in brackets), wrk, and every "
        "other process on the machine (this machine is shared: "
        "other CPU above 0.1 means someone else's job ran during the measurement). The "
        "main thread's CPU per request is what caps a one-process server. Disk: "
        "the DB + WAL file sizes after the run over the events the log holds; and the "
        "bytes the server wrote to the block device (/proc/PID/io) over the events "
        "acknowledged in the measured window.",
        _md_table(RESULT_HEADER, _result_rows(results)),
        "## Parse ceiling",
        f"One process parsing the same kind of 500-event batch bodies "
        f"({_n(cfg['batch_body_bytes'])} bytes, {cfg['parse_bodies']} distinct bodies, the "
        f"fastest of {cfg['parse_trials']} passes, median over repeats), events/s. The "
        f"ceiling is the fastest orjson variant: **{_n(results['summary']['parse_ceiling'])} "
        "events/s**. The receiver's own strict parse of the same bodies (orjson, then "
        "re-serialisation for the depth and duplicate-key checks) is shown for context: it "
        "is what Embrasure runs, and not a candidate for the ceiling.",
        _md_table(["parser", "gc on", "gc off"], _parse_rows(results)),
        "## Failed requests",
        _failure_summary(results),
        "## Every run",
        _md_table(
            [
                "#",
                "workload",
                "server",
                "req/s",
                "events/s",
                "p50 ms",
                "p99 ms",
                "RSS / peak MiB",
                "server CPU (main)",
                "other CPU",
                "waited s",
                "failures",
                "durability check",
            ],
            _runs_rows(results),
        ),
    ]
    if results["profiles"]:
        sections += [
            "## Profiles of Embrasure (targets missed)",
            "Shares are of the samples py-spy recorded for each thread (it drops those in "
            "which it judges the thread idle). "
            "*Waiting for the GIL*: the thread sat in `pthread_cond_timedwait` on return "
            "from a C call (CPython's take_gil). *Outside embrasure/ code*: uvicorn, "
            "Starlette, uvloop and the event loop.",
            *(_profile_section(p) for p in results["profiles"]),
        ]
    sections += [
        "## Machine",
        _md_table(
            ["nproc", "CPU", "memory", "kernel", "Python", "SQLite", "wrk", "Embrasure measured"],
            [
                [
                    str(machine["nproc"]),
                    machine["cpu_model"],
                    f"{machine['memory_gib']} GiB",
                    machine["kernel"],
                    machine["python"],
                    machine["sqlite"],
                    machine["wrk"],
                    machine["embrasure"],
                ]
            ],
        ),
        f"Libraries: {libs}.",
        f"Event: {cfg['event_bytes']:,} bytes (a COMPLETE RunEvent from bench/events.py, "
        "its runId and output dataset name unique per event). Load: "
        + "; ".join(
            f"{w['name']}: {w['connections']} connections, {w['threads']} wrk threads, "
            f"{w['events_per_body']} event(s) per body"
            for w in cfg["workloads"]
        )
        + ".",
    ]
    return "\n\n".join(sections) + "\n"
