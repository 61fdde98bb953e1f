"""The same questions asked of Embrasure and of Marquez, each in its own API's words.

Each server gets one adapter (``EmbrasureApi``, ``MarquezApi``) that spells a question as
a request (path and query parameters), reads the answer's size (nodes, edges, runs), and
reads back the whole served graph as a ``Snapshot`` for the order comparison
(bench/peers/order_compare.py): Embrasure's from ``GET /api/v1/export``, Marquez's from
its namespaces, each namespace's datasets and jobs (a job's current inputs and outputs are
the edges its lineage graph draws) and each job's runs.

Node keys are ``(kind, namespace, name)`` with kind ``dataset`` or ``job`` (Embrasure's
``service`` counts as a job: Marquez has no such kind).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Protocol
from urllib.parse import quote, unquote

import httpx
import orjson

Node = tuple[str, str, str]
Edge = tuple[Node, Node]
JSON = {"content-type": "application/json"}
PAGE = 1000
# Marquez's run states, in OpenLineage's eventType words (Embrasure answers in those).
MARQUEZ_STATES = {
    "NEW": "NEW",
    "RUNNING": "RUNNING",
    "COMPLETED": "COMPLETE",
    "FAILED": "FAIL",
    "ABORTED": "ABORT",
}


@dataclasses.dataclass(frozen=True)
class Ask:
    """One GET: its path and query parameters."""

    path: str
    params: dict[str, str]


@dataclasses.dataclass(frozen=True)
class Size:
    nodes: int | None = None
    edges: int | None = None
    runs: int | None = None


@dataclasses.dataclass
class Snapshot:
    """What a server serves: its nodes, its dataset ↔ job edges, each run's state."""

    nodes: set[Node]
    edges: set[Edge]
    runs: dict[str, str | None]
    requests: int = 0
    digest: str | None = None  # SHA-256 of Embrasure's canonical export


class PeerApi(Protocol):
    kind: str

    def lineage(self, namespace: str, name: str, depth: int) -> Ask: ...
    def column_lineage(self, namespace: str, name: str, field: str, depth: int) -> Ask: ...
    def job_runs(self, namespace: str, name: str) -> Ask: ...
    def size(self, answer: Any) -> Size: ...
    def shows_writer(self, answer: Any, job: tuple[str, str]) -> bool: ...
    def snapshot(self, client: httpx.Client) -> Snapshot: ...


# -- Embrasure ------------------------------------------------------------------------------


def embrasure_node(node_id: str) -> Node:
    """``dataset:{ns}:{name}`` (docs/queries.md#conventions: ':' and '%' in the name are
    percent-encoded, so the id splits from the right)."""
    kind, _, rest = node_id.partition(":")
    namespace, _, name = rest.rpartition(":")
    return ("job" if kind in ("job", "service") else kind, namespace, unquote(name))


class EmbrasureApi:
    kind = "embrasure"
    # The whole neighbourhood: Marquez's lineage has no node limit, Embrasure's default
    # is 500 nodes (10,000 at most).
    LIMIT = "10000"

    def lineage(self, namespace: str, name: str, depth: int) -> Ask:
        params = {"type": "dataset", "namespace": namespace, "name": name}
        params |= {"direction": "both", "depth": str(depth), "limit": self.LIMIT}
        return Ask("/api/v1/lineage", params)

    def column_lineage(self, namespace: str, name: str, field: str, depth: int) -> Ask:
        params = {"namespace": namespace, "name": name, "field": field, "direction": "both"}
        params |= {"depth": str(depth), "limit": self.LIMIT}
        return Ask("/api/v1/column-lineage", params)

    def job_runs(self, namespace: str, name: str) -> Ask:
        return Ask("/api/v1/runs", {"namespace": namespace, "name": name})

    def size(self, answer: Any) -> Size:
        if "runs" in answer:
            return Size(runs=len(answer["runs"]))
        return Size(nodes=len(answer["nodes"]), edges=len(answer["edges"]))

    def shows_writer(self, answer: Any, job: tuple[str, str]) -> bool:
        wanted = ("job", *job)
        return any(embrasure_node(e["source"]) == wanted for e in answer.get("edges", ()))

    def snapshot(self, client: httpx.Client) -> Snapshot:
        response = client.get("/api/v1/export", timeout=600)
        response.raise_for_status()
        doc = orjson.loads(response.content)
        nodes = {("dataset", d["namespace"], d["name"]) for d in doc["datasets"]}
        nodes |= {("job", j["namespace"], j["name"]) for j in doc["jobs"]}
        edges = {(embrasure_node(e["source"]), embrasure_node(e["target"])) for e in doc["edges"]}
        runs = {r["runId"]: r["state"] for r in doc["runs"]}
        return Snapshot(nodes, edges, runs, 1, hashlib.sha256(response.content).hexdigest())


