"""The read commands: `lineage`, `impact`, `runs`, `dataset-runs`, `deliveries`,
`quarantine list|replay`.

Each is a thin client of one read endpoint (docs/queries.md) over --url or --db
(client.open_client): the API's JSON with --json, else a table. Nothing here knows the
store; what the API answers is what is printed.
"""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING, Any

import click

from embrasure.cli.options import (
    add_row,
    client_options,
    connected,
    new_table,
    page_options,
    print_json,
    show_table,
)
from embrasure.model import DELIVERY_STATES

if TYPE_CHECKING:  # rich and httpx load when used, not for every command
    from embrasure.cli.client import Params

DIRECTIONS = ("upstream", "downstream", "both")


def _entity_options(func: Any) -> Any:
    func = click.option("--name", required=True, help="Dataset or job name.")(func)
    return click.option(
        "--namespace", required=True, help="Namespace, e.g. postgres://db:5432 or s3://bucket."
    )(func)


def short(node_id: str) -> str:
    """A node id (docs/queries.md#conventions) as a person reads it: kind and name, the
    field after a dot.
    Names and fields are percent-encoded in ids, so they split from the right."""
    kind, _, rest = node_id.partition(":")
    if kind == "field":
        _ns, name, field = rest.rsplit(":", 2)
        return f"{urllib.parse.unquote(name)}.{urllib.parse.unquote(field)}"
    return f"{kind} {urllib.parse.unquote(rest.rsplit(':', 1)[-1])}"


def _label(node: dict[str, Any]) -> str:
    text = f"{node['type']} {node['namespace']} {node['name']}"
    return f"{text}.{node['field']}" if node.get("field") is not None else text


# -- lineage and impact ----------------------------------------------------------------------


