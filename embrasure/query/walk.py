"""One breadth-first walk for the read side: dataset lineage, column lineage and impact.

A walk leaves its start nodes and crosses, one frontier at a time, the edges its ``step``
returns. The step gets the whole frontier, so one store read serves every node of it (a
query per frontier, not one per node: bench/query.py). ``Walk`` keeps what the callers
need, over one run or several (lineage's ``both`` is an upstream and a downstream run):
every node kept with its distance, every edge crossed, and whether a limit cut it short.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

N = TypeVar("N", bound=Hashable)  # a node
E = TypeVar("E")  # an edge, as the caller's step returns it

# A frontier → the edges leaving it, in the order they are to be crossed, each as
# (the frontier node it leaves, the edge, the node it reaches).
Step = Callable[[list[N]], Iterable[tuple[N, E, N]]]
# (node left, edge, node reached for the first time, its distance) → keep it?
Admit = Callable[[N, E, N, int], bool]


@dataclasses.dataclass(eq=False)
class Walk(Generic[N, E]):
    """What breadth-first runs found. A node is kept when first reached, unless ``limit``
    nodes are kept already (``truncated``) or ``admit`` refuses it; a refused node may be
    offered again from another edge. ``admit`` sees each kept node once, with the node it
    is first reached from — its parent on one shortest path — so a caller that wants
    paths builds each node's from its parent's there."""

    limit: int | None = None
    admit: Admit[N, E] | None = None
    distance: dict[N, int] = dataclasses.field(default_factory=dict)  # edges from a start
    edges: list[E] = dataclasses.field(default_factory=list)  # crossed to kept nodes, in order
    truncated: bool = False

    def run(self, starts: Iterable[N], step: Step[N, E], depth: int) -> None:
        """Walk from ``starts`` up to ``depth`` edges. Each run has its own visited set: a
        node kept by an earlier run is expanded again by this one, at its own distance."""
        frontier = list(dict.fromkeys(starts))
        for start in frontier:
            self.distance.setdefault(start, 0)
        seen = set(frontier)
        for distance in range(1, depth + 1):
            reached: list[N] = []
            for origin, edge, node in step(frontier):
                known = self.distance.get(node)
                if known is None:
                    if not self._keep(origin, edge, node, distance):
                        continue
                elif distance < known:  # reached sooner by this run than by an earlier one
                    self.distance[node] = distance
                self.edges.append(edge)
                if node not in seen:
                    seen.add(node)
                    reached.append(node)
            frontier = reached
            if not frontier:
                break

    def _keep(self, origin: N, edge: E, node: N, distance: int) -> bool:
        if self.limit is not None and len(self.distance) >= self.limit:
            self.truncated = True
            return False
        if self.admit is not None and not self.admit(origin, edge, node, distance):
            return False
        self.distance[node] = distance
        return True
