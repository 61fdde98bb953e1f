"""Dataset and job lineage (docs/queries.md ``GET /api/v1/lineage``): breadth-first walks over
the ``Graph`` (now) or the ``as_of.AsOfGraph`` (at an instant), one store query per frontier."""

from __future__ import annotations

import functools
from collections.abc import Collection
from typing import Any

from embrasure.model import DatasetId, JobId
from embrasure.query.entities import dataset_node, job_node, named_as_asked
from embrasure.query.graph import Graph, Hop
from embrasure.query.walk import Walk

Node = DatasetId | JobId


def lineage(
    graph: Graph,
    root: DatasetId | JobId,
    direction: str,
    depth: int,
    states: set[str] | None,
    limit: int,
) -> dict[str, Any]:
    """``GET /api/v1/lineage`` (docs/queries.md#lineage): the union of the upstream and
    downstream walks (``both``), each following edges in one direction, up to ``depth``
    edges. ``graph`` is the served graph (``Graph``) or the graph at an instant
    (``as_of.AsOfGraph``)."""
    asked = root
    if isinstance(root, DatasetId):
        root = graph.ids.canonical([root])[root]
    found: Walk[Node, Hop] = Walk(limit=limit)
    for walk in ("upstream", "downstream") if direction == "both" else (direction,):
        # ``both`` is the union of two complete walks sharing the node limit: a node the
        # upstream run found is still expanded by the downstream one.
        found.run([root], functools.partial(step, graph, walk=walk, states=states), depth)
    nodes = found.distance
    hops = {hop.key: hop for hop in found.edges}
    kept = graph.complete(h for h in hops.values() if h.job in nodes and h.dataset in nodes)
    graph.job_types(n for n in nodes if isinstance(n, JobId))
    placeholder = graph.hidden.placeholder()
    answer = {
        "root": _node(graph, root)["id"],
        "nodes": [_node(graph, n) for n in sorted(nodes, key=_sort_node)]
        + ([placeholder] if placeholder else []),
        "edges": graph.edge_json(kept),
        "truncated": found.truncated,
    }
    if isinstance(root, DatasetId) and isinstance(asked, DatasetId):
        return named_as_asked(answer, root, graph.shown_as(asked))
    return answer


def step(
    graph: Graph, frontier: Collection[Node], walk: str, states: set[str] | None
) -> list[tuple[Node, Hop, Node]]:
    """One breadth-first step: the edges leaving ``frontier`` in the walk's direction,
    each as (the node it leaves, the edge, the node it reaches); with ``states``, only
    edges whose latest run ended in one of them."""
    datasets = [n for n in frontier if isinstance(n, DatasetId)]
    jobs = [n for n in frontier if isinstance(n, JobId)]
    found = graph.hops(datasets, jobs, walk)
    if states is not None:
        edges = graph.complete(hop for hop, _ in found)
        last = graph.last_states(edges)
        wanted = {
            (e.job, e.dataset, e.direction, e.static)
            for i, e in enumerate(edges)
            if last[i] in states
        }
        found = [(hop, n) for hop, n in found if hop.key in wanted]
    if graph.hidden:  # a walk does not pass through a hidden node
        hidden = graph.hidden.nodes_hidden({n for _, n in found})
        for hop, n in found:
            if n in hidden and graph.hidden.outside(n):  # the placeholder's (hidden.py)
                graph.hidden.stop(
                    n, _node(graph, hop.dataset if isinstance(n, JobId) else hop.job)["id"]
                )
        found = [(hop, n) for hop, n in found if n not in hidden]
    return [(hop.dataset if isinstance(n, JobId) else hop.job, hop, n) for hop, n in found]


def _node(graph: Graph, node: Node) -> dict[str, Any]:
    if isinstance(node, DatasetId):
        return dataset_node(node)
    return job_node(node, graph.job_type(node))


def _sort_node(node: Node) -> tuple[int, str, str]:
    return (0 if isinstance(node, DatasetId) else 1, node.namespace, node.name)
