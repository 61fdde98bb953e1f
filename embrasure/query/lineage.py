"""Dataset and job lineage (DESIGN §5 ``GET /api/v1/lineage``): breadth-first walks over
the ``Graph`` (now) or the ``as_of.AsOfGraph`` (at an instant), one store query per frontier."""

from __future__ import annotations

from typing import Any

from embrasure.model import DatasetId, JobId
from embrasure.query.entities import dataset_node, job_node
from embrasure.query.graph import Graph, Hop


def lineage(
    graph: Graph,
    root: DatasetId | JobId,
    direction: str,
    depth: int,
    states: set[str] | None,
    limit: int,
) -> dict[str, Any]:
    """DESIGN §5 ``GET /api/v1/lineage``: the union of the upstream and downstream walks
    (``both``), each following edges in one direction, up to ``depth`` edges. ``graph`` is
    the served graph (``Graph``) or the graph at an instant (``as_of.AsOfGraph``)."""
    if isinstance(root, DatasetId):
        root = graph.ids.canonical([root])[root]
    nodes: dict[DatasetId | JobId, int] = {root: 0}
    hops: dict[tuple[JobId, DatasetId, str, bool], Hop] = {}
    truncated = False
    for walk in ("upstream", "downstream") if direction == "both" else (direction,):
        # Each walk has its own visited set: ``both`` is the union of two complete walks,
        # so a node the upstream walk found is still expanded by the downstream one.
        seen: set[DatasetId | JobId] = {root}
        frontier: set[DatasetId | JobId] = {root}
        for distance in range(1, depth + 1):
            found = step(graph, frontier, walk, states)
            frontier = set()
            for hop, neighbour in found:
                if neighbour not in nodes:
                    if len(nodes) >= limit:
                        truncated = True
                        continue
                    nodes[neighbour] = distance
                nodes[neighbour] = min(nodes[neighbour], distance)
                hops[hop.key] = hop
                if neighbour not in seen:
                    seen.add(neighbour)
                    frontier.add(neighbour)
            if not frontier:
                break
    kept = graph.complete(h for h in hops.values() if h.job in nodes and h.dataset in nodes)
    graph.job_types(n for n in nodes if isinstance(n, JobId))
    return {
        "root": _node(graph, root)["id"],
        "nodes": [_node(graph, n) for n in sorted(nodes, key=_sort_node)],
        "edges": graph.edge_json(kept),
        "truncated": truncated,
    }


def step(
    graph: Graph, frontier: set[DatasetId | JobId], walk: str, states: set[str] | None
) -> list[tuple[Hop, DatasetId | JobId]]:
    """One breadth-first step: the edges leaving ``frontier`` in the walk's direction,
    each with the node it reaches; with ``states``, only edges whose latest run ended in
    one of them."""
    datasets = [n for n in frontier if isinstance(n, DatasetId)]
    jobs = [n for n in frontier if isinstance(n, JobId)]
    found = graph.hops(datasets, jobs, walk)
    if graph.hidden:  # a walk does not pass through a hidden node
        hidden = graph.hidden.nodes_hidden({n for _, n in found})
        found = [(hop, n) for hop, n in found if n not in hidden]
    if states is None:
        return found
    edges = graph.complete(hop for hop, _ in found)
    last = graph.last_states(edges)
    wanted = {
        (e.job, e.dataset, e.direction, e.static) for i, e in enumerate(edges) if last[i] in states
    }
    return [(hop, n) for hop, n in found if hop.key in wanted]


def _node(graph: Graph, node: DatasetId | JobId) -> dict[str, Any]:
    if isinstance(node, DatasetId):
        return dataset_node(node)
    return job_node(node, graph.job_type(node))


def _sort_node(node: DatasetId | JobId) -> tuple[int, str, str]:
    return (0 if isinstance(node, DatasetId) else 1, node.namespace, node.name)
