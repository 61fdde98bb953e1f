"""An event's shape: what it contributes apart from its run, time and identity.

A shape is a function of the job and dataset content alone (``EventFacts.shape``, the
same bytes in every run of a job), so it is read once per distinct content and named
by a content key (docs/projection.md#history-written-on-change): the ``shapes`` row,
the ``io_sets`` and ``facet_sets`` it names, and the rows its events contribute
(``graph_rows.ShapeUse`` folds them once per batch).
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import orjson

from embrasure.model import JOB_EVENT, RUN_EVENT, EventFacts
from embrasure.projector import column_lineage, quality
from embrasure.projector import facets as facet_rules
from embrasure.projector.canonical import canonical_json
from embrasure.projector.column_lineage import ColumnEdge
from embrasure.projector.symlinks import Link, links_of
from embrasure.store.rows import SEP, ShapeRow

EdgeKey = tuple[str, str, str, str, str, int]  # job ns, name, ds ns, name, direction, static
ColumnKey = tuple[str, str, str, str, str, str, str, str, str]


def entity(kind: str, *parts: str) -> str:
    """A facet owner's key: ``job``/``dataset``/``run``/… then its identity's parts."""
    return SEP.join((kind, *parts))


def run_entity(run_id: str, role: str, ds_ns: str, ds_name: str) -> str:
    """The key of a run's own facets of a dataset it used (``role``: ``input`` or
    ``output``, its inputFacets / outputFacets). It starts with the run's own key
    (``entity("run", run_id)``), so all of a run's facet rows are one range of the
    facets key and --retain-runs deletes them in one statement (store/run_retention.py)."""
    return SEP.join(("run", run_id, role, ds_ns, ds_name))


def sent_entity(role: str, ds_ns: str, ds_name: str) -> str:
    """The owner, in a shape's facet set, of the dataset facets its events send about a
    dataset in ``role`` (``input``/``output``): what each run of the shape sent about it
    is read from the run's events and their shapes' sets (query/facets.py), not kept
    per run (docs/projection.md#what-each-run-did)."""
    return SEP.join((f"{role}_dataset", ds_ns, ds_name))


# owner, name, canonical JSON, its value_hash, the value, whether it is a deletion marker
FacetRecordRow = tuple[str, str, bytes, bytes, Any, bool]


class Shape(NamedTuple):
    """What an event contributes apart from its run, time and identity: a function of
    the job and dataset content alone (``EventFacts.shape``), so computed once per shape."""

    datasets: tuple[tuple[str, str], ...]
    fields: tuple[tuple[str, str, str], ...]  # (ns, name, field): search finds fields
    links: tuple[Link, ...]
    job_flags: tuple[int, int, int]
    edges: tuple[EdgeKey, ...]  # io_sets under ``row.io_key`` (None: no edges)
    # A run_io key but for its run (job ns, name, ds ns, name, direction), and the version
    run_io: tuple[tuple[tuple[str, str, str, str, str], str | None], ...]
    facets: tuple[FacetRecordRow, ...]  # job and dataset facets
    history: tuple[FacetRecordRow, ...]  # facet_sets under ``row.facets_key``: one per name
    row: ShapeRow
    columns: tuple[tuple[ColumnKey, ColumnEdge], ...]
    # The data-quality checks its datasets' own facets hold (quality.checks_of): those of
    # every event of the shape whose inputs and outputs send no facets of their own.
    checks: tuple[tuple[quality.CheckKey, bytes, int], ...]


SHAPES_REMEMBERED = 4096
_shapes: dict[bytes, Shape] = {}


def shape_of(facts: EventFacts) -> Shape:
    if not facts.shape:
        return _read_shape(facts)
    shape = _shapes.get(facts.shape)
    if shape is None:
        if len(_shapes) >= SHAPES_REMEMBERED:
            _shapes.clear()
        shape = _shapes[facts.shape] = _read_shape(facts)
    return shape


def set_key(members: Any) -> bytes:
    """The key of a content-addressed set or shape (BLAKE2b-128 of its members' JSON,
    bytes as hex): equal content, equal key, whichever event or run names it."""
    return hashlib.blake2b(orjson.dumps(members, default=_hex), digest_size=16).digest()


def _hex(value: bytes) -> str:
    return value.hex()


def facet_records(owner: str, values: dict[str, Any], honour_deleted: bool) -> list[FacetRecordRow]:
    """Every value with its hash: the facets row and facet_values key it by it."""
    records = []
    for name, value in values.items():
        canonical = canonical_json(value)
        deletion = honour_deleted and facet_rules.is_deletion(value)
        digest = facet_rules.value_hash(canonical)
        records.append((owner, name, canonical, digest, value, deletion))
    return records


# The job and dataset facets whose history asOf reads (query/as_of.py: a job's kind at
# the instant): the graph keeps what it serves, and a reader of another facet's history
# would bump GRAPH_VERSION and rebuild it from the log
# (docs/projection.md#history-written-on-change). A shape's set holds these and what its
# runs send about their inputs and outputs (``sent_entity``).
HISTORY_FACETS = frozenset({"jobType"})


def _one_per_name(records: list[FacetRecordRow]) -> tuple[FacetRecordRow, ...]:
    """One record per (owner, name): an event naming one dataset twice in one role still
    writes one set row per facet — a deletion marker before a value (the facet rule lets
    a marker take back a value of the same eventTime: facets.FacetSlot), the larger value
    hash among equals (the rule's tie-break)."""
    best: dict[tuple[str, str], FacetRecordRow] = {}
    for record in records:
        key = (record[0], record[1])
        old = best.get(key)
        if old is None or (record[5], record[3]) > (old[5], old[3]):
            best[key] = record
    return tuple(best.values())


def _schema_fields(facets: dict[str, Any]) -> list[str]:
    """Top-level field names of a SchemaDatasetFacet (1-1-1 ``fields[].name``)."""
    schema = facets.get("schema")
    if not isinstance(schema, dict) or facet_rules.is_deletion(schema):
        return []
    fields = schema.get("fields")
    if not isinstance(fields, list):
        return []
    return [
        f["name"]
        for f in fields
        if isinstance(f, dict) and isinstance(f.get("name"), str) and f["name"]
    ]


def _read_shape(facts: EventFacts) -> Shape:
    job = facts.job
    datasets: dict[tuple[str, str], None] = {}
    links: dict[Link, None] = {}
    for ds in facts.datasets:
        datasets[(ds.id.namespace, ds.id.name)] = None
        previous = ds.lifecycle.previous if ds.lifecycle else None
        if ds.lifecycle is not None and ds.lifecycle.state != "RENAME":
            previous = None
        for link in links_of(ds.id, ds.symlinks, previous):
            links[link] = None
            if link.kind in ("TABLE", "RENAME"):
                for end in (link.a, link.b):
                    datasets[(end.namespace, end.name)] = None
    has_outputs = any(ds.role == "output" for ds in facts.datasets)
    job_flags = (
        int(facts.kind == RUN_EVENT),
        int(facts.kind == JOB_EVENT and has_outputs),
        int(facts.kind == JOB_EVENT and not has_outputs),
    )
    static = int(facts.kind == JOB_EVENT)
    used = [ds for ds in facts.datasets if ds.role in ("input", "output")]
    direction = {"input": "in", "output": "out"}
    edges: tuple[EdgeKey, ...] = ()
    if job is not None:
        edges = tuple(
            dict.fromkeys(
                (job.namespace, job.name, ds.id.namespace, ds.id.name, direction[ds.role], static)
                for ds in used
            )
        )
    facets: list[FacetRecordRow] = []
    if job is not None:
        facets += facet_records(entity("job", job.namespace, job.name), facts.job_facets, True)
    # The dataset facets each run of the shape sends about its inputs and outputs
    # (docs/projection.md#what-each-run-did): in the shape's set, written once per shape
    # instead of a facets row a run, dataset and name (11-15% of projection's CPU).
    sent: list[FacetRecordRow] = []
    for ds in facts.datasets:
        records = facet_records(entity("dataset", ds.id.namespace, ds.id.name), ds.facets, True)
        facets += records
        if facts.kind == RUN_EVENT and ds.role in ("input", "output"):
            owner = sent_entity(ds.role, ds.id.namespace, ds.id.name)
            sent += [(owner, *r[1:]) for r in records]
    # Rows are keyed by the identities as sent and by derived-or-declared; aliases
    # resolve, and declared edges win over SQL-derived ones, when read.
    job_ns, job_name = (job.namespace, job.name) if job else ("", "")
    columns: dict[ColumnKey, ColumnEdge] = {}
    for fact in facts.columns:
        key: ColumnKey = (
            fact.target.namespace,
            fact.target.name,
            fact.target_field,
            fact.source.namespace,
            fact.source.name,
            fact.source_field,
            job_ns,
            job_name,
            fact.derived or "",
        )
        edge = column_lineage.edge_of(job, fact)
        old = columns.get(key)
        columns[key] = edge if old is None else column_lineage.merge_edges(old, edge)
    fields = {
        (ds.id.namespace, ds.id.name, f) for ds in facts.datasets for f in _schema_fields(ds.facets)
    }
    for fact in facts.columns:
        fields.add((fact.target.namespace, fact.target.name, fact.target_field))
        fields.add((fact.source.namespace, fact.source.name, fact.source_field))
    io_key = set_key(sorted(edges)) if edges else None
    # Sorted: a set's key must not depend on the order the event listed its datasets in.
    kept = [r for r in facets if r[1] in HISTORY_FACETS] + sent
    history = tuple(sorted(_one_per_name(kept), key=lambda r: (r[0], r[1])))
    facets_key = set_key([(r[0], r[1], r[3]) for r in history]) if history else None
    job_ns_or_none, job_name_or_none = (job.namespace, job.name) if job else (None, None)
    members = (facts.kind, job_ns_or_none, job_name_or_none, io_key, facets_key)
    # The identities and fields too: a stored shape stands for them (apply skips them),
    # and one facet set can come with others — a dataset named twice with two schemas
    # keeps one value per name in its set, yet names the fields of both.
    identities = sorted(datasets), sorted(fields)
    # And every job and dataset facet value: a shape's facets and column edges are
    # folded once per batch (graph_rows), so two events whose facets differ outside the
    # history (HISTORY_FACETS) are two shapes all the same.
    values = sorted((r[0], r[1], r[3]) for r in facets)
    shape_key = set_key((members, identities, values))
    return Shape(
        tuple(datasets),
        tuple(identities[1]),
        tuple(links),
        job_flags,
        edges,
        tuple(
            ((job_ns, job_name, ds.id.namespace, ds.id.name, direction[ds.role]), ds.version)
            for ds in used
        ),
        tuple(facets),
        history,
        ShapeRow(shape_key, *members),
        tuple(columns.items()),
        quality.checks_of(facts.datasets, own=False),
    )
