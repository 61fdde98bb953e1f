"""``GET /api/v1/search?q=`` (docs/queries.md#search-namespaces-events): datasets, jobs,
services and fields by name,
ranked exact, then prefix, then substring.

Matching ignores the case of ASCII letters. A dataset found under an alias (a symlinked
or renamed identity) answers with its canonical node and says which alias matched; a
node matched several ways is listed once, at its best rank. Within a rank shorter names
come first, then datasets, fields, jobs, each by identity — so the order is stable and
a cursor (an offset into it) pages through it.
"""

from __future__ import annotations

from typing import Any

from embrasure.model import DatasetId, JobId
from embrasure.query.entities import Identities, dataset_node, job_kind, job_node
from embrasure.query.hidden import Hidden
from embrasure.store.base import GraphReader
from embrasure.store.read_rows import SearchHit

MATCHES = ("exact", "prefix", "substring")


def search(reader: GraphReader, q: str, offset: int, limit: int) -> list[dict[str, Any]]:
    """The results ``offset`` to ``offset + limit`` (one more when there are more)."""
    wanted = offset + limit + 1
    ids = Identities(reader)
    hidden = Hidden(reader, ids)
    results: dict[str, dict[str, Any]] = {}
    fetch = wanted
    while True:
        rows = reader.search(q, fetch)
        canonical = ids.canonical(DatasetId(r.ns, r.name) for r in rows if r.kind != "job")
        gone = hidden.datasets_hidden(canonical.values())
        results.clear()
        for hit in rows:
            if not hidden.readable(hit.ns):  # a match on a name the reader may not see
                continue
            if (
                hidden.job(JobId(hit.ns, hit.name))
                if hit.kind == "job"
                else canonical[DatasetId(hit.ns, hit.name)] in gone
            ):
                continue
            result = _result(reader, canonical, hit)
            results.setdefault(result["node"]["id"], result)
        # Aliases of one node collapse into one result, hidden nodes are left out: fetch
        # more until enough remain.
        if len(results) >= wanted or len(rows) < fetch:
            break
        fetch *= 2
    ordered = list(results.values())
    return ordered[offset:wanted]


def _result(
    reader: GraphReader, canonical: dict[DatasetId, DatasetId], hit: SearchHit
) -> dict[str, Any]:
    if hit.kind == "job":
        job = JobId(hit.ns, hit.name)
        return {"node": job_node(job, job_kind(reader, job)), "match": MATCHES[hit.rank]}
    sent = DatasetId(hit.ns, hit.name)
    node = canonical[sent]
    result = {"node": dataset_node(node, hit.field), "match": MATCHES[hit.rank]}
    if node != sent:
        result["alias"] = {"namespace": hit.ns, "name": hit.name}
    return result
