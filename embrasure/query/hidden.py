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
show everything (to readers of every namespace: docs/security.md#grants). Hides apply
to ``asOf`` reads too: they are today's decision.

The reader's grants (docs/security.md#what-a-reader-sees) hide the same way, by the
same calls, for the request at hand (access/grants.py ``READING``):
- a **job** or **namespace** outside the namespaces the reader may read is hidden;
- a **dataset** node is hidden when its canonical identity's namespace is: the node is
  shown under that name. A shown node's aliases outside the grants, and every other
  name of them a shown object holds (a run's inputs, a parent job, the structured
  facets), are left out where those are built (entities.py, facets.py, the Marquez
  port), by ``grants.may_read``;
- a root outside them is "not known in the namespaces you may read", whether or not it
  exists, so a 404 does not tell a reader what exists where it may not look;
- walks stop at them: ``outside`` tells a walk which of the nodes it stopped at are
  hidden from this reader rather than hidden by an admin, for the placeholder node
  (query/lineage.py).
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Iterable
from typing import Any, Protocol

from embrasure.access.grants import READING
from embrasure.model import DatasetId, JobId
from embrasure.query.entities import Identities
from embrasure.store.base import GraphReader
from embrasure.store.rows import DatasetRow, HiddenRow, JobRow

PLACEHOLDER_ID = "hidden:"  # no node id is this: every other starts with its type


class Members(Protocol):
    def members(self, canonical: Iterable[DatasetId]) -> dict[DatasetId, list[DatasetId]]: ...


class Hidden:
    """The hidden entities of one snapshot (a small table, read once per request), and
    what the request's reader may not read."""

    def __init__(self, reader: GraphReader, ids: Members) -> None:
        self.reader = reader
        self.ids = ids
        self.grants = READING.get()  # None: the reader may read every namespace
        self.rows: dict[tuple[str, str, str], HiddenRow] = {
            (r.kind, r.ns, r.name): r for r in reader.rows(HiddenRow) if r.hidden
        }
        self.hidden_namespaces = {ns for kind, ns, _ in self.rows if kind == "namespace"}
        self.datasets = {DatasetId(ns, n) for kind, ns, n in self.rows if kind == "dataset"}
        self.jobs = {JobId(ns, n) for kind, ns, n in self.rows if kind == "job"}
        # What walks stopped at for this reader's grants: node → the shown nodes next to it.
        self.stopped: dict[Hashable, set[str]] = {}

    @classmethod
    def of(cls, reader: GraphReader) -> Hidden:
        """Resolved by the served graph's identities (entities.Identities)."""
        return cls(reader, Identities(reader))

    def __bool__(self) -> bool:
        return bool(self.rows) or self.grants is not None

    @functools.cached_property
    def namespaces(self) -> set[str]:
        """The namespaces listings leave out: the hidden ones, and those of the graph
        the reader may not read (listed only for a reader with narrow grants)."""
        if self.grants is None:
            return self.hidden_namespaces
        known = {ns for (ns,) in self.reader.distinct(DatasetRow, ("ns",))}
        known |= {ns for (ns,) in self.reader.distinct(JobRow, ("ns",))}
        return self.hidden_namespaces | {ns for ns in known if not self.grants.allows(ns)}

    def readable(self, namespace: str) -> bool:
        return self.grants is None or self.grants.allows(namespace)

    def may_name(self, namespace: str) -> bool:
        """Whether an answer may name an identity in ``namespace``: readable, not hidden."""
        return namespace not in self.hidden_namespaces and self.readable(namespace)

    def outside(self, node: DatasetId | JobId) -> bool:
        """Whether a (canonical) node is hidden from this reader by its grants."""
        return not self.readable(node.namespace)

    def job(self, job: JobId) -> bool:
        return job in self.jobs or job.namespace in self.hidden_namespaces or self.outside(job)

    def datasets_hidden(self, nodes: Iterable[DatasetId]) -> set[DatasetId]:
        """The hidden ones of canonical dataset nodes (one read of their identities)."""
        if not self:
            return set()
        nodes = set(nodes)
        out = {node for node in nodes if self.outside(node)}
        if self.rows:
            members = self.ids.members(nodes - out)
            out |= {
                node
                for node, ms in members.items()
                if any(m in self.datasets for m in ms)
                or all(m.namespace in self.hidden_namespaces for m in ms)
            }
        return out

    def dataset(self, node: DatasetId) -> bool:
        return bool(self.datasets_hidden([node]))

    def nodes_hidden(self, nodes: Iterable[DatasetId | JobId]) -> set[DatasetId | JobId]:
        nodes = list(nodes)
        out: set[DatasetId | JobId] = {n for n in nodes if isinstance(n, JobId) and self.job(n)}
        out |= self.datasets_hidden(n for n in nodes if isinstance(n, DatasetId))
        return out

    def stop(self, node: Hashable, next_to: str) -> None:
        """A walk stopped at ``node`` (outside the reader's grants), met from the shown
        node whose id is ``next_to``."""
        self.stopped.setdefault(node, set()).add(next_to)

    def placeholder(self) -> dict[str, Any] | None:
        """The one node standing for everything the walks stopped at, or None: how
        many there were and the shown nodes next to them (what the UI draws it beside),
        never their names."""
        if not self.stopped:
            return None
        count = len(self.stopped)
        return {
            "id": PLACEHOLDER_ID,
            "type": "hidden",
            "namespace": "",
            "name": f"hidden: {count} node{'s' if count != 1 else ''} in namespaces"
            " you cannot read",
            "count": count,
            "next_to": sorted(set().union(*self.stopped.values())),
        }

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


def unreadable(kind: str, asked: DatasetId | JobId) -> str:
    """The 404 of a root outside the reader's grants, in the words of one that is not
    there: it must not tell the reader whether it exists (OWASP API1, BOLA)."""
    return f"No {kind} {asked.namespace} {asked.name} is known in the namespaces you may read."
