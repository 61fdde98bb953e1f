"""Query benchmark (issue 4): the read API on a large graph, against the in-memory limit.

The workload is a generated data platform (``Platform``), at ``--scale 1``:

- ~2,100 Airflow DAGs ("pipelines") of 6 to 42 chained Spark tasks, ~52,000 jobs; task k
  reads task k-1's table, so chains run 30+ deep; each task also reads its own landing
  file (``s3://landing``), 30% of the tasks read one of 10 hub dimension tables (the
  biggest read by ~3,000 jobs: wide fan-outs), 15% read a table of an earlier DAG;
- one output table per task with a 20-column schema and a columnLineage facet over its
  20 columns (identity from the upstream table, expressions from the landing file, 3
  columns from the hub and an INDIRECT/JOIN on the hub's key, aggregates from the other
  DAG's table): ~28 field mappings per job, ~1.4 million in all; ~104,000 datasets;
- every 8th output table, and every hub, carries a symlinks facet (a TABLE alias in the
  Hive metastore and a LOCATION), and half of its readers name it by that alias;
- OpenLineage 2-0-2 RunEvents: one COMPLETE per job, a second run (START + COMPLETE) for
  one job in 20 and a failed one (START + FAIL) for one in 97: ~58,000 events of ~10 KB.

The events are generated in DAG order (the hubs' DAGs first) and split in two: the first
10% of the jobs, then the rest. Each part is POSTed in 200-event batches by 4 concurrent
clients to ``embrasure serve --no-projector`` (the receiver, over HTTP), then projected
by ``embrasure project`` (the CLI, a subprocess, stopped once its position reaches the
end of the log); the DB files are then measured and the queries run against the same
server, the projector stopped: one client over HTTP (httpx, keep-alive), a few warm-up
calls, then ``--calls`` calls per query (fewer for the heavy ones), cycling over varied
roots, p50/p99 of the wall time of each call (body read included, JSON parse excluded):

- ``lineage_hub``: ``GET /api/v1/lineage`` depth 10, both directions, around the 10 hub
  tables, the API's default limit (500 nodes); ``lineage_hub_full``: the same with
  ``limit=10000`` (the whole neighbourhood, or 10,000 nodes of it);
- ``lineage_chain``: the same around tables of deep chains (heads, middles, tails);
- ``column_lineage_chain`` / ``column_lineage_hub``: ``GET /api/v1/column-lineage`` depth
  10 both ways from columns of chain tables (``limit=500``, the default) / non-key
  columns of the hubs (``limit=10000``: the whole neighbourhood);
- ``impact_hub_column``: ``GET /api/v1/impact?field=`` depth 10 (default limit 1,000)
  from the hubs' columns (their key columns feed every reader through a JOIN);
- ``search``: ``GET /api/v1/search?q=`` over names, prefixes, substrings, column names;
- ``healthz``: the HTTP floor (no store work).

The roots are the same at 10% and at 100% (all of them are in the first 10%), so each
figure's growth is the cost of the same question on a graph ten times larger. The limit:
``GET /api/v1/export`` once, its edges and column edges decoded (msgspec) into adjacency
dicts, and the same traversals (same depth, per-walk visited sets, node limit, impact's
shortest paths) run as breadth-first searches in this process, same roots, same number
of calls; node and edge counts are compared with the API's answers.

Figures written: p50/p99 per query and its in-memory p50/p99 and ratio, response sizes,
load and projection times, DB size (file + WAL) per million events with a per-table
breakdown (dbstat), export time and size, each at 10% and 100% with the growth factor.
Targets (SQLite, one process): lineage depth 10 around a hub p99 < 50 ms and within 10x
of the in-memory traversal (p99 over p99); impact of a hub column p99 < 200 ms.

The embrasure package is copied at the start (``servers.copy_source``; ``--rev`` takes a
git revision) and every child process imports the copy, so edits to the working tree do
not change what one run measures. This process imports no embrasure code.

Run ``python bench/query.py`` (the full scale: 10 minutes on this 2-core machine when
it is quiet, 14 when it is busy, measured 2026-11-30: generation 11 s, load 11 s,
projection 2.5 min, queries 5 min, the two exports 2.5 min; writes
bench/results/query.{md,json}) or ``python bench/query.py --quick`` (``--scale 0.1``, 20
calls per query, 1 to 3.5 minutes; writes under bench/results/tmp/). ``--keep`` keeps
the work directory (the DB, 3.3 GB) for profiling; the server's peak RSS during the 100%
export was 7.4 GiB. Linux only (it reads /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import gc
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import msgspec
import orjson
import servers
from events import FACET as SCHEMA_FACET_URL
from events import PRODUCER, SCHEMA_URL

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"

LINEAGE_P99_TARGET_MS = 50.0
LINEAGE_RATIO_TARGET = 10.0
IMPACT_P99_TARGET_MS = 200.0
REQUIRED = {"datasets": 100_000, "jobs": 50_000, "field_mappings": 1_000_000}

# -- the platform -----------------------------------------------------------------------

WAREHOUSE = "postgres://warehouse:5432"
LAKE = "s3://landing"
METASTORE = "hive://metastore:9083"
LOCATIONS = "s3://warehouse"
JOB_NS = "spark://etl-cluster"
DAG_NS = "airflow://scheduler"

JOBS_AT_SCALE_1 = 52_000
FIELDS = 20  # columns of every warehouse table
RAW_FIELDS = 10  # columns of every landing file
HUBS = 10
HUB_WEIGHTS = (30, 25, 20, 15, 15, 10, 10, 10, 8, 7)
HUB_READ_SHARE = 0.30  # tasks (outside the hubs' DAGs) reading a hub
CROSS_READ_SHARE = 0.15  # tasks reading a table of an earlier DAG
ALIAS_EVERY = 8  # tables (p + k) % 8 == 0 get a TABLE symlink
HUB_FIELDS_MAPPED = (17, 18, 19)  # output columns computed from a hub's columns
CROSS_FIELDS_MAPPED = (10, 11)  # output columns aggregated from another DAG's table
SECOND_RUN_EVERY, SECOND_RUN_AT = 20, 7  # job j % 20 == 7 runs twice
FAILED_RUN_EVERY, FAILED_RUN_AT = 97, 3  # job j % 97 == 3 also has a failed run

DOMAINS = (
    "sales",
    "marketing",
    "finance",
    "logistics",
    "support",
    "product",
    "risk",
    "people",
    "growth",
    "payments",
    "inventory",
    "web",
)
ENTITIES = (
    "customer",
    "order",
    "product",
    "account",
    "invoice",
    "session",
    "user",
    "store",
    "supplier",
    "campaign",
    "payment",
    "shipment",
)
ATTRIBUTES = (
    "id",
    "name",
    "amount",
    "created_at",
    "updated_at",
    "status",
    "country",
    "email",
    "total",
    "count",
)
VOCAB = tuple(f"{e}_{a}" for e in ENTITIES for a in ATTRIBUTES)  # 120 column names
STAGES = ("stg", "int", "fct", "agg", "mart", "rpt")

EPOCH = datetime(2026, 10, 1, tzinfo=UTC)
RUN_BASE = 0x0191_0000_0000_7000_8000_0000_0000_0000  # UUIDv7-shaped run ids
DAG_RUN_BASE = 0x0191_0000_0000_7000_9000_0000_0000_0000

FACET_URLS = {
    "schema": SCHEMA_FACET_URL,
    "columnLineage": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"
    "#/$defs/ColumnLineageDatasetFacet",
    "symlinks": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json"
    "#/$defs/SymlinksDatasetFacet",
    "sql": "https://openlineage.io/spec/facets/1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet",
    "jobType": "https://openlineage.io/spec/facets/2-0-4/JobTypeJobFacet.json"
    "#/$defs/JobTypeJobFacet",
    "parent": "https://openlineage.io/spec/facets/1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet",
    "errorMessage": "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json"
    "#/$defs/ErrorMessageRunFacet",
}


def _facet(name: str, **content: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": FACET_URLS[name], **content}


def _transformation(kind: str, subtype: str, masking: bool = False) -> list[dict[str, Any]]:
    return [{"type": kind, "subtype": subtype, "description": "", "masking": masking}]


IDENTITY = _transformation("DIRECT", "IDENTITY")
IDENTITY_MASKED = _transformation("DIRECT", "IDENTITY", masking=True)
EXPRESSION = _transformation("DIRECT", "TRANSFORMATION")
AGGREGATE = _transformation("DIRECT", "AGGREGATION")
JOIN = _transformation("INDIRECT", "JOIN")


@dataclasses.dataclass(frozen=True, slots=True)
class Task:
    """One job: task ``k`` of DAG ``p``, position ``index`` in the event stream."""

    index: int
    p: int
    k: int
    hub: int  # the hub it reads, -1 for none
    cross: tuple[int, int] | None  # (p, k) of another DAG's table it reads


class Platform:
    """The DAGs, the tasks in stream order, and each task's events (built on demand)."""

    def __init__(self, scale: float, seed: int = 4) -> None:
        target = max(400, round(JOBS_AT_SCALE_1 * scale))
        # The hubs' DAGs come first, short enough to sit well inside the first 10%.
        self.hub_length = min(40, max(5, target // (HUBS * 20)))
        lengths = [self.hub_length] * HUBS
        total = HUBS * self.hub_length
        while total < target:
            length = min(6 + (len(lengths) * 13) % 37, target - total)
            lengths.append(length)
            total += length
        self.lengths = lengths
        self._schemas: dict[int, dict[str, Any]] = {}
        rng = random.Random(seed)
        tasks: list[Task] = []
        for p, length in enumerate(lengths):
            for k in range(length):
                hub, cross = -1, None
                if p >= HUBS:
                    if rng.random() < HUB_READ_SHARE:
                        hub = rng.choices(range(HUBS), weights=HUB_WEIGHTS)[0]
                    if p > HUBS and rng.random() < CROSS_READ_SHARE:
                        other = rng.randrange(HUBS, p)
                        cross = (other, rng.randrange(lengths[other]))
                tasks.append(Task(len(tasks), p, k, hub, cross))
        self.tasks = tasks

    # -- names ----------------------------------------------------------------------------

    def is_hub(self, p: int, k: int) -> bool:
        return p < HUBS and k == self.lengths[p] - 1

    def table(self, p: int, k: int) -> str:
        if self.is_hub(p, k):
            return f"core.dim_{ENTITIES[p]}"
        stage = STAGES[min(len(STAGES) - 1, k * len(STAGES) // self.lengths[p])]
        entity = ENTITIES[(p // len(DOMAINS)) % len(ENTITIES)]
        return f"{DOMAINS[p % len(DOMAINS)]}.{stage}_{entity}_{p:05d}_{k:02d}"

    def has_alias(self, p: int, k: int) -> bool:
        return (p + k) % ALIAS_EVERY == 0 or self.is_hub(p, k)

    def alias(self, p: int, k: int) -> tuple[str, str]:
        return METASTORE, "warehouse." + self.table(p, k)

    def job_name(self, p: int, k: int) -> str:
        entity = ENTITIES[(p // len(DOMAINS)) % len(ENTITIES)]
        return f"{DOMAINS[p % len(DOMAINS)]}.{entity}_pipeline_{p:05d}.task_{k:02d}"

    def dag(self, p: int) -> str:
        entity = ENTITIES[(p // len(DOMAINS)) % len(ENTITIES)]
        return f"{DOMAINS[p % len(DOMAINS)]}_{entity}_{p:05d}"

    def landing(self, p: int, k: int) -> str:
        entity = ENTITIES[(p // len(DOMAINS)) % len(ENTITIES)]
        return f"landing/{DOMAINS[p % len(DOMAINS)]}/{entity}_{p:05d}_{k:02d}.parquet"

    def fields(self, p: int) -> list[str]:
        """The 20 columns of every table of DAG ``p`` (a hub's start with its key)."""
        if p < HUBS:
            own = [f"{ENTITIES[p]}_{a}" for a in ATTRIBUTES]
            return own + [f"{ENTITIES[p]}_attr_{i:02d}" for i in range(FIELDS - len(own))]
        return [VOCAB[(p * 13 + i * 7) % len(VOCAB)] for i in range(FIELDS)]

    def raw_fields(self, p: int, k: int) -> list[str]:
        return [f"src_{VOCAB[(p * 13 + k + j * 11) % len(VOCAB)]}" for j in range(RAW_FIELDS)]

    def _schema(self, p: int) -> dict[str, Any]:
        schema = self._schemas.get(p)
        if schema is None:
            columns = [
                {"name": f, "type": "varchar" if i % 3 else "bigint"}
                for i, f in enumerate(self.fields(p))
            ]
            schema = self._schemas[p] = _facet("schema", fields=columns)
        return schema

    # -- events ---------------------------------------------------------------------------

    def _read_as(self, task: Task, slot: int, p: int, k: int) -> tuple[str, str]:
        """The identity a reader names table (p, k) by: half the readers of an aliased
        table use its Hive alias."""
        if self.has_alias(p, k) and (task.index + slot) % 2 == 0:
            return self.alias(p, k)
        return WAREHOUSE, self.table(p, k)

    def datasets(self, task: Task) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The task's inputs and its output, with schemas and column lineage."""
        p, k = task.p, task.k
        out_fields = self.fields(p)
        raw_fields = self.raw_fields(p, k)
        raw = {
            "namespace": LAKE,
            "name": self.landing(p, k),
            "facets": {
                "schema": _facet(
                    "schema", fields=[{"name": f, "type": "varchar"} for f in raw_fields]
                )
            },
        }
        inputs = [raw]
        upstream = hub = cross = None
        if k > 0:
            ns, name = self._read_as(task, 0, p, k - 1)
            upstream = {"namespace": ns, "name": name, "facets": {"schema": self._schema(p)}}
            inputs.append(upstream)
        hub_fields: list[str] = []
        if task.hub >= 0:
            hp, hk = task.hub, self.lengths[task.hub] - 1
            ns, name = self._read_as(task, 1, hp, hk)
            hub = {"namespace": ns, "name": name, "facets": {"schema": self._schema(hp)}}
            hub_fields = self.fields(hp)
            inputs.append(hub)
        cross_fields: list[str] = []
        if task.cross is not None:
            cp, ck = task.cross
            ns, name = self._read_as(task, 2, cp, ck)
            cross = {"namespace": ns, "name": name, "facets": {"schema": self._schema(cp)}}
            cross_fields = self.fields(cp)
            inputs.append(cross)

        def source(ds: dict[str, Any], field: str, how: list[dict[str, Any]]) -> dict[str, Any]:
            return {
                "namespace": ds["namespace"],
                "name": ds["name"],
                "field": field,
                "transformations": how,
            }

        lineage: dict[str, Any] = {}
        for i, field in enumerate(out_fields):
            sources = []
            if upstream is not None:
                masked = i == 7 and k % 4 == 0
                sources.append(source(upstream, field, IDENTITY_MASKED if masked else IDENTITY))
            if upstream is None or i % 3 == 0:
                sources.append(source(raw, raw_fields[i % RAW_FIELDS], EXPRESSION))
            if hub is not None and i in HUB_FIELDS_MAPPED:
                sources.append(source(hub, hub_fields[1 + (p * 3 + i) % (FIELDS - 1)], EXPRESSION))
            if hub is not None and i == 0:
                sources.append(source(hub, hub_fields[0], JOIN))
            if cross is not None and i in CROSS_FIELDS_MAPPED:
                sources.append(source(cross, cross_fields[i], AGGREGATE))
            lineage[field] = {"inputFields": sources}
        facets: dict[str, Any] = {
            "schema": self._schema(p),
            "columnLineage": _facet("columnLineage", fields=lineage),
        }
        name = self.table(p, k)
        if self.has_alias(p, k):
            alias_ns, alias_name = self.alias(p, k)
            facets["symlinks"] = _facet(
                "symlinks",
                identifiers=[
                    {"namespace": alias_ns, "name": alias_name, "type": "TABLE"},
                    {"namespace": LOCATIONS, "name": f"tables/{name}", "type": "LOCATION"},
                ],
            )
        return inputs, [{"namespace": WAREHOUSE, "name": name, "facets": facets}]

    def events(self, task: Task) -> list[dict[str, Any]]:
        """The task's events: a COMPLETE run; for some tasks a second run (START and
        COMPLETE, a day later) and a failed one (START and FAIL, two days later)."""
        p, k = task.p, task.k
        inputs, outputs = self.datasets(task)
        job = {
            "namespace": JOB_NS,
            "name": self.job_name(p, k),
            "facets": {
                "jobType": _facet(
                    "jobType", processingType="BATCH", integration="SPARK", jobType="JOB"
                ),
                "sql": _facet(
                    "sql",
                    query=f"INSERT INTO {outputs[0]['name']} SELECT "
                    + ", ".join(self.fields(p)[:4])
                    + " FROM "
                    + " JOIN ".join(d["name"] for d in inputs),
                ),
            },
        }
        bare_inputs = [{"namespace": d["namespace"], "name": d["name"]} for d in inputs]
        bare_outputs = [{"namespace": d["namespace"], "name": d["name"]} for d in outputs]
        at = EPOCH + timedelta(seconds=task.index * 3)
        runs: list[tuple[int, str, datetime, list[Any], list[Any], dict[str, Any]]] = [
            (0, "COMPLETE", at + timedelta(seconds=40), inputs, outputs, {})
        ]
        if task.index % SECOND_RUN_EVERY == SECOND_RUN_AT:
            later = at + timedelta(days=1)
            runs.append((1, "START", later, bare_inputs, bare_outputs, {}))
            runs.append((1, "COMPLETE", later + timedelta(seconds=55), inputs, outputs, {}))
        if task.index % FAILED_RUN_EVERY == FAILED_RUN_AT:
            later = at + timedelta(days=2)
            error = {
                "errorMessage": _facet(
                    "errorMessage",
                    message="org.apache.spark.SparkException: Job aborted",
                    programmingLanguage="JAVA",
                )
            }
            runs.append((2, "START", later, bare_inputs, bare_outputs, {}))
            runs.append((2, "FAIL", later + timedelta(seconds=9), bare_inputs, [], error))
        out = []
        for attempt, event_type, moment, ins, outs, extra in runs:
            run_id = uuid.UUID(int=RUN_BASE | (task.index << 4) | attempt)
            dag_run = uuid.UUID(int=DAG_RUN_BASE | (p << 4) | attempt)
            parent = _facet(
                "parent",
                run={"runId": str(dag_run)},
                job={"namespace": DAG_NS, "name": self.dag(p)},
            )
            out.append(
                {
                    "eventType": event_type,
                    "eventTime": moment.strftime("%Y-%m-%dT%H:%M:%S.")
                    + f"{task.index % 1000:03d}Z",
                    "producer": PRODUCER,
                    "schemaURL": SCHEMA_URL,
                    "run": {"runId": str(run_id), "facets": {"parent": parent, **extra}},
                    "job": job,
                    "inputs": ins,
                    "outputs": outs,
                }
            )
        return out

    def bodies(self, tasks: Sequence[Task], per_batch: int) -> tuple[list[bytes], int]:
        """The batch bodies (JSON arrays) of these tasks' events, and the event count."""
        bodies: list[bytes] = []
        batch: list[dict[str, Any]] = []
        events = 0
        for task in tasks:
            batch.extend(self.events(task))
            if len(batch) >= per_batch:
                bodies.append(orjson.dumps(batch))
                events += len(batch)
                batch = []
        if batch:
            bodies.append(orjson.dumps(batch))
            events += len(batch)
        return bodies, events


# -- the queries ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Query:
    path: str
    params: dict[str, str]
    label: str


@dataclasses.dataclass(frozen=True)
class Group:
    name: str
    title: str
    queries: list[Query]
    calls: int
    memory: str | None  # which in-memory traversal mirrors it


def _lineage(ds: tuple[str, str], limit: int | None = None) -> Query:
    params = {"type": "dataset", "namespace": ds[0], "name": ds[1], "direction": "both"}
    params["depth"] = "10"
    if limit is not None:
        params["limit"] = str(limit)
    return Query("/api/v1/lineage", params, f"{ds[1]}")


def _field_query(path: str, ds: tuple[str, str], field: str, limit: int | None = None) -> Query:
    params = {"namespace": ds[0], "name": ds[1], "field": field, "depth": "10"}
    if path == "/api/v1/column-lineage":
        params["direction"] = "both"
    if limit is not None:
        params["limit"] = str(limit)
    return Query(path, params, f"{ds[1]}.{field}")


def query_groups(platform: Platform, first_part_jobs: int, calls: int) -> list[Group]:
    """The same roots at every size: all of them are in the first part of the stream."""
    lengths = platform.lengths
    loaded = {t.p for t in platform.tasks[:first_part_jobs] if t.k == lengths[t.p] - 1}
    deep = [p for p in sorted(loaded) if p >= HUBS and lengths[p] >= 30]
    if not deep:  # a small scale
        deep = [p for p in sorted(loaded) if p >= HUBS]
    hubs = [(p, lengths[p] - 1) for p in range(HUBS)]
    # Writers name the hubs by their warehouse identity; half the roots ask by the alias.
    hub_ids = [
        platform.alias(p, k) if n % 2 else (WAREHOUSE, platform.table(p, k))
        for n, (p, k) in enumerate(hubs)
    ]
    chain_tables: list[tuple[int, int]] = []
    for n, p in enumerate(deep[:17]):
        for k in (0, lengths[p] // 2, lengths[p] - 1):
            chain_tables.append((p, (k + n) % lengths[p]))
    chain_ids = [(WAREHOUSE, platform.table(p, k)) for p, k in chain_tables]
    heavy = max(10, calls // 4)
    rng = random.Random(7)
    chain_fields = [
        ((WAREHOUSE, platform.table(p, k)), platform.fields(p)[rng.randrange(FIELDS)])
        for p, k in chain_tables
    ]
    hub_fields_nonkey = [
        (hub_ids[h], platform.fields(h)[i]) for i in range(1, FIELDS) for h in range(HUBS)
    ]
    hub_fields_all = [
        (hub_ids[h], platform.fields(h)[i]) for i in range(FIELDS) for h in range(HUBS)
    ]
    rng.shuffle(hub_fields_nonkey)
    rng.shuffle(hub_fields_all)
    search_terms = [
        "core.dim_customer",  # exact (a hub) and one prefix
        "customer_id",  # exact on thousands of columns
        "sales.fct_",  # prefix of thousands of tables
        "order_total",  # a column name
        "pipeline_00042",  # one DAG's jobs
        "task_07",  # a substring of thousands of jobs
        "landing/finance",  # prefix of landing files
        "dim_",  # substring of the hubs
        platform.table(deep[0], 1),  # one exact table
        "no_such_thing",  # nothing
    ]
    return [
        Group(
            "healthz", "GET /healthz (the HTTP floor)", [Query("/healthz", {}, "-")], calls, None
        ),
        Group(
            "lineage_hub",
            "lineage depth 10, both ways, around a hub (default limit 500 nodes)",
            [_lineage(ds) for ds in hub_ids],
            calls,
            "lineage",
        ),
        Group(
            "lineage_hub_full",
            "lineage depth 10, both ways, around a hub, limit=10000",
            [_lineage(ds, 10_000) for ds in hub_ids],
            heavy,
            "lineage",
        ),
        Group(
            "lineage_chain",
            "lineage depth 10, both ways, around a table of a deep chain",
            [_lineage(ds) for ds in chain_ids],
            calls,
            "lineage",
        ),
        Group(
            "column_lineage_chain",
            "column lineage depth 10, both ways, a column of a deep chain (limit 500)",
            [_field_query("/api/v1/column-lineage", ds, f, 500) for ds, f in chain_fields],
            calls,
            "column_lineage",
        ),
        Group(
            "column_lineage_hub",
            "column lineage depth 10, both ways, a non-key column of a hub, limit=10000",
            [_field_query("/api/v1/column-lineage", ds, f, 10_000) for ds, f in hub_fields_nonkey],
            heavy,
            "column_lineage",
        ),
        Group(
            "impact_hub_column",
            "impact of a hub column, depth 10 (default limit 1,000 items)",
            [_field_query("/api/v1/impact", ds, f) for ds, f in hub_fields_all],
            calls,
            "impact",
        ),
        Group(
            "search",
            "search (exact, prefix, substring; names and columns)",
            [Query("/api/v1/search", {"q": q}, q) for q in search_terms],
            calls,
            None,
        ),
    ]


# -- measuring over HTTP ----------------------------------------------------------------


@dataclasses.dataclass
class Answer:
    """What one call returned: sizes, and what the in-memory walk needs to mirror it."""

    query: Query
    ms: float
    status: int
    bytes: int
    nodes: int | None = None
    edges: int | None = None
    items: int | None = None
    results: int | None = None
    truncated: bool = False
    root: str | None = None


def _answer(query: Query, ms: float, response: httpx.Response) -> Answer:
    answer = Answer(query, ms, response.status_code, len(response.content))
    if response.status_code != 200 or query.path == "/healthz":
        return answer
    doc = orjson.loads(response.content)
    answer.root = doc.get("root")
    answer.truncated = bool(doc.get("truncated"))
    if "nodes" in doc:
        answer.nodes, answer.edges = len(doc["nodes"]), len(doc["edges"])
    if "items" in doc:
        answer.items = len(doc["items"])
    if "results" in doc:
        answer.results = len(doc["results"])
    return answer


def _size_summary(values: Sequence[int | None]) -> dict[str, float] | None:
    present = [v for v in values if v is not None]
    if not present:
        return None
    return {"median": statistics.median(present), "max": max(present), "min": min(present)}


def measure_group(
    client: httpx.Client,
    server: servers.Server,
    group: Group,
    warmup: int = 3,
    quiet_wait_s: float = 8.0,
) -> tuple[dict[str, Any], list[Answer]]:
    """``group.calls`` sequential calls cycling over the roots, after ``warmup`` calls."""
    for query in group.queries[:warmup]:
        client.get(query.path, params=query.params)
    servers.wait_for_quiet(quiet_wait_s)
    plan = [group.queries[i % len(group.queries)] for i in range(group.calls)]
    before = servers.cpu_snapshot(server.pid)
    own_before = time.process_time()
    answers = []
    for query in plan:
        started = time.perf_counter()
        response = client.get(query.path, params=query.params)
        ms = (time.perf_counter() - started) * 1000
        answers.append(_answer(query, ms, response))
    after = servers.cpu_snapshot(server.pid)
    wall = after.wall - before.wall
    server_cpu = after.process - before.process
    own_cpu = time.process_time() - own_before
    others = max(0.0, (after.system_busy - before.system_busy - server_cpu - own_cpu) / wall)
    times = [a.ms for a in answers]
    bad = [a for a in answers if a.status != 200]
    summary = {
        "title": group.title,
        "calls": len(answers),
        "roots": len(group.queries),
        "p50_ms": servers.percentile(times, 50),
        "p99_ms": servers.percentile(times, 99),
        "mean_ms": statistics.fmean(times),
        "max_ms": max(times),
        "non_200": len(bad),
        "non_200_example": f"{bad[0].status} {bad[0].query.label}" if bad else None,
        "bytes": _size_summary([a.bytes for a in answers]),
        "nodes": _size_summary([a.nodes for a in answers]),
        "edges": _size_summary([a.edges for a in answers]),
        "items": _size_summary([a.items for a in answers]),
        "results": _size_summary([a.results for a in answers]),
        "truncated_calls": sum(a.truncated for a in answers),
        "server_cpu_ms_per_call": server_cpu * 1000 / len(answers),
        "others_busy_cores": others,
        "slowest_roots": [
            [a.query.label, round(a.ms, 1)] for a in sorted(answers, key=lambda a: -a.ms)[:3]
        ],
    }
    return summary, answers


# -- the in-memory limit ----------------------------------------------------------------


class ExportEdge(msgspec.Struct):
    source: str
    target: str
    static: bool


class ExportColumnEdge(msgspec.Struct):
    source: str
    target: str
    kind: str
    masked: bool
    job: str | None


class ExportDoc(msgspec.Struct):
    datasets: list[msgspec.Raw]
    jobs: list[msgspec.Raw]
    runs: list[msgspec.Raw]
    edges: list[ExportEdge]
    column_edges: list[ExportColumnEdge]


Adjacency = dict[str, list[tuple[int, str]]]


class MemoryGraph:
    """The export's edges as adjacency dicts of node ids (both directions), and the API's
    traversals as plain breadth-first searches over them."""

    def __init__(self, doc: ExportDoc) -> None:
        self.edge_ends = [(e.source, e.target) for e in doc.edges]
        self.down: Adjacency = {}
        self.up: Adjacency = {}
        for n, (source, target) in enumerate(self.edge_ends):
            self.down.setdefault(source, []).append((n, target))
            self.up.setdefault(target, []).append((n, source))
        # Column edges, in the export's order (source, target, job: the API's order).
        self.column_edges = [
            (e.source, e.target, e.job, e.kind == "mapping" and e.masked) for e in doc.column_edges
        ]
        self.fdown: Adjacency = {}
        self.fup: Adjacency = {}
        for n, (source, target, _job, _masked) in enumerate(self.column_edges):
            self.fdown.setdefault(source, []).append((n, target))
            self.fup.setdefault(target, []).append((n, source))

    def lineage(self, root: str, depth: int, limit: int) -> tuple[int, int, bool]:
        """query.lineage: the union of a complete upstream and downstream walk."""
        nodes = {root: 0}
        edges: set[int] = set()
        truncated = False
        for adjacency in (self.up, self.down):
            seen = {root}
            frontier = [root]
            for distance in range(1, depth + 1):
                nxt = []
                for node in frontier:
                    for edge, neighbour in adjacency.get(node, ()):
                        if neighbour not in nodes:
                            if len(nodes) >= limit:
                                truncated = True
                                continue
                            nodes[neighbour] = distance
                        edges.add(edge)
                        if neighbour not in seen:
                            seen.add(neighbour)
                            nxt.append(neighbour)
                frontier = nxt
                if not frontier:
                    break
        ends = self.edge_ends
        kept = [e for e in edges if ends[e][0] in nodes and ends[e][1] in nodes]
        return len(nodes), len(kept), truncated

    def column_lineage(self, root: str, depth: int, limit: int) -> tuple[int, int, bool]:
        """query.column_lineage: both kinds of edge, at most ``limit`` nodes."""
        nodes = {root: 0}
        edges: set[int] = set()
        truncated = False
        for adjacency in (self.fup, self.fdown):
            seen = {root}
            frontier = [root]
            for distance in range(1, depth + 1):
                nxt = []
                for node in frontier:
                    for edge, other in adjacency.get(node, ()):
                        if other not in nodes and len(nodes) >= limit:
                            truncated = True
                            continue
                        edges.add(edge)
                        nodes[other] = min(nodes.get(other, distance), distance)
                        if other not in seen:
                            seen.add(other)
                            nxt.append(other)
                frontier = nxt
                if not frontier:
                    break
        return len(nodes), len(edges), truncated

    def impact(self, root: str, depth: int, limit: int) -> tuple[int, bool]:
        """impact.impact from a field: one shortest path per item (fields, their jobs and
        their datasets), ``masked`` along it, at most ``limit`` items."""
        items: dict[str, tuple[int, list[str], bool]] = {}
        truncated = False

        def add(node: str, distance: int, path: list[str], masked: bool) -> bool:
            nonlocal truncated
            if node in items:
                return False
            if len(items) >= limit:
                truncated = True
                return False
            items[node] = (distance, path, masked)
            return True

        paths: dict[str, tuple[list[str], bool]] = {root: ([root], False)}
        frontier = [root]
        column_edges = self.column_edges
        for distance in range(1, depth + 1):
            found = sorted(e for node in frontier for e, _ in self.fdown.get(node, ()))
            nxt = []
            for e in found:
                source, target, job, edge_masked = column_edges[e]
                if target in paths:
                    continue
                path, masked = paths[source]
                masked = masked or edge_masked
                via = path
                if job is not None:
                    via = [*path, job]
                    add(job, distance, via, masked)
                reached = [*via, target]
                paths[target] = (reached, masked)
                if add(target, distance, reached, masked):
                    nxt.append(target)
                    container = "dataset:" + target.removeprefix("field:").rpartition(":")[0]
                    add(container, distance, [*reached, container], masked)
            frontier = sorted(nxt)
            if not frontier:
                break
        items.pop(root, None)
        ordered = sorted(items.items(), key=lambda kv: (kv[1][0], kv[0]))  # as the API
        return len(ordered), truncated


def fetch_export(client: httpx.Client, path: Path) -> dict[str, Any]:
    """GET /api/v1/export into a file; its time and size."""
    started = time.perf_counter()
    with client.stream("GET", "/api/v1/export", timeout=3600) as response, open(path, "wb") as f:
        response.raise_for_status()
        for chunk in response.iter_bytes(1 << 20):
            f.write(chunk)
    return {"seconds": time.perf_counter() - started, "bytes": path.stat().st_size}


def build_memory_graph(path: Path) -> tuple[MemoryGraph, dict[str, Any]]:
    started = time.perf_counter()
    doc = msgspec.json.decode(path.read_bytes(), type=ExportDoc)
    decoded = time.perf_counter()
    graph = MemoryGraph(doc)
    built = time.perf_counter()
    facts = {
        "decode_seconds": decoded - started,
        "build_seconds": built - decoded,
        "datasets": len(doc.datasets),
        "jobs": len(doc.jobs),
        "runs": len(doc.runs),
        "edges": len(doc.edges),
        "column_edges": len(doc.column_edges),
        "field_mappings": sum(1 for e in doc.column_edges if e.kind == "mapping"),
    }
    return graph, facts


def measure_memory(
    graph: MemoryGraph, group: Group, answers: Sequence[Answer]
) -> dict[str, Any] | None:
    """The group's calls again (same roots, same order), as in-memory walks; the node
    and edge counts are compared with the API's answers."""
    if group.memory is None:
        return None
    runs: list[tuple[Callable[[], Any], Answer]] = []
    for a in answers:
        root = a.root
        if root is None:
            continue
        depth = int(a.query.params["depth"])
        if group.memory == "lineage":
            limit = int(a.query.params.get("limit", "500"))
            runs.append((functools.partial(graph.lineage, root, depth, limit), a))
        elif group.memory == "column_lineage":
            limit = int(a.query.params.get("limit", "500"))
            runs.append((functools.partial(graph.column_lineage, root, depth, limit), a))
        else:
            limit = int(a.query.params.get("limit", "1000"))
            runs.append((functools.partial(graph.impact, root, depth, limit), a))
    if not runs:
        return None
    for walk, _ in runs[:3]:
        walk()  # warm-up, as for the API
    ms, mismatches, example = [], 0, None
    # The graph's millions of objects are moved out of the collector's view, as
    # `embrasure serve` does with what it loads at start-up (projector/collector.py tune_gc).
    gc.collect()
    gc.freeze()
    for walk, a in runs:
        started = time.perf_counter()
        result = walk()
        ms.append((time.perf_counter() - started) * 1000)
        if group.memory in ("lineage", "column_lineage"):
            # Which nodes a truncated walk keeps depends on the order edges come in.
            nodes, edges, truncated = result
            same = nodes == a.nodes and (truncated or edges == a.edges)
        else:
            nodes, truncated = result
            edges = None
            same = nodes == a.items
        if not same:
            mismatches += 1
            example = example or (
                f"{a.query.label}: API {a.nodes or a.items} nodes/{a.edges} edges, "
                f"memory {nodes}/{edges}"
            )
    gc.unfreeze()
    return {
        "calls": len(ms),
        "p50_ms": servers.percentile(ms, 50),
        "p99_ms": servers.percentile(ms, 99),
        "mean_ms": statistics.fmean(ms),
        "count_mismatches": mismatches,
        "mismatch_example": example,
    }


# -- loading and projecting --------------------------------------------------------------


def db_files(db: Path) -> dict[str, int]:
    """Bytes of the store's files by kind, the log's and the graph's together."""
    sizes = {"main": 0, "wal": 0, "shm": 0}
    for file in servers.sqlite_files(db):
        kind = (
            "wal" if file.name.endswith("-wal") else "shm" if file.name.endswith("-shm") else "main"
        )
        sizes[kind] += file.stat().st_size if file.exists() else 0
    return sizes


def _ro(db: Path) -> sqlite3.Connection:
    return servers.sqlite_reader(db)


def process_cpu_seconds(pid: int) -> float:
    # utime and stime are fields 14 and 15 of /proc/PID/stat, after the ")" of the name.
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds every process on the machine has used (/proc/stat, idle and iowait
    left out)."""
    with open("/proc/stat") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def projection_position(db: Path) -> tuple[int, int]:
    """(the served generation's position, the last delivery's seq)."""
    conn = _ro(db)
    try:
        generation = conn.execute("SELECT generation FROM graph_meta").fetchone()[0]
        position = conn.execute(f"SELECT seq FROM g{generation}_position").fetchone()[0]
        top = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM deliveries").fetchone()[0]
        return int(position), int(top)
    finally:
        conn.close()


async def _post_all(url: str, bodies: Sequence[bytes], clients: int) -> dict[str, Any]:
    statuses: dict[str, int] = {}
    invalid = 0
    queue = list(reversed(bodies))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal invalid
        while queue:
            body = queue.pop()
            for attempt in range(5):
                response = await client.post(
                    "/api/v1/lineage/batch",
                    content=body,
                    headers={"content-type": "application/json"},
                )
                if response.status_code not in (429, 503) or attempt == 4:
                    break
                await asyncio.sleep(float(response.headers.get("retry-after", "1")))
            key = str(response.status_code)
            statuses[key] = statuses.get(key, 0) + 1
            if response.status_code == 202:
                invalid += int(response.json().get("invalid_item_count", 0))

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=300) as client:
        await asyncio.gather(*(worker(client) for _ in range(clients)))
    return {"statuses": statuses, "invalid_items": invalid}


def load(url: str, bodies: Sequence[bytes], events: int, clients: int) -> dict[str, Any]:
    started = time.perf_counter()
    outcome = asyncio.run(_post_all(url, bodies, clients))
    seconds = time.perf_counter() - started
    return {
        "deliveries": len(bodies),
        "events": events,
        "body_bytes": sum(len(b) for b in bodies),
        "seconds": seconds,
        "events_per_s": events / seconds,
        "clients": clients,
        **outcome,
    }


def project(work: Path, source: Path, db: Path, events: int) -> dict[str, Any]:
    """``embrasure project`` until its position reaches the end of the log, then SIGTERM;
    timed from the process start."""
    argv = [sys.executable, "-m", "embrasure", "project", "--db", f"sqlite:///{db}"]
    argv += ["--log-level", "warning"]
    log_path = work / f"project-{int(time.time())}.log"
    env = {**os.environ, "PYTHONPATH": str(source)}
    started = time.perf_counter()
    busy_before = machine_busy_seconds()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=work, env=env)
    cpu = 0.0
    try:
        last_report = started
        while True:
            time.sleep(0.5)
            if proc.poll() is not None:
                raise RuntimeError(f"embrasure project exited:\n{log_path.read_text()}")
            cpu = process_cpu_seconds(proc.pid)
            with contextlib.suppress(sqlite3.Error):
                position, top = projection_position(db)
                if position >= top:
                    break
                if time.perf_counter() - last_report > 30:
                    last_report = time.perf_counter()
                    print(f"  projected up to delivery {position:,} of {top:,}", flush=True)
        seconds = time.perf_counter() - started
        busy = machine_busy_seconds() - busy_before
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return {
        "seconds": seconds,
        "events": events,
        "events_per_s": events / seconds,
        "cpu_seconds": cpu,
        "others_busy_cores": max(0.0, busy - cpu) / seconds,
        "log": log_path.read_text()[-2000:],
    }


def graph_facts(db: Path) -> dict[str, Any]:
    """Row counts of the served generation and the projector's item outcomes."""
    conn = _ro(db)
    try:
        g = "g" + str(conn.execute("SELECT generation FROM graph_meta").fetchone()[0]) + "_"

        def count(sql: str) -> int:
            return int(conn.execute(sql).fetchone()[0])

        # The deliveries' counts: from graph version 10 a plain projected item has no
        # items row (docs/architecture.md#storage).
        sums = conn.execute(
            f"SELECT SUM(projected), SUM(quarantined) FROM {g}deliveries"
        ).fetchone()
        outcomes = {o: int(n) for o, n in zip(("projected", "quarantined"), sums, strict=True) if n}
        warned = conn.execute(
            f"SELECT warnings FROM {g}items WHERE warnings != '[]' LIMIT 3"
        ).fetchall()
        reasons = conn.execute(
            f"SELECT reason FROM {g}items WHERE outcome = 'quarantined' LIMIT 3"
        ).fetchall()
        return {
            "items": outcomes,
            "items_with_warnings": count(f"SELECT COUNT(*) FROM {g}items WHERE warnings != '[]'"),
            "warning_examples": [w[0][:300] for w in warned],
            "quarantine_examples": [r[0][:300] for r in reasons],
            "identities": count(f"SELECT COUNT(*) FROM {g}datasets"),
            "aliased_identities": count(
                f"SELECT COUNT(*) FROM {g}canonical WHERE ns != c_ns OR name != c_name"
            ),
            "jobs": count(f"SELECT COUNT(*) FROM {g}jobs"),
            "runs": count(f"SELECT COUNT(*) FROM {g}runs"),
            "edge_rows": count(f"SELECT COUNT(*) FROM {g}edges"),
            "column_edge_rows": count(f"SELECT COUNT(*) FROM {g}column_edges"),
            "fields": count(f"SELECT COUNT(*) FROM {g}fields"),
            "links": count(f"SELECT COUNT(*) FROM {g}links"),
        }
    finally:
        conn.close()


def db_breakdown(db: Path) -> dict[str, Any]:
    """Bytes on disk per table and index (SQLite's dbstat), grouped: the delivery log,
    the graph's tables, the graph's indexes."""
    conn = _ro(db)
    try:
        started = time.perf_counter()
        rows = conn.execute(
            "SELECT name, SUM(pgsize) FROM dbstat WHERE aggregate = TRUE GROUP BY name"
        ).fetchall()
        kinds = dict(conn.execute("SELECT name, type FROM sqlite_master").fetchall())
    finally:
        conn.close()
    groups = {"log": 0, "graph tables": 0, "graph indexes": 0, "other": 0}
    tables: list[tuple[str, int]] = []
    for name, size in rows:
        if name.startswith("g") and "_" in name and name[1 : name.index("_")].isdigit():
            group = "graph indexes" if kinds.get(name) == "index" else "graph tables"
            if name.startswith("sqlite_autoindex"):
                group = "graph indexes"
        elif name.startswith("sqlite_autoindex_g"):
            group = "graph indexes"
        elif name in ("deliveries", "idempotency") or name.startswith(
            ("deliveries", "sqlite_autoindex_deliveries")
        ):
            group = "log"
        else:
            group = "other"
        groups[group] += int(size)
        tables.append((str(name), int(size)))
    tables.sort(key=lambda t: -t[1])
    return {"seconds": time.perf_counter() - started, "groups": groups, "largest": tables[:12]}


# -- one size -----------------------------------------------------------------------------


def measure_size(
    label: str,
    work: Path,
    source: Path,
    db: Path,
    platform: Platform,
    tasks: Sequence[Task],
    events_so_far: int,
    groups: Sequence[Group],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Load ``tasks``' events, project them, measure the DB, the queries and the limit."""
    print(f"[{label}] generating the events of {len(tasks):,} jobs", flush=True)
    started = time.perf_counter()
    bodies, events = platform.bodies(tasks, args.batch)
    generated = time.perf_counter() - started
    print(
        f"[{label}] {events:,} events ({sum(map(len, bodies)) / 2**20:,.0f} MiB) in "
        f"{generated:.0f} s; loading",
        flush=True,
    )
    server = servers.start_embrasure(work, db, source)
    try:
        loaded = load(server.url, bodies, events, args.clients)
        del bodies
        gc.collect()
        print(
            f"[{label}] loaded in {loaded['seconds']:.1f} s ({loaded['events_per_s']:,.0f} "
            f"events/s), statuses {loaded['statuses']}; projecting",
            flush=True,
        )
        total_events = events_so_far + events
        projected = project(work, source, db, events)
        print(
            f"[{label}] projected in {projected['seconds']:.0f} s "
            f"({projected['events_per_s']:,.0f} events/s)",
            flush=True,
        )
        files = db_files(db)
        size = files["main"] + files["wal"]
        facts = graph_facts(db)
        print(f"[{label}] graph: {facts}", flush=True)
        queries: dict[str, Any] = {}
        answers: dict[str, list[Answer]] = {}
        with httpx.Client(base_url=server.url, timeout=600) as client:
            for group in groups:
                summary, group_answers = measure_group(client, server, group)
                queries[group.name] = summary
                answers[group.name] = group_answers
                print(
                    f"[{label}] {group.name:<22} p50 {summary['p50_ms']:9.1f} ms  p99 "
                    f"{summary['p99_ms']:9.1f} ms  ({summary['calls']} calls; nodes "
                    f"{_median(summary['nodes'])}, items {_median(summary['items'])})",
                    flush=True,
                )
            print(f"[{label}] GET /api/v1/export", flush=True)
            export_path = work / "export.json"
            export = fetch_export(client, export_path)
        export["server_rss_kib"] = servers.memory_kib(server.pid)
    finally:
        server.stop()
    print(
        f"[{label}] export: {export['bytes'] / 2**20:,.0f} MiB in {export['seconds']:.0f} s; "
        "building the in-memory graph",
        flush=True,
    )
    graph, memory_facts = build_memory_graph(export_path)
    export_path.unlink()
    export |= memory_facts
    memory: dict[str, Any] = {}
    for group in groups:
        result = measure_memory(graph, group, answers[group.name])
        if result is not None:
            memory[group.name] = result
            print(
                f"[{label}] in memory {group.name:<22} p50 {result['p50_ms']:8.2f} ms  p99 "
                f"{result['p99_ms']:8.2f} ms  (count mismatches {result['count_mismatches']})",
                flush=True,
            )
    del graph
    gc.collect()
    breakdown = db_breakdown(db)
    return {
        "jobs": tasks[-1].index + 1,
        "events": total_events,
        "generate_seconds": generated,
        "load": loaded,
        "projection": projected,
        "graph": facts,
        "db": {
            "files": files,
            "bytes": size,
            "bytes_per_million_events": size * 1_000_000 / total_events,
            "breakdown": breakdown,
        },
        "export": export,
        "queries": queries,
        "memory": memory,
    }


def _median(summary: dict[str, float] | None) -> str:
    return "-" if summary is None else f"{summary['median']:,.0f}"


# -- report -------------------------------------------------------------------------------


def _f(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _ms(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.2f}" if value < 10 else f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def verdicts(sizes: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, judged at the full size (the last one measured)."""
    full = sizes[list(sizes)[-1]]
    q, m = full["queries"], full["memory"]
    out = []
    hub = q["lineage_hub"]
    out.append(
        {
            "target": f"lineage depth 10 around a hub, p99 < {LINEAGE_P99_TARGET_MS:.0f} ms",
            "measured": hub["p99_ms"],
            "met": hub["p99_ms"] < LINEAGE_P99_TARGET_MS,
            "ratio": hub["p99_ms"] / LINEAGE_P99_TARGET_MS,
            "text": f"{_ms(hub['p99_ms'])} ms = {hub['p99_ms'] / LINEAGE_P99_TARGET_MS:.2f}x "
            "the target",
        }
    )
    mem = m["lineage_hub"]["p99_ms"]
    ratio = hub["p99_ms"] / mem
    out.append(
        {
            "target": f"lineage around a hub within {LINEAGE_RATIO_TARGET:.0f}x of the "
            "in-memory traversal (p99 / p99)",
            "measured": ratio,
            "met": ratio <= LINEAGE_RATIO_TARGET,
            "ratio": ratio / LINEAGE_RATIO_TARGET,
            "text": f"{ratio:,.0f}x the in-memory walk ({_ms(hub['p99_ms'])} vs {_ms(mem)} ms)",
        }
    )
    impact = q["impact_hub_column"]
    out.append(
        {
            "target": f"impact of a hub column, p99 < {IMPACT_P99_TARGET_MS:.0f} ms",
            "measured": impact["p99_ms"],
            "met": impact["p99_ms"] < IMPACT_P99_TARGET_MS,
            "ratio": impact["p99_ms"] / IMPACT_P99_TARGET_MS,
            "text": f"{_ms(impact['p99_ms'])} ms = "
            f"{impact['p99_ms'] / IMPACT_P99_TARGET_MS:.2f}x the target",
        }
    )
    return out


def _growth(a: float | None, b: float | None) -> str:
    if a is None or b is None or a == 0:
        return "n/a"
    return f"{b / a:,.1f}x"


# Figures of each size: (label, keys into the size's results, divisor, digits shown).
SIZE_FIGURES: list[tuple[str, tuple[str, ...], float, int]] = [
    ("events", ("events",), 1, 0),
    ("jobs", ("export", "jobs"), 1, 0),
    ("datasets (nodes in the export)", ("export", "datasets"), 1, 0),
    ("dataset edges", ("export", "edges"), 1, 0),
    ("field mappings (column edges of kind mapping)", ("export", "field_mappings"), 1, 0),
    ("column edges (all kinds)", ("export", "column_edges"), 1, 0),
    ("DB + WAL (MiB)", ("db", "bytes"), 2**20, 0),
    ("DB + WAL per million events (GiB)", ("db", "bytes_per_million_events"), 2**30, 2),
    ("load: events/s (HTTP, receiver only)", ("load", "events_per_s"), 1, 0),
    ("projection: events/s (`embrasure project`)", ("projection", "events_per_s"), 1, 0),
    ("projection: seconds", ("projection", "seconds"), 1, 0),
    ("export: seconds", ("export", "seconds"), 1, 1),
    ("export: MiB", ("export", "bytes"), 2**20, 0),
]


def _dig(results: dict[str, Any], path: Sequence[str]) -> float:
    value: Any = results
    for key in path:
        value = value[key]
    return float(value)


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    sizes = results["sizes"]
    labels = list(sizes)
    small, full = sizes[labels[0]], sizes[labels[-1]]
    lines = [
        "# Query benchmark",
        "",
        f"Run {m['date']}. Machine: {m['nproc']} CPUs ({m['cpu']}), Python {m['python']}, "
        f"SQLite {m['sqlite']}. Code: {m['commit']}. Scale {results['scale']}; "
        f"{results['wall_minutes']:.0f} minutes in all. This machine is shared and noisy "
        "(±30% between runs, ../shared/MEASURED.md): 'others busy' is the CPU the rest of "
        "the machine used while a query was measured. Produced by `bench/query.py` (its "
        "docstring describes the generated platform and each query).",
        "",
        "## Targets (SQLite, one process, at 100%)",
        "",
    ]
    rows = [
        [v["target"], v["text"], "met" if v["met"] else f"**MISSED** ({v['ratio']:.1f}x)"]
        for v in results["verdicts"]
    ]
    lines += table(["target", "measured", "verdict"], rows)
    lines += ["", f"## Figures at {labels[0]} and {labels[-1]} of the graph", ""]
    rows = []
    for name, group in full["queries"].items():
        s_q, f_q = small["queries"][name], group
        target = ""
        if name == "lineage_hub":
            target = f"p99 < {LINEAGE_P99_TARGET_MS:.0f} ms"
        elif name == "impact_hub_column":
            target = f"p99 < {IMPACT_P99_TARGET_MS:.0f} ms"
        for stat in ("p50_ms", "p99_ms"):
            rows.append(
                [
                    f"{name} {stat[:3]} (ms)",
                    _ms(s_q[stat]),
                    _ms(f_q[stat]),
                    _growth(s_q[stat], f_q[stat]),
                    target if stat == "p99_ms" else "",
                ]
            )
        if name in full["memory"]:
            s_m, f_m = small["memory"][name], full["memory"][name]
            for stat in ("p50_ms", "p99_ms"):
                rows.append(
                    [
                        f"{name} in memory {stat[:3]} (ms)",
                        _ms(s_m[stat]),
                        _ms(f_m[stat]),
                        _growth(s_m[stat], f_m[stat]),
                        "",
                    ]
                )
            ratio_s = s_q["p99_ms"] / s_m["p99_ms"]
            ratio_f = f_q["p99_ms"] / f_m["p99_ms"]
            rows.append(
                [
                    f"{name} API / in memory, p99",
                    f"{ratio_s:,.0f}x",
                    f"{ratio_f:,.0f}x",
                    _growth(ratio_s, ratio_f),
                    f"<= {LINEAGE_RATIO_TARGET:.0f}x" if name == "lineage_hub" else "",
                ]
            )
    for label, path, unit, digits in SIZE_FIGURES:
        a, b = _dig(small, path) / unit, _dig(full, path) / unit
        rows.append([label, _f(a, digits), _f(b, digits), _growth(a, b), ""])
    lines += table(["figure", labels[0], labels[-1], "growth", "target"], rows)
    lines += [
        "",
        "Growth is the 100% figure over the 10% one: the same queries (same roots) on a "
        "graph ten times larger. The in-memory walk is the same breadth-first traversal "
        "(depth, per-walk visited sets, node limit, impact's paths) over adjacency dicts "
        "built from `GET /api/v1/export`, in the harness process: no HTTP, no JSON, no "
        "SQL. 'load' and 'projection' of the 100% row are the 90% loaded second.",
        "",
    ]
    for label, size in sizes.items():
        lines += _size_md(label, size)
    return "\n".join(lines)


def _summary_cell(s: dict[str, float] | None) -> str:
    if s is None:
        return "-"
    if s["min"] == s["max"]:
        return f"{s['median']:,.0f}"
    return f"{s['median']:,.0f} ({s['min']:,.0f} to {s['max']:,.0f})"


def _size_md(label: str, size: dict[str, Any]) -> list[str]:
    g, load_, proj, db, export = (
        size["graph"],
        size["load"],
        size["projection"],
        size["db"],
        size["export"],
    )
    lines = [
        f"## At {label}: {size['jobs']:,} jobs, {size['events']:,} events",
        "",
        f"Generated in {size['generate_seconds']:.0f} s. Loaded (this part's "
        f"{load_['events']:,} events, {load_['deliveries']:,} batches, "
        f"{load_['body_bytes'] / 2**20:,.0f} MiB, {load_['clients']} clients) in "
        f"{load_['seconds']:.1f} s = {load_['events_per_s']:,.0f} events/s, responses "
        f"{load_['statuses']}, invalid items {load_['invalid_items']}. Projected by "
        f"`embrasure project` in {proj['seconds']:.0f} s = {proj['events_per_s']:,.0f} "
        f"events/s ({proj['cpu_seconds']:.0f} CPU s; the rest of the machine meanwhile "
        f"{proj.get('others_busy_cores', 0):.2f} cores busy). Items: {g['items']}, "
        f"{g['items_with_warnings']:,} with warnings.",
        "",
        f"Graph rows: {g['identities']:,} dataset identities ({g['aliased_identities']:,} "
        f"resolve to another), {g['jobs']:,} jobs, {g['runs']:,} runs, {g['edge_rows']:,} "
        f"edge rows, {g['column_edge_rows']:,} column edge rows, {g['fields']:,} fields, "
        f"{g['links']:,} links. Export: {export['datasets']:,} datasets, "
        f"{export['edges']:,} edges, {export['column_edges']:,} column edges "
        f"({export['field_mappings']:,} mappings); {export['bytes'] / 2**20:,.0f} MiB in "
        f"{export['seconds']:.1f} s (server RSS after it "
        f"{export['server_rss_kib'].get('VmRSS', 0) / 2**20:.1f} GiB, peak "
        f"{export['server_rss_kib'].get('VmHWM', 0) / 2**20:.1f} GiB); decoded in "
        f"{export['decode_seconds']:.1f} s, adjacency built in {export['build_seconds']:.1f} s.",
        "",
        f"DB on disk: {db['files']['main'] / 2**20:,.0f} MiB + WAL "
        f"{db['files']['wal'] / 2**20:,.0f} MiB = "
        f"{db['bytes_per_million_events'] / 2**30:.2f} GiB per million events. By part "
        "(dbstat): "
        + ", ".join(f"{k} {v / 2**20:,.0f} MiB" for k, v in db["breakdown"]["groups"].items())
        + "; largest: "
        + ", ".join(f"{n} {v / 2**20:,.0f}" for n, v in db["breakdown"]["largest"][:8])
        + " MiB.",
        "",
    ]
    rows = []
    for name, q in size["queries"].items():
        mem = size["memory"].get(name)
        rows.append(
            [
                name,
                f"{q['calls']} / {q['roots']}",
                _ms(q["p50_ms"]),
                _ms(q["p99_ms"]),
                _ms(mem["p50_ms"]) if mem else "-",
                _ms(mem["p99_ms"]) if mem else "-",
                f"{q['p99_ms'] / mem['p99_ms']:,.0f}x" if mem else "-",
                _summary_cell(q["nodes"] or q["items"] or q["results"]),
                _summary_cell(q["edges"]),
                f"{q['bytes']['median'] / 1024:,.0f}" if q["bytes"] else "-",
                str(q["truncated_calls"]),
                _f(q["server_cpu_ms_per_call"], 1),
                _f(q["others_busy_cores"], 2),
                str(mem["count_mismatches"]) if mem else "-",
            ]
        )
    lines += table(
        [
            "query",
            "calls / roots",
            "p50 ms",
            "p99 ms",
            "memory p50",
            "memory p99",
            "ratio p99",
            "nodes or items (median, range)",
            "edges",
            "KiB",
            "truncated",
            "server CPU ms/call",
            "others busy",
            "count mismatches",
        ],
        rows,
    )
    slow = "; ".join(
        f"{name}: " + ", ".join(f"{root} {ms} ms" for root, ms in q["slowest_roots"])
        for name, q in size["queries"].items()
        if name != "healthz"
    )
    lines += ["", f"Slowest calls: {slow}.", ""]
    mismatched = [
        f"{name}: {m['mismatch_example']}"
        for name, m in size["memory"].items()
        if m["count_mismatches"]
    ]
    if mismatched:
        lines += ["Count mismatches (API vs in-memory): " + "; ".join(mismatched) + ".", ""]
    return lines


def print_summary(results: dict[str, Any]) -> None:
    print()
    for label, size in results["sizes"].items():
        print(
            f"{label}: {size['events']:,} events, DB "
            f"{size['db']['bytes_per_million_events'] / 2**30:.2f} GiB per million events, "
            f"projection {size['projection']['events_per_s']:,.0f} events/s"
        )
        for name, q in size["queries"].items():
            mem = size["memory"].get(name)
            extra = f"   memory p50 {mem['p50_ms']:.2f} p99 {mem['p99_ms']:.2f} ms" if mem else ""
            print(f"  {name:<22} p50 {q['p50_ms']:9.1f} p99 {q['p99_ms']:9.1f} ms{extra}")
    for v in results["verdicts"]:
        print(f"{'met   ' if v['met'] else 'MISSED'} {v['target']}: {v['text']}")


def save(results: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "query.json").write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2) + b"\n")
    (out_dir / "query.md").write_text(markdown(results) + "\n")
    print(f"wrote {out_dir / 'query.md'} and query.json")


# -- main ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="--scale 0.1 --calls 20 (results/tmp/)")
    p.add_argument("--scale", type=float, help="1 = ~52,000 jobs, ~58,000 events (default)")
    p.add_argument("--calls", type=int, help="calls per query (heavy ones: a quarter; 100)")
    p.add_argument("--first", type=float, default=0.1, help="the first part's share of jobs")
    p.add_argument("--batch", type=int, default=200, help="events per POST")
    p.add_argument("--clients", type=int, default=4, help="concurrent POSTs while loading")
    p.add_argument("--rev", help="measure this git revision (default: the working tree)")
    p.add_argument("--workdir", type=Path, help="where the work directory goes")
    p.add_argument("--keep", action="store_true", help="keep the work directory (the DB)")
    p.add_argument(
        "--dataset-runs",
        action="store_true",
        help="instead: datasets/runs of a dataset with 10,000 runs, both backends"
        " (bench/dataset_runs.py)",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.dataset_runs:
        # Its own graph (one dataset, 10,000 runs) on both backends; it imports embrasure.
        import dataset_runs

        dataset_runs.main([])
        return
    scale = args.scale or (0.1 if args.quick else 1.0)
    calls = args.calls or (20 if args.quick else 100)
    out_dir = RESULTS_DIR / "tmp" if args.quick else RESULTS_DIR
    work = Path(tempfile.mkdtemp(prefix="embrasure-query-", dir=args.workdir))
    started = time.monotonic()
    try:
        source = work / "src"
        code = servers.copy_source(source, args.rev)
        print(f"measuring {code}; work directory {work}", flush=True)
        platform = Platform(scale)
        tasks = platform.tasks
        first = max(1, round(len(tasks) * args.first))
        groups = query_groups(platform, first, calls)
        db = work / "query.db"
        sizes: dict[str, Any] = {}
        small = measure_size(
            f"{args.first:.0%}", work, source, db, platform, tasks[:first], 0, groups, args
        )
        sizes[f"{args.first:.0%}"] = small
        sizes["100%"] = measure_size(
            "100%", work, source, db, platform, tasks[first:], small["events"], groups, args
        )
        results = {
            "machine": servers.machine_facts(code),
            "scale": scale,
            "calls": calls,
            "platform": {
                "dags": len(platform.lengths),
                "jobs": len(tasks),
                "hub_dag_length": platform.hub_length,
                "deep_dags": sum(1 for n in platform.lengths if n >= 30),
                "longest_dag": max(platform.lengths),
                "hub_readers": [sum(1 for t in tasks if t.hub == h) for h in range(HUBS)],
                "cross_reads": sum(1 for t in tasks if t.cross is not None),
            },
            "required_at_scale_1": REQUIRED,
            "sizes": sizes,
            "wall_minutes": (time.monotonic() - started) / 60,
        }
        results["verdicts"] = verdicts(sizes)
        print_summary(results)
        save(results, out_dir)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