# -- Marquez --------------------------------------------------------------------------------


def marquez_node(node_id: str) -> Node:
    """``dataset:{ns}:{name}`` / ``job:{ns}:{name}`` as Marquez writes them (the
    namespace's own colons are those of a URI scheme or a port, which its parser skips:
    ``NodeId.parts``)."""
    kind, _, rest = node_id.partition(":")
    namespace, name = _split_marquez(rest)
    return (kind, namespace, name)


def _split_marquez(rest: str) -> tuple[str, str]:
    at = 0
    while True:
        at = rest.find(":", at)
        if at < 0:
            return rest, ""
        after = rest[at + 1 :]
        if not (after.startswith("//") or after[:1].isdigit()):
            return rest[:at], after
        at += 1


def segment(text: str) -> str:
    """One path segment: namespaces hold '/' and ':' (``s3://bucket``)."""
    return quote(text, safe="")


class MarquezApi:
    kind = "marquez"

    def lineage(self, namespace: str, name: str, depth: int) -> Ask:
        params = {"nodeId": f"dataset:{namespace}:{name}", "depth": str(depth)}
        return Ask("/api/v1/lineage", params)

    def column_lineage(self, namespace: str, name: str, field: str, depth: int) -> Ask:
        node = f"datasetField:{namespace}:{name}:{field}"
        params = {"nodeId": node, "depth": str(depth), "withDownstream": "true"}
        return Ask("/api/v1/column-lineage", params)

    def job_runs(self, namespace: str, name: str) -> Ask:
        return Ask(f"/api/v1/namespaces/{segment(namespace)}/jobs/{segment(name)}/runs", {})

    def size(self, answer: Any) -> Size:
        if "runs" in answer:
            return Size(runs=len(answer["runs"]))
        graph = answer["graph"]
        return Size(nodes=len(graph), edges=sum(len(n.get("outEdges", ())) for n in graph))

    def shows_writer(self, answer: Any, job: tuple[str, str]) -> bool:
        # Marquez names a job whose run has a ParentRunFacet "{parent job}.{job}".
        for n in answer.get("graph", ()):
            if n.get("type") != "JOB":
                continue
            _, namespace, name = marquez_node(n["id"])
            if namespace == job[0] and (name == job[1] or name.endswith("." + job[1])):
                return True
        return False

    def snapshot(self, client: httpx.Client) -> Snapshot:
        snap = Snapshot(set(), set(), {})
        for ns in self._pages(client, snap, "/api/v1/namespaces", "namespaces"):
            base = f"/api/v1/namespaces/{segment(ns['name'])}"
            for d in self._pages(client, snap, base + "/datasets", "datasets"):
                snap.nodes.add(("dataset", d["id"]["namespace"], d["id"]["name"]))
            for j in self._pages(client, snap, base + "/jobs", "jobs"):
                job: Node = ("job", j["id"]["namespace"], j["id"]["name"])
                snap.nodes.add(job)
                for d in j.get("inputs") or ():
                    snap.edges.add((("dataset", d["namespace"], d["name"]), job))
                for d in j.get("outputs") or ():
                    snap.edges.add((job, ("dataset", d["namespace"], d["name"])))
                runs_path = f"/api/v1/namespaces/{segment(job[1])}/jobs/{segment(job[2])}/runs"
                for r in self._pages(client, snap, runs_path, "runs"):
                    snap.runs[r["id"]] = MARQUEZ_STATES.get(r.get("state"), r.get("state"))
        return snap

    @staticmethod
    def _pages(client: httpx.Client, snap: Snapshot, path: str, key: str) -> list[Any]:
        """Every item of a Marquez listing (``limit`` and ``offset``)."""
        items: list[Any] = []
        while True:
            response = client.get(path, params={"limit": PAGE, "offset": len(items)})
            snap.requests += 1
            response.raise_for_status()
            page = response.json()[key]
            items.extend(page)
            if len(page) < PAGE:
                return items


def api_of(kind: str) -> PeerApi:
    return EmbrasureApi() if kind == "embrasure" else MarquezApi()
