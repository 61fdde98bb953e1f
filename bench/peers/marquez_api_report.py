"""bench/peers/marquez_api.py's results as Markdown (bench/results/peers-marquez-api.md)."""

from __future__ import annotations

from typing import Any

SIDES = (
    ("marquez", "Marquez"),
    ("compat", "Embrasure, Marquez port"),
    ("native", "Embrasure, own route"),
)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if not a or not b else f"{a / b:.3f}"


def _speed(report: dict[str, Any]) -> list[str]:
    lines = [
        "## Speed of the routes marquez-web leans on",
        "",
        "Warm calls (one warm-up pass first), one client, keep-alive; p50 / p99 of the wall"
        " time of a call, body read. compat / Marquez below 1 is Embrasure faster;"
        " compat / native is what the Marquez shape costs over Embrasure's own route for"
        " the same question (the own routes page by cursor and answer a smaller shape:"
        " compare the sizes too).",
        "",
        "| question | server | p50 / p99 ms | calls | median bytes | others busy (cores) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    ratios = [
        "",
        "| question | p50 compat / Marquez | p50 compat / native |",
        "| --- | --- | --- |",
    ]
    for name, group in report["speed"].items():
        for side, label in SIDES:
            s = group[side]
            if s.get("timed_out") is not None:
                asked = s["timed_out"].get("nodeId", s["timed_out"])
                lines.append(
                    f"| {group['title']} | {label} | no answer in 60 s (asked of {asked};"
                    " not asked again) | - | - | - |"
                )
                continue
            not_ok = f" (not 200: {s['not_200']})" if s["not_200"] else ""
            lines.append(
                f"| {group['title']} | {label} | {_ms(s['p50_ms'])} / {_ms(s['p99_ms'])}{not_ok}"
                f" | {s['calls']} | {s['median_bytes']:,.0f} | {s['others_busy_cores_before']} |"
            )
        m, c, n = (group[k].get("p50_ms") for k in ("marquez", "compat", "native"))
        ratios.append(f"| {name} | {_ratio(c, m)} | {_ratio(c, n)} |")
    return [*lines, *ratios, ""]


def _compare(found: dict[str, Any], title: str) -> list[str]:
    lines = [
        f"## {title}",
        "",
        "| | Marquez | Embrasure |",
        "| --- | --- | --- |",
        *(
            f"| {k} | {found[k]['marquez']:,} | {found[k]['embrasure']:,} |"
            for k in ("nodes", "edges", "runs")
        ),
        "",
        f"- nodes only in Marquez: {found['nodes_only_marquez']:,}; only in Embrasure:"
        f" {found['nodes_only_embrasure']:,}",
        f"- edges only in Marquez: {found['edges_only_marquez']:,}; only in Embrasure:"
        f" {found['edges_only_embrasure']:,}; differing once Marquez's alias identities are"
        f" read as their Embrasure node: {found['edges_differ_once_aliases_resolved']:,}",
        f"- runs only in Marquez: {found['runs_only_marquez']:,}; only in Embrasure:"
        f" {found['runs_only_embrasure']:,}; run states that differ: "
        + (", ".join(f"{k}: {v}" for k, v in found["run_states_differ"].items()) or "none"),
        "",
        "Nodes served by one side only, by cause:",
        "",
        *(f"- {cause}: {count:,}" for cause, count in sorted(found["node_causes"].items())),
        "",
        "Examples (at most 5 of each):",
        "",
        *(f"- {what}: {items}" for what, items in found["examples"].items() if items),
        "",
    ]
    if "fields" in found:
        f = found["fields"]
        lines += [
            f"Fields (name and type) of {f['same'] + f['differ']} datasets served by both:"
            f" {f['same']} the same, {f['differ']} different.",
            "",
        ]
    if "lineage_d20" in found:
        lines += [
            "Lineage at depth 20 around the same roots (node ids as each serves them):",
            "",
            "| root | Marquez nodes | Embrasure nodes | in both |",
            "| --- | --- | --- | --- |",
            *(
                f"| {r['root'][1]} | {r['marquez_nodes']:,} | {r['embrasure_nodes']:,}"
                f" | {r['both']:,} |"
                for r in found["lineage_d20"]
            ),
            "",
            "Marquez's lineage walks job-to-job hops through any dataset two jobs share, so"
            " a hub's graph holds every sibling reader; Embrasure's walks dataset ↔ job edges"
            " upstream and downstream apart (docs/marquez.md#lineage).",
            "",
        ]
    return lines


def markdown(report: dict[str, Any]) -> str:
    machine = report["machine"]
    lines = [
        "# Embrasure's Marquez port beside Marquez",
        "",
        f"Run {machine.get('date', '?')} on {machine.get('cores', '?')} cores,"
        f" `bench/peers/marquez_api.py` ({report['seconds']} s). Embrasure:"
        f" {machine.get('commit', '?')}; Marquez {report['marquez']}"
        f" ({report['marquez_origin']}). {report['jobs']:,} jobs (bench/query.py's platform"
        f" at scale {report['settings']['scale']}). Other processes kept"
        f" {report['others_busy_cores_at_start']} cores busy at the start and"
        f" {report['others_busy_cores_at_end']} at the end.",
        "",
        f"Loading: Marquez took {report['marquez_load']['events']:,} events one POST at a"
        f" time from {report['marquez_load']['clients']} clients at"
        f" {report['marquez_load']['events_per_s']:.1f} events/s; Embrasure took them in"
        f" 200-event batches and had them in its graph after {report['embrasure_load_s']} s.",
        "",
    ]
    if "speed" in report:
        lines += _speed(report)
    if "compare" in report:
        lines += _compare(report["compare"], "The same events, both servers' answers")
    if "import" in report:
        found = report["import"]
        lines += [
            "## Marquez's history imported",
            "",
            f"`embrasure import marquez --from` Marquez's database: exit {found['exit']},"
            f" {found['seconds']} s.",
            "",
            "```",
            *found["output_tail"],
            "```",
            "",
        ]
        if "same_as_direct" in found:
            same = "the same" if found["same_as_direct"] else "not the same"
            lines += [
                f"Nodes, edges and run states of the imported Embrasure and of the one fed"
                f" directly: {same}.",
                "",
            ]
        if "vs_marquez" in found:
            lines += _compare(found["vs_marquez"], "Imported Embrasure beside Marquez")
            lines += _compare(
                found["vs_direct"], "Imported Embrasure beside Embrasure fed directly"
            )
    return "\n".join(lines) + "\n"
