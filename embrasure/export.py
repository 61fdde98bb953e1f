"""``GET /api/v1/export``: the whole graph as canonical JSON (DESIGN §5).

Every part is sorted by identity and free of anything that depends on arrival (delivery
ids, receive times, database ids), so two graphs built from the same set of events in any
order export byte for byte the same: the order-independence check, and a way to diff.
"""

from __future__ import annotations

from typing import Any

import orjson

from .model import DatasetId, JobId
from .query import Graph, _column_order, column_edge_json, column_edges_of
from .store.base import GraphReader
from .views import Identities, dataset_view, job_view, run_view


def export(reader: GraphReader) -> dict[str, Any]:
    graph = Graph(reader)
    ids = Identities(reader)
    identities = [DatasetId(r[0], r[1]) for r in reader.rows("datasets")]
    canonical = ids.canonical(identities)
    nodes = sorted({canonical[i] for i in identities})
    jobs = sorted(JobId(r[0], r[1]) for r in reader.rows("jobs"))
    datasets = [dataset_view(reader, ids, n) for n in nodes]
    job_views = []
    for j in jobs:
        view = job_view(reader, j)
        view.pop("latest_run")  # arrival-free but redundant with runs
        job_views.append(view)
    runs = [run_view(reader, row) for row in reader.rows("runs")]
    edges = graph.edge_json(graph.edges_of_datasets(nodes)) if nodes else []
    fields = sorted({(canonical[DatasetId(r[3], r[4])], r[5]) for r in reader.rows("column_edges")})
    found = column_edges_of(reader, ids, fields, "src") if fields else []
    column_edges = [
        column_edge_json(graph, edge, span)
        for edge, span in sorted(found, key=lambda e: _column_order(e[0].key))
    ]
    return {
        "datasets": datasets,
        "jobs": job_views,
        "runs": runs,
        "edges": sorted(edges, key=lambda e: (e["source"], e["target"], e["static"])),
        "column_edges": column_edges,
    }


def export_bytes(reader: GraphReader) -> bytes:
    return orjson.dumps(export(reader), option=orjson.OPT_SORT_KEYS)
