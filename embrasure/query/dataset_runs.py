"""``GET /api/v1/datasets/runs`` (docs/queries.md#what-each-run-did): the runs that read or
wrote a dataset, newest first, with what each sent about it — statistics, data-quality
assertions and, for a write, how the schema changed since the previous write.

Order: by the run's latest eventTime, then runId, then role (a run that read and wrote
the dataset is listed once per role), descending. Each identity of the dataset (its
aliases) and each role is one stream read from the run_io_ds index a page at a time;
the streams are merged here, so a page costs its own rows, not the dataset's history.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from embrasure.model import DatasetId
from embrasure.projector import quality
from embrasure.query.entities import ROLE_FACETS, ROLES, run_summary, used_facet_owners
from embrasure.query.facets import Owner, facets_of_groups
from embrasure.store.base import GraphReader
from embrasure.store.read_rows import RunUse
from embrasure.store.rows import RunRow

USE_ROLES = ("input", "output")  # the role= values
Cursor = tuple[str, str, str]  # run_key, run_id, direction: the last entry of a page
CHUNK = 100  # index rows read at a time from each stream (after its first read)
LOOKAHEAD = 4  # older writes read with the page, for the last write's schema_change
# How many earlier writes a write's schema_change looks through for one that carried a
# schema: a bound on a page's work when a producer sends schemas now and then.
SCHEMA_LOOKBACK = 1000


def _order(use: RunUse) -> Cursor:
    return (use.run_key, use.run_id, use.direction)


def _stream(
    reader: GraphReader, identity: DatasetId, direction: str, before: Cursor | None, first: int
) -> Iterator[RunUse]:
    """One identity's uses in one direction, read ``first`` rows, then CHUNK at a time."""
    cursor, size = before, first
    while True:
        key = (identity.namespace, identity.name)
        rows = reader.runs_of_dataset(key, direction, cursor, size)
        yield from rows
        if len(rows) < size:
            return
        cursor, size = _order(rows[-1]), CHUNK


def _version_rank(use: RunUse) -> tuple[bool, str, str]:
    return (use.version is not None, use.version_key or "", use.version or "")


def _uses(
    reader: GraphReader,
    members: list[DatasetId],
    directions: Iterable[str],
    before: Cursor | None,
    first: int = CHUNK,
) -> Iterator[RunUse]:
    """Every use of the dataset under any of its identities, in the listing's order,
    each (run, direction) once, with the version its latest event naming one named (a
    run's rows under two jobs or two aliases are adjacent in that order; two split by a
    read's chunk keep the first's version, a rare loss of a rare case)."""
    streams = [_stream(reader, m, d, before, first) for m in members for d in directions]
    held: RunUse | None = None
    for use in heapq.merge(*streams, key=_order, reverse=True):
        if held is not None and _order(use) == _order(held):
            if _version_rank(use) > _version_rank(held):
                held = use
            continue
        if held is not None:
            yield held
        held = use
    if held is not None:
        yield held


def dataset_runs(
    reader: GraphReader,
    members: list[DatasetId],
    role: str | None,
    before: Cursor | None,
    limit: int,
    shown: Callable[[RunRow], bool],
) -> tuple[list[dict[str, Any]], Cursor | None]:
    """A page of the dataset's runs (``members``: its identities, the canonical first)
    and the cursor of the next page (None on the last). ``shown`` filters out runs of
    hidden jobs."""
    directions = ["in", "out"] if role is None else [{"input": "in", "output": "out"}[role]]
    page, more = _shown_page(
        reader, _uses(reader, members, directions, before, limit + 2), limit, shown
    )
    # The writes just older than the page, whose schemas the page's last write is
    # compared with: read with the page's facets, in the same two queries.
    writes = [use for use, _row in page if use.direction == "out"]
    older = _uses(reader, members, ["out"], _order(writes[-1]), LOOKAHEAD) if writes else iter(())
    ahead = [u for _, u in zip(range(LOOKAHEAD), older, strict=False)]
    entries, schemas = _entries(reader, members, page, ahead)
    _schema_changes(reader, members, page, entries, schemas, older)
    cursor = _order(page[-1][0]) if more and page else None
    return entries, cursor


