"""What admins hid (docs/operations.md#hiding-datasets-jobs-and-namespaces), as one
request's reads see it.

The rules, over the projected ``hidden`` table (projector/admin.py writes it):
- a **job** (or service) is hidden when it was hidden, or its namespace was;
- a **dataset** node is hidden when any of its identities (the canonical one or an alias:
  symlinked identities are one node) was hidden by name, or when every one of its
  identities is in a hidden namespace — a warehouse table that a hidden scratch path is
  symlinked to stays visible in its own namespace;
- a **namespace** listing leaves out hidden namespaces.

Hidden nodes are left out of listings, search, lineage, column lineage, impact and the
export, and walks do not pass through them; a hidden root answers 404 saying so. The
delivery log's own views (deliveries, quarantine, raw events) are an audit trail and
show everything. Hides apply to ``asOf`` reads too: they are today's decision.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from embrasure.model import DatasetId, JobId
from embrasure.query.entities import Identities
from embrasure.store.base import GraphReader
from embrasure.store.rows import HiddenRow


class Members(Protocol):
    def members(self, canonical: Iterable[DatasetId]) -> dict[DatasetId, list[DatasetId]]: ...


class Hidden:
    """The hidden entities of one snapshot (a small table, read once per request)."""

    def __init__(self, reader: GraphReader, ids: Members) -> None:
        self.ids = ids
        self.rows: dict[tuple[str, str, str], HiddenRow] = {
            (r.kind, r.ns, r.name): r for r in reader.rows(HiddenRow) if r.hidden
        }
        self.namespaces = {ns for kind, ns, _ in self.rows if kind == "namespace"}
        self.datasets = {DatasetId(ns, n) for kind, ns, n in self.rows if kind == "dataset"}
        self.jobs = {JobId(ns, n) for kind, ns, n in self.rows if kind == "job"}

    @classmethod
    def of(cls, reader: GraphReader) -> Hidden:
        """Resolved by the served graph's identities (entities.Identities)."""
        return cls(reader, Identities(reader))

    def __bool__(self) -> bool:
        return bool(self.rows)

    def job(self, job: JobId) -> bool:
        return job in self.jobs or job.namespace in self.namespaces

    def datasets_hidden(self, nodes: Iterable[DatasetId]) -> set[DatasetId]:
        """The hidden ones of canonical dataset nodes (one read of their identities)."""
        if not self:
            return set()
        members = self.ids.members(set(nodes))
        return {
            node
            for node, ms in members.items()
            if any(m in self.datasets for m in ms)
            or all(m.namespace in self.namespaces for m in ms)
        }

    def dataset(self, node: DatasetId) -> bool:
        return bool(self.datasets_hidden([node]))

    def nodes_hidden(self, nodes: Iterable[DatasetId | JobId]) -> set[DatasetId | JobId]:
        nodes = list(nodes)
        out: set[DatasetId | JobId] = {n for n in nodes if isinstance(n, JobId) and self.job(n)}
        out |= self.datasets_hidden(n for n in nodes if isinstance(n, DatasetId))
        return out

    def why(self, node: DatasetId | JobId) -> str:
        """Which hide applies to a hidden node, in words: for its 404."""
        kind = "dataset" if isinstance(node, DatasetId) else "job"
        candidates: list[tuple[str, str, str]] = [(kind, node.namespace, node.name)]
        if isinstance(node, DatasetId):
            candidates += [("dataset", m.namespace, m.name) for m in self.ids.members([node])[node]]
        candidates.append(("namespace", node.namespace, ""))
        row = next((self.rows[c] for c in candidates if c in self.rows), None)
        if row is None:  # a dataset whose identities are all in hidden namespaces
            return f"{kind} {node.namespace} {node.name} is hidden: its namespaces are."
        what = (
            f"namespace {row.ns}" if row.kind == "namespace" else f"{row.kind} {row.ns} {row.name}"
        )
        by = f" by {row.by_token}" if row.by_token else ""
        reason = f" ({row.reason})" if row.reason else ""
        return (
            f"{kind} {node.namespace} {node.name} is hidden: {what} was hidden"
            f" at {row.at}{by}{reason}."
        )

    def entries(self) -> list[dict[str, Any]]:
        """What is hidden, for the admin listing, in (kind, namespace, name) order."""
        return [
            {
                "type": kind,
                "namespace": ns,
                "name": name if kind != "namespace" else None,
                "hidden_at": row.at,
                "by": row.by_token,
                "reason": row.reason,
            }
            for (kind, ns, name), row in sorted(self.rows.items())
        ]