@click.command()
@_entity_options
@click.option(
    "--type",
    "kind",
    type=click.Choice(("dataset", "job", "service")),
    default="dataset",
    show_default=True,
    help="What --namespace/--name name.",
)
@click.option("--field", help="A dataset's field: column lineage instead of dataset lineage.")
@click.option("--direction", type=click.Choice(DIRECTIONS), default="both", show_default=True)
@click.option("--depth", type=click.IntRange(0, 20), help="Edges to walk [server default: 5].")
@client_options
def lineage(
    namespace: str,
    name: str,
    kind: str,
    field: str | None,
    direction: str,
    depth: int | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """The lineage graph around a dataset, job or service (or a dataset's field)."""
    if field is not None and kind != "dataset":
        raise click.UsageError("--field names a dataset's field: use it with --type dataset")
    params: dict[str, str | int | None] = {
        "namespace": namespace,
        "name": name,
        "direction": direction,
        "depth": depth,
    }
    with connected(flags) as client:
        if field is None:
            doc = client.get("/api/v1/lineage", {**params, "type": kind})
        else:
            doc = client.get("/api/v1/column-lineage", {**params, "field": field})
    if as_json:
        print_json(doc)
        return
    nodes = {n["id"]: n for n in doc["nodes"]}
    root = nodes.get(doc["root"])
    title = (
        f"{_label(root) if root else doc['root']}: {len(nodes)} nodes, "
        f"{len(doc['edges'])} edges ({direction}, depth {depth if depth is not None else 5})"
    )
    if doc.get("truncated"):
        title += ", truncated"
    if field is None:
        table = new_table("from", "to", "runs", "last state", "last seen")
        for e in doc["edges"]:
            add_row(
                table,
                _label(nodes[e["source"]]),
                _label(nodes[e["target"]]),
                e["run_count"],
                e["last_state"],
                e["last_seen"],
            )
    else:
        table = new_table("from", "to", "kind", "class", "masked", "via")
        for e in doc["edges"]:
            add_row(
                table,
                _label(nodes[e["source"]]),
                _label(nodes[e["target"]]),
                "/".join([e["kind"], *e["indirect"]]) if e["indirect"] else e["kind"],
                e["class"],
                "masked" if e["masked"] else "",
                short(e["job"]) if e["job"] else "",
            )
    show_table(table, title)


@click.command()
@_entity_options
@click.option("--field", help="A dataset's field: what depends on that column.")
@click.option("--depth", type=click.IntRange(0, 20), help="Edges to walk [server default].")
@client_options
def impact(
    namespace: str, name: str, field: str | None, depth: int | None, as_json: bool, **flags: Any
) -> None:
    """Everything downstream of a dataset or field: what a change to it would reach."""
    params: Params = {"namespace": namespace, "name": name, "field": field, "depth": depth}
    with connected(flags) as client:
        doc = client.get("/api/v1/impact", params)
    if as_json:
        print_json(doc)
        return
    table = new_table("distance", "type", "namespace", "name", "masked", "path")
    for item in doc["items"]:
        node = item["node"]
        add_row(
            table,
            item["distance"],
            node["type"],
            node["namespace"],
            node["name"] if node.get("field") is None else f"{node['name']}.{node['field']}",
            "masked" if item.get("masked") else "",
            " → ".join(short(p) for p in item["path"][1:-1]),
        )
    show_table(table, f"impact of {short(doc['root'])}: {len(doc['items'])} downstream")


# -- runs ------------------------------------------------------------------------------------


@click.command()
@_entity_options
@page_options
@client_options
def runs(
    namespace: str, name: str, limit: int, cursor: str | None, as_json: bool, **flags: Any
) -> None:
    """A job's runs, newest first."""
    params: Params = {"namespace": namespace, "name": name, "limit": limit, "cursor": cursor}
    with connected(flags) as client:
        doc = client.get("/api/v1/runs", params)
        if not doc["runs"] and cursor is None:
            # The listing of an unknown job is empty; say whether the job exists (404).
            client.get("/api/v1/jobs", {"namespace": namespace, "name": name})
    if as_json:
        print_json(doc)
        return
    table = new_table(
        "run", "state", "started", "ended", "duration", "inputs", "outputs", "rows written"
    )
    for run in doc["runs"]:
        add_row(
            table,
            run["runId"],
            run["state"],
            run["started_at"],
            run["ended_at"],
            _duration(run.get("duration_s")),
            ", ".join(d["name"] for d in run["inputs"]),
            ", ".join(d["name"] for d in run["outputs"]),
            _rows_written(run["outputs"]),
        )
    show_table(table, f"runs of job {namespace} {name}: {len(doc['runs'])}", doc.get("next_cursor"))


def _rows_written(outputs: list[dict[str, Any]]) -> str:
    """The rows a run wrote, from its outputs' outputStatistics (OpenLineage 1-0-2): the
    sum over the outputs that say; blank when none does."""
    counts = [
        stats["rowCount"]
        for d in outputs
        if isinstance(stats := d.get("outputFacets", {}).get("outputStatistics"), dict)
        and isinstance(stats.get("rowCount"), int)
    ]
    return f"{sum(counts):,}" if counts else ""


@click.command("dataset-runs")
@_entity_options
@click.option(
    "--role", type=click.Choice(("input", "output")), help="Only the runs that read / wrote it."
)
@page_options
@client_options
def dataset_runs(
    namespace: str,
    name: str,
    role: str | None,
    limit: int,
    cursor: str | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """The runs that read or wrote a dataset, newest first: rows, bytes and files, data
    quality checks, and schema changes between writes."""
    params: Params = {
        "namespace": namespace,
        "name": name,
        "role": role,
        "limit": limit,
        "cursor": cursor,
    }
    with connected(flags) as client:
        doc = client.get("/api/v1/datasets/runs", params)
    if as_json:
        print_json(doc)
        return
    table = new_table("run", "job", "role", "state", "ended", "rows", "bytes", "files", "checks")
    for run in doc["runs"]:
        stats, checks = run["statistics"], run["assertions"]
        failures = ", ".join(
            f"{f['assertion']} on {f['column']}" if f.get("column") else str(f["assertion"])
            for f in checks["failures"]
        )
        add_row(
            table,
            run["runId"],
            run["job"]["name"],
            run["role"],
            run["state"],
            run["ended_at"],
            _count(stats.get("rowCount")),
            _count(stats.get("size")),
            _count(stats.get("fileCount")),
            _checks(checks["passed"], checks["failed"], failures),
        )
        change = run.get("schema_change")
        if change:
            add_row(table, "", f"schema: {_schema_text(change)}", *[""] * 7)
    show_table(
        table, f"runs of dataset {namespace} {name}: {len(doc['runs'])}", doc.get("next_cursor")
    )


def _count(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


def _checks(passed: int, failed: int, failures: str) -> str:
    if not passed and not failed:
        return ""
    return f"{passed} passed, {failed} failed: {failures}" if failed else f"{passed} passed"


def _schema_text(change: dict[str, Any]) -> str:
    parts = [f"+{f['name']}" for f in change["added"]]
    parts += [f"-{f['name']}" for f in change["removed"]]
    parts += [f"{c['name']} {c['from']} → {c['to']}" for c in change["changed"]]
    return ", ".join(parts)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.3g} s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


# -- deliveries and quarantine -----------------------------------------------------------------


@click.command()
@click.argument("delivery_id", required=False)
@click.option("--provider-key", help="Only deliveries from this provider_key.")
@click.option(
    "--state",
    type=click.Choice(DELIVERY_STATES),
    help="Only deliveries in this state.",
)
@page_options
@client_options
def deliveries(
    delivery_id: str | None,
    provider_key: str | None,
    state: str | None,
    limit: int,
    cursor: str | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """Deliveries, newest first; with DELIVERY_ID, that delivery's items and outcomes."""
    with connected(flags) as client:
        if delivery_id is not None:
            doc = client.get(f"/api/v1/deliveries/{urllib.parse.quote(delivery_id, safe='')}")
        else:
            params: Params = {
                "provider_key": provider_key,
                "state": state,
                "limit": limit,
                "cursor": cursor,
            }
            doc = client.get("/api/v1/deliveries", params)
    if as_json:
        print_json(doc)
    elif delivery_id is not None:
        table = new_table("index", "kind", "outcome", "reason", "warnings")
        for item in doc["items"]:
            add_row(
                table,
                item["index"],
                item["kind"],
                item["outcome"],
                item["reason"],
                "; ".join(item["warnings"]),
            )
        s = doc["summary"]
        show_table(
            table,
            f"delivery {doc['delivery_id']} from {doc['provider_key']} at {doc['received_at']}: "
            f"{doc['state']}, {s['received']} items ({s['projected']} projected, "
            f"{s['quarantined']} quarantined, {s['pending']} pending)",
        )
    else:
        table = new_table(
            "delivery", "received", "provider", "state", "items", "projected", "quarantined"
        )
        for d in doc["deliveries"]:
            add_row(
                table,
                d["delivery_id"],
                d["received_at"],
                d["provider_key"],
                d["state"],
                d["item_count"],
                d["summary"]["projected"],
                d["summary"]["quarantined"],
            )
        show_table(table, f"deliveries: {len(doc['deliveries'])}", doc.get("next_cursor"))


@click.group()
def quarantine() -> None:
    """Quarantined items: list them, replay one under the current rules."""


@quarantine.command("list")
@page_options
@client_options
def quarantine_list(limit: int, cursor: str | None, as_json: bool, **flags: Any) -> None:
    """Quarantined items, newest delivery first, with the reason of each."""
    with connected(flags) as client:
        doc = client.get("/api/v1/quarantine", {"limit": limit, "cursor": cursor})
    if as_json:
        print_json(doc)
        return
    table = new_table("delivery", "index", "kind", "received", "reason")
    for item in doc["items"]:
        add_row(
            table,
            item["delivery_id"],
            item["index"],
            item["kind"],
            item["received_at"],
            item["reason"],
        )
    show_table(table, f"quarantined items: {len(doc['items'])}", doc.get("next_cursor"))


@quarantine.command("replay")
@click.argument("delivery_id")
@click.argument("index", type=click.IntRange(0))
@client_options
def quarantine_replay(delivery_id: str, index: int, as_json: bool, **flags: Any) -> None:
    """Re-validate item INDEX of DELIVERY_ID under the current rules; project it if it
    passes now. Exits non-zero when it is still quarantined."""
    with connected(flags) as client:
        doc = client.post(
            f"/api/v1/quarantine/{urllib.parse.quote(delivery_id, safe='')}/{index}/replay"
        )
    if as_json:
        print_json(doc)
    else:
        reason = f": {doc['reason']}" if doc.get("reason") else ""
        click.echo(f"item {index} of delivery {delivery_id}: {doc['outcome']}{reason}")
    if doc["outcome"] != "projected":
        raise SystemExit(1)


COMMANDS = (lineage, impact, runs, dataset_runs, deliveries, quarantine)