def writer_runs(
    reader: GraphReader,
    members: list[DatasetId],
    before: tuple[str, str] | None,
    limit: int,
    shown: Callable[[RunRow], bool],
) -> tuple[list[RunRow], tuple[str, str] | None]:
    """A page of the runs that wrote the dataset (``members``: its identities), newest
    first by (latest eventTime key, run id) like a job's runs, and the next page's
    cursor (None on the last): read along run_io's dataset index, a page at a time,
    however many times the dataset was written."""
    after = None if before is None else (*before, "out")
    uses = _uses(reader, members, ["out"], after, limit + 2)
    page, more = _shown_page(reader, uses, limit, shown)
    last = page[-1][1] if more and page else None
    return [row for _use, row in page], None if last is None else (last.latest_key, last.run_id)


def _shown_page(
    reader: GraphReader, uses: Iterator[RunUse], limit: int, shown: Callable[[RunRow], bool]
) -> tuple[list[tuple[RunUse, RunRow]], bool]:
    """Up to ``limit`` of ``uses`` whose runs are ``shown``, with their run rows, and
    whether more follow."""
    page: list[tuple[RunUse, RunRow]] = []
    while True:
        chunk = [u for _, u in zip(range(limit + 1), uses, strict=False)]
        if not chunk:
            return page, False
        rows = {r.run_id: r for r in reader.rows(RunRow, ("run_id",), [(u.run_id,) for u in chunk])}
        for use in chunk:
            row = rows.get(use.run_id)
            if row is None or not shown(row):
                continue
            if len(page) == limit:
                return page, True
            page.append((use, row))


def _entries(
    reader: GraphReader,
    members: list[DatasetId],
    page: list[tuple[RunUse, RunRow]],
    ahead: list[RunUse],
) -> tuple[list[dict[str, Any]], list[dict[str, str | None] | None]]:
    """The page's entries, and the schemas of the ``ahead`` writes."""
    groups: dict[tuple[int, str], list[Owner]] = {}
    for index, (use, _row) in enumerate(page):
        for owner, part in used_facet_owners(use.run_id, ROLES[use.direction], members).items():
            groups.setdefault((index, part), []).append(owner)
    for index, use in enumerate(ahead, start=len(page)):
        for owner, part in used_facet_owners(use.run_id, "output", members).items():
            if part == "facets":
                groups.setdefault((index, part), []).append(owner)
    facets = facets_of_groups(reader, groups)
    schemas = [
        schema_fields(facets[(index, "facets")].get("schema"))
        for index in range(len(page), len(page) + len(ahead))
    ]
    entries = []
    for index, (use, row) in enumerate(page):
        role = ROLES[use.direction]
        sent = facets[(index, "facets")]
        own = facets[(index, ROLE_FACETS[role])]
        entry = {
            **run_summary(row),
            "role": role,
            "facets": sent,
            ROLE_FACETS[role]: own,
            "statistics": statistics(role, own, sent),
            "assertions": quality.summary(quality.assertions_facet(own, sent)),
        }
        entry.pop("duration_s")
        if use.version is not None:
            entry["version"] = use.version
        entries.append(entry)
    return entries, schemas


# -- statistics ----------------------------------------------------------------------------

STATISTICS = ("rowCount", "size", "fileCount")


def statistics(role: str, own: dict[str, Any], sent: dict[str, Any]) -> dict[str, int]:
    """``{rowCount?, size?, fileCount?}`` of what the run wrote or read:
    OutputStatisticsOutputDatasetFacet (1-0-2) for a write; for a read,
    InputStatisticsInputDatasetFacet (1-0-0), else a DataQualityMetrics facet (1-0-3,
    which Spark sends for inputs: its ``bytes`` is the size), input facet first."""
    if role == "output":
        candidates = [(own.get("outputStatistics"), "size")]
    else:
        candidates = [
            (own.get("inputStatistics"), "size"),
            (own.get("dataQualityMetrics"), "bytes"),
            (sent.get("dataQualityMetrics"), "bytes"),
        ]
    for facet, size_key in candidates:
        if not isinstance(facet, dict) or facet.get("_deleted") is True:
            continue
        found = {}
        for name, key in zip(STATISTICS, ("rowCount", size_key, "fileCount"), strict=True):
            value = facet.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                found[name] = value
        if found:
            return found
    return {}


