"""One event → its facts, or the reason it is quarantined: the projector's table of contents.

``project_event`` runs the per-event stages in this order (each pure: no I/O, no store):

1. identity     — event_id = SHA-256 of the canonical JSON of the event as received
                  (canonical.py, docs/architecture.md#event-identity)
2. shape        — the item is a JSON object
3. kind         — run → RunEvent, else job → JobEvent, else DatasetEvent (validate.py)
4. job, run     — job.namespace/name required strings; a RunEvent's run.runId a UUID
5. eventTime    — RFC 3339 / ISO 8601, to UTC; none → unknown time (times.py)
6. eventType    — START…OTHER; unknown strings kept and read as OTHER
7. facets       — run and job facets checked against their schemas: a standard facet
                  that breaks its schema is dropped with a warning (facet_schemas.py)
8. datasets     — inputs/outputs (or a DatasetEvent's dataset): identity rules, facets
                  and input/output facets checked, symlinks, version, lifecycle
9. parent       — the parent run and job (ParentRunFacet 1-2-0, legacy parentRun)
10. columns     — column lineage of the outputs' columnLineage facets (column_lineage.py),
                  and for outputs without one, derived from the job's sql facet
                  (sql_lineage.py, marked derived="sql")

A broken rule at stages 1-6 or 8 quarantines the event with its reason; everything else only
adds warnings. The event's facts are a function of its bytes alone, so the store's merge
rules can make the graph independent of arrival order
(docs/architecture.md#order-independence).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from typing import Any

import orjson

from embrasure.model import (
    DATASET_EVENT,
    RUN_EVENT,
    ColumnFact,
    DatasetFacts,
    EventFacts,
    JobId,
    Quarantined,
    event_kind,
)
from embrasure.projector import column_lineage, members, sql_lineage, validate
from embrasure.projector.canonical import canonical_json, event_id
from embrasure.projector.times import parse_event_time
from embrasure.projector.validate import Invalid
from embrasure.receiver.jsonguard import json_type


def project_event(event: Any) -> EventFacts | Quarantined:
    """The facts of one event (any JSON value the receiver accepted), or why not.

    Never raises: a rule the event breaks gives ``Quarantined(retriable=False)``; a fault
    of the projector itself (a bug) gives ``Quarantined(retriable=True)`` naming it, so
    that a replay under fixed code can project the event.
    """
    return _guarded(lambda: event_kind(event), lambda: _project(event))


def project_raw(raw: bytes) -> EventFacts | Quarantined:
    """``project_event`` of an item as the log stores it (JSON the receiver checked),
    read from its members (members.py): the same facts, the same reasons."""
    try:
        found = members.read(raw)
    except Exception:  # whatever it is, the whole parse says it exactly
        found = None
    if found is None:
        return project_event(orjson.loads(raw))
    return _guarded(lambda: found.kind, lambda: _project_members(found))


def _guarded(
    kind_of: Callable[[], str | None], project: Callable[[], EventFacts]
) -> EventFacts | Quarantined:
    kind = None
    try:
        kind = kind_of()
        return project()
    except Invalid as broken:
        return Quarantined(kind=kind, reason=broken.reason)
    except Exception as exc:
        return Quarantined(
            kind=kind,
            reason=f"projector error: {type(exc).__name__}: {exc}",
            retriable=True,
        )


def _project(event: Any) -> EventFacts:
    # 1. identity: of the event as received, before anything is dropped from it.
    try:
        identity = event_id(event)
    except ValueError as exc:
        raise Invalid(f"the event cannot be identified: {exc}") from None

    # 2. shape
    if not isinstance(event, dict):
        raise Invalid(f"the event is {json_type(event)}, not a JSON object")

    kind = event_kind(event)
    assert kind is not None  # an object, checked just above
    content, own = _split_own_facets(event, kind)
    return _stages(
        identity,
        kind,
        event,
        lambda: validate.job_of(event, kind),
        lambda job: _declared(content, kind, job),
        own,
    )


def _project_members(event: members.Members) -> EventFacts:
    """``_project`` of an item read as its members: identity from their canonical JSON,
    job and declared content from the memo of its content (stages 1 and 3-4, 7-8, 10)."""
    try:
        identity = event.identity()
    except ValueError as exc:
        raise Invalid(f"the event cannot be identified: {exc}") from None
    kind, content = event.kind, event.content

    def job_of() -> JobId | None:
        found = members.cached(content, "job", lambda: _job_or_reason(content.values, kind))
        if isinstance(found, str):
            raise Invalid(found)
        return found  # type: ignore[no-any-return]

    def declared(job: JobId | None) -> Declared | str:
        # Read once per content (members.py remembers it, as _declared's memo would):
        # keyed by its canonical JSON's digest, as the shapes it makes are remembered.
        def read() -> Declared | str:
            key = hashlib.blake2b(kind.encode(), digest_size=16)
            for _name, piece in content.canonical:
                key.update(piece)
            return _read_declared(key.digest(), content.values, kind, job)

        return members.cached(content, "declared", read)  # type: ignore[no-any-return]

    return _stages(identity, kind, event.head, job_of, declared, [])


def _job_or_reason(values: dict[str, Any], kind: str) -> JobId | str | None:
    try:
        return validate.job_of(values, kind)
    except Invalid as broken:
        return broken.reason


def _stages(
    identity: str,
    kind: str,
    event: dict[str, Any],
    job_of: Callable[[], JobId | None],
    declared_of: Callable[[JobId | None], Declared | str],
    own: Own,
) -> EventFacts:
    """Stages 3-10 in order (the module docstring), for an object event of ``kind``:
    ``event`` holds at least its run, eventTime and eventType; ``job_of`` and
    ``declared_of`` read its job and content (stages 3-4, 7-8, 10), ``own`` the inputs'
    and outputs' own facets taken out of that content."""
    # 3-4. kind, job, run
    job = job_of()
    run_id = validate.run_id_of(event, kind)
    warnings: list[str] = []

    # 5. eventTime
    try:
        time, time_warning = parse_event_time(event.get("eventTime"))
    except ValueError as exc:
        raise Invalid(f"{kind}: {exc}") from None
    if time_warning is not None:
        warnings.append(time_warning)

    # 6. eventType
    event_type, event_type_raw, type_warnings = validate.event_type_of(event, kind)
    warnings += type_warnings

    # 7. run facets (per run; the job's facets are part of what the job declares)
    run = event.get("run") if kind == RUN_EVENT else None
    run_facets, run_warnings = (
        validate.facets_of(run, "facets", "run", "run.facets") if run is not None else ({}, [])
    )
    warnings += run_warnings

    # 7-8, 10. job facets, datasets, column lineage: read once per distinct content; the
    # inputs' and outputs' own facets (about this run's use of them) once per event.
    declared = declared_of(job)
    if isinstance(declared, str):
        raise Invalid(declared)
    warnings += declared.job_warnings + declared.dataset_warnings
    datasets = _with_own_facets(declared.datasets, own, warnings) if own else declared.datasets

    # 9. parent: read from the run facets as sent (see validate.py for why).
    parent = validate.parent_of(run.get("facets") if run is not None else None, run_id, warnings)
    warnings += declared.column_warnings

    return EventFacts(
        event_id=identity,
        kind=kind,
        event_type=event_type,
        event_type_raw=event_type_raw,
        time=time,
        job=job,
        run_id=run_id,
        run_facets=run_facets,
        job_facets=declared.job_facets,
        parent=parent,
        datasets=datasets,
        columns=declared.columns,
        warnings=tuple(warnings),
        shape=declared.key,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Declared:
    """What an event says about its job and datasets, apart from its run: the same bytes
    in every run of a job, so it is read once per distinct content (``_declared``)."""

    key: bytes  # digest of the content it was read from
    job_facets: dict[str, Any]
    job_warnings: list[str]
    datasets: tuple[DatasetFacts, ...]
    dataset_warnings: list[str]
    columns: tuple[ColumnFact, ...]
    column_warnings: list[str]


# An input's or output's own facets (inputFacets / outputFacets) are about one run's use
# of it (outputStatistics: a row count a run), so they stay out of the memoised content:
# with them in it, every run of such a job missed the memo and read its job, datasets and
# column lineage again (+50-60% CPU an event, measured with outputStatistics).
OWN_FACETS = (("inputs", "inputFacets"), ("outputs", "outputFacets"))
# Where an input's or output's own facets were: its position in the event's datasets
# (inputs, then outputs: validate.datasets_of), its key ("inputs[2]"), the dataset object.
Own = list[tuple[int, str, dict[str, Any]]]


def _split_own_facets(event: dict[str, Any], kind: str) -> tuple[dict[str, Any], Own]:
    """The event without its inputs' and outputs' own facets, and where they were: the
    event itself when none has any (no copy), or when it is a DatasetEvent (which reads
    neither inputs nor outputs)."""
    own: Own = []
    content = event
    if kind == DATASET_EVENT:
        return content, own
    position = 0
    for key, own_key in OWN_FACETS:
        items = event.get(key)
        if not isinstance(items, list):
            continue  # not an array: stage 8 says so (an absent one names no dataset)
        copied: list[Any] | None = None
        for index, item in enumerate(items):
            if isinstance(item, dict) and own_key in item:
                if copied is None:
                    copied = list(items)
                copied[index] = {k: v for k, v in item.items() if k != own_key}
                own.append((position + index, f"{key}[{index}]", item))
        position += len(items)
        if copied is not None:
            if content is event:
                content = dict(event)
            content[key] = copied
    return content, own


def _with_own_facets(
    datasets: tuple[DatasetFacts, ...], own: Own, warnings: list[str]
) -> tuple[DatasetFacts, ...]:
    """``datasets`` (read without them) with this event's inputs' and outputs' own
    facets, each checked against its schema (facet_schemas.py)."""
    out = list(datasets)
    for position, where, item in own:
        own_key = "inputFacets" if out[position].role == "input" else "outputFacets"
        facets, own_warnings = validate.facets_of(item, own_key, own_key, f"{where}.{own_key}")
        warnings += own_warnings
        out[position] = dataclasses.replace(out[position], role_facets=facets)
    return tuple(out)


MEMO_SIZE = 4096  # distinct job/dataset contents remembered (a platform's job count)
_memo: dict[bytes, Declared | str] = {}


def _declared(event: dict[str, Any], kind: str, job: JobId | None) -> Declared | str:
    """Stages 7 (job facets), 8 and 10 for the event's job and datasets, or the reason
    they break a rule. A pure function of that part of the event, so it is memoised by a
    digest of its JSON: a job's schema, SQL and column lineage repeat in every run. The
    values are shared between events: nothing downstream may change them."""
    part = [kind, event.get("job"), event.get("inputs"), event.get("outputs"), event.get("dataset")]
    try:
        # Key order as sent: a producer sends its keys in one order, and another order
        # only costs a second entry. Faster than the canonical form.
        content = orjson.dumps(part)
    except orjson.JSONEncodeError:
        content = canonical_json(part)  # integers beyond 64 bits
    key = hashlib.blake2b(content, digest_size=16).digest()
    found = _memo.get(key)
    if found is None:
        found = _read_declared(key, event, kind, job)
        if len(_memo) >= MEMO_SIZE:
            _memo.clear()  # cheaper than LRU bookkeeping; refilled within one batch
        _memo[key] = found
    return found


def _read_declared(
    key: bytes, event: dict[str, Any], kind: str, job: JobId | None
) -> Declared | str:
    try:
        job_facets, job_warnings = (
            validate.facets_of(event["job"], "facets", "job", "job.facets")
            if job is not None
            else ({}, [])
        )
        datasets, dataset_warnings = validate.datasets_of(event, kind)
    except Invalid as broken:
        return broken.reason
    columns, column_warnings = _column_facts(datasets)
    if job is not None:
        # docs/projection.md#column-lineage: an output without a columnLineage facet gets
        # the mappings parsed from the job's SQL, marked derived; a declared fact for the
        # same edge wins.
        derived, derived_warnings = sql_lineage.derive(job_facets, datasets)
        columns += derived
        column_warnings += derived_warnings
    return Declared(
        key, job_facets, job_warnings, datasets, dataset_warnings, columns, column_warnings
    )


def _column_facts(
    datasets: tuple[DatasetFacts, ...],
) -> tuple[tuple[ColumnFact, ...], list[str]]:
    """Column lineage declared by the event's outputs, matched against its own inputs
    only (docs/projection.md): the pure reading, without the store's aliases."""
    outputs = [d for d in datasets if d.role == "output"]
    if not outputs:
        return (), []
    inputs = [d for d in datasets if d.role == "input"]
    facts, warnings = column_lineage.extract(outputs, inputs)
    return facts, list(warnings)
