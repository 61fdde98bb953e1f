"""Hypothesis strategies for OpenLineage event sets over a small universe, so that runs,
jobs, datasets, aliases and column edges collide often (tests/projector/
test_order_independence.py, tests/query/test_as_of.py, tests/store/test_postgres.py)."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import orjson
from hypothesis import strategies as st

from embrasure.model import DatasetId, DeliveryDraft, utc_now
from embrasure.projector.worker import Projector, ProjectorLimits
from embrasure.query.dataset_runs import dataset_runs
from embrasure.query.entities import Identities
from embrasure.query.export import export_bytes
from embrasure.query.quality import failed_datasets
from embrasure.store import open_store
from embrasure.store.base import GraphReader

RUNS = [str(uuid.UUID(int=0x0190_0000_0000_7000_8000_0000_0000_0000 + i)) for i in range(4)]
RUN_JOB = {RUNS[0]: "a", RUNS[1]: "a", RUNS[2]: "b", RUNS[3]: "c"}
DATASETS = [
    ("s3://bucket", "raw/orders"),
    ("warehouse", "db.orders"),
    ("warehouse", "db.customers"),
    ("warehouse", "db.report"),
    ("s3://bucket", "x"),
]
ALIASES = [("hive://metastore", "db.orders"), ("warehouse", "db.orders_v2")]
TIMES = [
    None,
    "2026-11-30T09:00:00Z",
    "2026-11-30T10:00:00.5+01:00",
    "2026-11-30T09:00:00.500Z",
    "2026-11-30T11:00:00Z",
    "2026-11-30T09:00:00",
]
TYPES = ["START", "RUNNING", "COMPLETE", "FAIL", "ABORT", "OTHER", "WEIRD", None]
FIELDS = ["id", "amount", "name"]
SQL = [
    {"query": "select 1"},
    {"query": "select id, amount, name from db.orders"},
    {"query": "select id, name from x"},
    {"query": "insert into db.report select id, amount as name from db.orders"},
    {"query": "select o.id, c.name from orders o join db.customers c on o.id = c.id"},
    {"query": "insert into report select amount from x", "dialect": "postgres"},
    {"query": "selec broken"},
    {"_deleted": True},
]


def _time(draw: st.DrawFn, event: dict[str, Any]) -> None:
    t = draw(st.sampled_from(TIMES))
    if t is not None:
        event["eventTime"] = t


STATISTICS = st.sampled_from(
    [
        {"rowCount": 0},
        {"rowCount": 10, "size": 2048},
        {"rowCount": 7, "fileCount": 2},
        {"_deleted": True},
    ]
)
ASSERTIONS = st.sampled_from(
    [
        {"assertions": [{"assertion": "not_null", "success": True, "column": "id"}]},
        {"assertions": [{"assertion": "not_null", "success": False, "column": "id"}]},
        {
            "assertions": [
                {"assertion": "unique", "success": False, "column": "id"},
                {"assertion": "row_count", "success": True},
            ]
        },
        {"_deleted": True},
    ]
)


@st.composite
def dataset(draw: st.DrawFn, role: str, inputs: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    ns, name = draw(st.sampled_from(DATASETS))
    facets: dict[str, Any] = {}
    if draw(st.booleans()):
        fields = draw(st.lists(st.sampled_from(FIELDS), unique=True, max_size=3))
        types = draw(st.lists(st.sampled_from(["string", "int"]), min_size=3, max_size=3))
        facets["schema"] = {
            "fields": [{"name": f, "type": t} for f, t in zip(fields, types, strict=False)]
        }
    if draw(st.integers(0, 3)) == 0:
        alias = draw(st.sampled_from(ALIASES))
        kind = draw(st.sampled_from(["TABLE", "TABLE", "LOCATION"]))
        facets["symlinks"] = {
            "identifiers": [{"namespace": alias[0], "name": alias[1], "type": kind}]
        }
    if draw(st.integers(0, 4)) == 0:
        facets["documentation"] = draw(
            st.sampled_from(
                [{"description": "orders"}, {"description": "all orders"}, {"_deleted": True}]
            )
        )
    if draw(st.integers(0, 6)) == 0:
        facets["lifecycleStateChange"] = draw(
            st.sampled_from(
                [
                    {"lifecycleStateChange": "DROP"},
                    {"lifecycleStateChange": "CREATE"},
                    {
                        "lifecycleStateChange": "RENAME",
                        "previousIdentifier": {"namespace": "warehouse", "name": "db.old_orders"},
                    },
                ]
            )
        )
    if role == "output" and inputs and draw(st.booleans()):
        src = draw(st.sampled_from(list(inputs)))
        facets["columnLineage"] = {
            "fields": {
                draw(st.sampled_from(FIELDS)): {
                    "inputFields": [
                        {
                            "namespace": src[0],
                            "name": src[1],
                            "field": draw(st.sampled_from(FIELDS)),
                            "transformations": [
                                {
                                    "type": draw(st.sampled_from(["DIRECT", "INDIRECT"])),
                                    "subtype": draw(
                                        st.sampled_from(
                                            [
                                                "IDENTITY",
                                                "TRANSFORMATION",
                                                "AGGREGATION",
                                                "JOIN",
                                                "FILTER",
                                            ]
                                        )
                                    ),
                                    "masking": draw(st.booleans()),
                                }
                            ],
                        }
                    ]
                },
            }
        }
    if role != "dataset" and draw(st.integers(0, 5)) == 0:
        facets["dataQualityAssertions"] = draw(ASSERTIONS)  # as dbt sends it
    out: dict[str, Any] = {"namespace": ns, "name": name}
    if facets:
        out["facets"] = facets
    # What the run says about its use of the dataset (docs/projection.md#what-each-run-did):
    # statistics, assertions, and deletion markers that take one back.
    own: dict[str, Any] = {}
    if role == "output" and draw(st.booleans()):
        own["outputStatistics"] = draw(STATISTICS)
    if role == "input" and draw(st.integers(0, 2)) == 0:
        own["inputStatistics"] = draw(STATISTICS)
    if role == "input" and draw(st.integers(0, 2)) == 0:
        own["dataQualityAssertions"] = draw(ASSERTIONS)
    if own:
        out["inputFacets" if role == "input" else "outputFacets"] = own
    if draw(st.integers(0, 5)) == 0:
        out["version"] = draw(st.sampled_from(["v1", "v2"]))
    return out


@st.composite
def run_event(draw: st.DrawFn) -> dict[str, Any]:
    run_id = draw(st.sampled_from(RUNS))
    inputs = draw(st.lists(dataset("input"), max_size=2))
    event: dict[str, Any] = {
        "run": {"runId": run_id},
        "job": {"namespace": "etl", "name": RUN_JOB[run_id]},
        "inputs": inputs,
        "outputs": draw(
            st.lists(dataset("output", [(d["namespace"], d["name"]) for d in inputs]), max_size=2)
        ),
    }
    event_type = draw(st.sampled_from(TYPES))
    if event_type is not None:
        event["eventType"] = event_type
    _time(draw, event)
    run_facets: dict[str, Any] = {}
    if draw(st.integers(0, 3)) == 0:
        run_facets["parent"] = {
            "run": {"runId": RUNS[0]},
            "job": {"namespace": "airflow", "name": "dag"},
        }
    if event_type == "FAIL" and draw(st.booleans()):
        run_facets["errorMessage"] = {"message": "boom", "programmingLanguage": "python"}
    if run_facets:
        event["run"]["facets"] = run_facets
    if draw(st.booleans()):
        # SQL that yields derived column lineage where an output has no columnLineage
        # facet (meeting declared facts for the same edges), a query without target, and
        # SQL that does not parse (a warning). A query reading the event's own first
        # input makes derived edges common enough to meet declared ones.
        own = [{"query": f'select id, amount, name from "{inputs[0]["name"]}"'}] if inputs else []
        event["job"]["facets"] = {"sql": draw(st.sampled_from(own + own + SQL))}
    return event


@st.composite
def job_event(draw: st.DrawFn) -> dict[str, Any]:
    event: dict[str, Any] = {
        "job": {"namespace": "etl", "name": draw(st.sampled_from(["a", "b", "svc"]))},
        "inputs": draw(st.lists(dataset("input"), max_size=2)),
    }
    if draw(st.booleans()):
        event["outputs"] = draw(st.lists(dataset("output"), max_size=1))
    if draw(st.integers(0, 3)) == 0:
        event["job"]["facets"] = {
            "jobType": {
                "processingType": draw(st.sampled_from(["SERVICE", "BATCH"])),
                "integration": "X",
                "jobType": "JOB",
            }
        }
    _time(draw, event)
    return event


@st.composite
def dataset_event(draw: st.DrawFn) -> dict[str, Any]:
    event: dict[str, Any] = {"dataset": draw(dataset("dataset"))}
    _time(draw, event)
    return event


events = st.lists(
    st.one_of(run_event(), run_event(), job_event(), dataset_event()), min_size=1, max_size=14
)


def draft(
    body: bytes,
    route: str = "single",
    count: int = 1,
    key: str | None = None,
    provider: str = "default",
) -> DeliveryDraft:
    """A delivery of ``body`` as the receiver would append it (no rejected items)."""
    return DeliveryDraft(
        provider, key, hashlib.sha256(body).hexdigest(), body, route, count, (), utc_now()
    )


def incompressible(size: int) -> bytes:
    """A JSON string body that zstd cannot make much smaller (the log compresses bodies)."""
    return b'"' + os.urandom(size // 2).hex().encode() + b'"'


def deliveries(batches: Sequence[Sequence[dict[str, Any]]]) -> Iterator[DeliveryDraft]:
    """One delivery per batch: a lone event goes to the single route half of the time."""
    for n, batch in enumerate(batches):
        if len(batch) == 1 and n % 2:
            yield draft(orjson.dumps(batch[0]), "single", 1)
        else:
            envelope: Any = {"events": list(batch)} if n % 3 == 0 else list(batch)
            yield draft(orjson.dumps(envelope), "batch", len(batch))


def project(
    db_url: str,
    batches: Sequence[Sequence[dict[str, Any]]],
    per_tx: int = 64,
    interleave: bool = False,
) -> bytes:
    """Append the deliveries (one transaction each, like separate requests) and project
    them ``per_tx`` deliveries a transaction, after each append when ``interleave``, so
    that the stored-row merges run, not only the in-batch ones."""
    store = open_store(db_url)
    projector = Projector(store, ProjectorLimits(batch_deliveries=per_tx))
    try:
        for draft in deliveries(batches):
            store.append([draft])
            if interleave:
                projector.run_until_caught_up()
        projector.run_until_caught_up()
        with store.reader() as reader:
            return graph_bytes(reader)
    finally:
        store.close()


def graph_bytes(reader: GraphReader) -> bytes:
    """The export, and what the export leaves out that is a function of the events too:
    every dataset's runs with their statistics, assertions and schema changes
    (GET /api/v1/datasets/runs) and its quality mark (query/quality.py)."""
    ids = Identities(reader)
    identities = {DatasetId(*d) for d in DATASETS + ALIASES}
    identities.add(DatasetId("warehouse", "db.old_orders"))
    nodes = sorted({ids.canonical([i])[i] for i in identities})
    failed = failed_datasets(reader, ids, nodes)
    uses = []
    for node in nodes:
        members = ids.members([node])[node]
        listed, _ = dataset_runs(reader, members, None, None, 1000, lambda row: True)
        uses.append([list(node), node in failed, listed])
    return export_bytes(reader) + orjson.dumps(uses, option=orjson.OPT_SORT_KEYS)


@st.composite
def splits(draw: st.DrawFn, items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A permutation of ``items`` with some duplicated, cut into batches."""
    extra = draw(st.lists(st.sampled_from(items), max_size=3))
    shuffled = draw(st.permutations(items + extra))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(shuffled) - 1)), max_size=4)))
    out, start = [], 0
    for cut in [*cuts, len(shuffled)]:
        if cut > start:
            out.append(shuffled[start:cut])
            start = cut
    return out