# -- schema changes --------------------------------------------------------------------------


def schema_fields(schema: Any) -> dict[str, str | None] | None:
    """A SchemaDatasetFacet's (1-2-0) fields, nested ones by dotted path ("a.b"), each
    with its type (None when it has none); None when the value is no schema."""
    if not isinstance(schema, dict) or not isinstance(schema.get("fields"), list):
        return None
    # A page's writes share one parsed value per distinct schema (facets_of_groups):
    # read its fields once. The last 64 are kept with their values (so an id is never
    # mistaken for a freed value's); never changed, so threads may share them.
    key = id(schema)
    cached = _SCHEMAS.get(key)
    if cached is not None and cached[0] is schema:
        return cached[1]
    fields = _fields_of(schema)
    if len(_SCHEMAS) > 64:
        _SCHEMAS.clear()
    _SCHEMAS[key] = (schema, fields)
    return fields


_SCHEMAS: dict[int, tuple[Any, dict[str, str | None]]] = {}


def _fields_of(schema: dict[str, Any]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}

    def walk(fields: list[Any], prefix: str) -> None:
        for f in fields:
            if not isinstance(f, dict) or not isinstance(f.get("name"), str):
                continue
            path = prefix + f["name"]
            out[path] = f["type"] if isinstance(f.get("type"), str) else None
            if isinstance(f.get("fields"), list):
                walk(f["fields"], path + ".")

    walk(schema["fields"], "")
    return out


def schema_change(
    before: dict[str, str | None], after: dict[str, str | None]
) -> dict[str, Any] | None:
    """``{added, removed, changed}`` from one write's schema to the next; None when
    nothing changed. Fields as ``{name, type?}``, in schema order."""

    def field(name: str, type_: str | None) -> dict[str, Any]:
        return {"name": name} if type_ is None else {"name": name, "type": type_}

    added = [field(n, t) for n, t in after.items() if n not in before]
    removed = [field(n, t) for n, t in before.items() if n not in after]
    changed = [
        {"name": n, "from": before[n], "to": t}
        for n, t in after.items()
        if n in before and before[n] != t
    ]
    if not (added or removed or changed):
        return None
    return {"added": added, "removed": removed, "changed": changed}


def _schema_changes(
    reader: GraphReader,
    members: list[DatasetId],
    page: list[tuple[RunUse, RunRow]],
    entries: list[dict[str, Any]],
    ahead: list[dict[str, str | None] | None],
    older: Iterator[RunUse],
) -> None:
    """Set each write's ``schema_change`` against the previous write (the next older
    output in the listing's order, shown or not) that carried a schema. ``ahead``: the
    schemas of the writes just older than the page; ``older``: the writes after those."""
    writes = [i for i, (use, _row) in enumerate(page) if use.direction == "out"]
    if not writes:
        return
    previous = next((s for s in ahead if s is not None), None)
    looked = len(ahead)
    while previous is None and looked < SCHEMA_LOOKBACK and len(ahead) == LOOKAHEAD:
        chunk = [u for _, u in zip(range(CHUNK), older, strict=False)]
        if not chunk:
            break
        looked += len(chunk)
        groups = {
            index: [
                o
                for o, part in used_facet_owners(u.run_id, "output", members).items()
                if part == "facets"
            ]
            for index, u in enumerate(chunk)
        }
        found = facets_of_groups(reader, groups, names=["schema"])
        for index in range(len(chunk)):
            previous = schema_fields(found[index].get("schema"))
            if previous is not None:
                break
    for position in range(len(writes) - 1, -1, -1):
        current = schema_fields(entries[writes[position]]["facets"].get("schema"))
        if current is None:
            continue
        if previous is not None:
            change = schema_change(previous, current)
            if change is not None:
                entries[writes[position]]["schema_change"] = change
        previous = current
