"""The rules one event must follow, and what is read from it (docs/projection.md#validation,
docs/projection.md#entities-and-identity).

Each function checks one part of an already-parsed event (any JSON value) and returns
what it read, or raises ``Invalid`` with a reason an operator can act on: it names the
event kind, the place in the event (``outputs[2].name``) and the rule. Warnings — things
read leniently or ignored — come back as lists of strings. No I/O; nothing here keeps
state between events.

Choices where the rules are silent (documented for operators):

- A key whose value is ``null`` counts as absent (writers that emit nulls for unset
  fields): ``"run": null`` does not make a RunEvent, ``"eventType": null`` is no type.
- ``job.name`` and a dataset's ``name`` must be non-empty; namespaces may be empty.
- ``run.runId`` must be a UUID in its 36-character hyphenated form (RFC 9562 §4), any
  version, any case; it is stored in lowercase.
- ``eventType`` must be a string when present; a string outside the 2-0-2 enum is kept
  as sent and read as OTHER, with a warning. It is read the same way on JobEvents and
  DatasetEvents, where it means nothing to the graph.
- A DatasetEvent's ``inputs``/``outputs`` are ignored with a warning (2-0-2 gives a
  DatasetEvent only ``dataset``); an input's ``outputFacets`` (or an output's
  ``inputFacets``) is ignored silently like any other unknown key.
- A symlink identifier's ``type`` is compared in upper case (the SymlinksDatasetFacet
  1-0-1 schema's own example is ``"table"``, Spark sends ``"TABLE"``).
- The parent link is read from the ``parent`` run facet as sent, leniently, even when the
  facet breaks ParentRunFacet 1-2-0 and is dropped from the run's facets: whatever part
  is well-formed (the parent job; a runId that is a UUID) is kept, because job
  hierarchies (Airflow DAG → task) matter even when a producer leaves the run out
  (``"run": {}``). The pre-standard ``parentRun`` key of openlineage-airflow is read the
  same way when ``parent`` is absent.
"""

from __future__ import annotations

import re
from typing import Any

from embrasure.model import (
    DATASET_EVENT,
    RUN_EVENT,
    RUN_STATES,
    DatasetFacts,
    DatasetId,
    JobId,
    Lifecycle,
    ParentRef,
    Symlink,
)
from embrasure.projector.facet_schemas import check_facets
from embrasure.receiver.jsonguard import json_type

# docs/projection.md#validation: longer names are not identifiers but payloads
MAX_DATASET_NAME_CHARS = 1000
MAX_QUOTED_CHARS = 80  # a quoted bad value is cut to this in reasons and warnings

# Where RunEvent and JobEvent datasets are: (key, role, the role's own facets).
_DATASET_LISTS = (("inputs", "input", "inputFacets"), ("outputs", "output", "outputFacets"))
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I | re.A)


class Invalid(Exception):
    """The event breaks a rule; ``reason`` says which, in words an operator understands."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def quote(text: str) -> str:
    """``text`` quoted for a message, cut when long."""
    if len(text) > MAX_QUOTED_CHARS:
        text = text[: MAX_QUOTED_CHARS - 3] + "..."
    return repr(text)


def normalise_uuid(value: Any) -> str | None:
    """A UUID string in lowercase canonical form, or None when ``value`` is not one."""
    if isinstance(value, str) and _UUID.fullmatch(value):
        return value.lower()
    return None


def _present(obj: dict[str, Any], key: str) -> bool:
    return obj.get(key) is not None


def _object(value: Any, where: str, kind: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Invalid(f"{kind}: {where} is {json_type(value)}, not an object")
    return value


def _string(obj: dict[str, Any], key: str, where: str, kind: str) -> str:
    value = obj.get(key)
    if value is None:
        raise Invalid(f"{kind}: {where}.{key} is missing")
    if not isinstance(value, str):
        raise Invalid(f"{kind}: {where}.{key} is {json_type(value)}, not a string")
    return value


# -- the event ------------------------------------------------------------------------------


def job_of(event: dict[str, Any], kind: str) -> JobId | None:
    """The job of a RunEvent or JobEvent: ``job.namespace`` and ``job.name`` are required."""
    if kind == DATASET_EVENT:
        return None
    if not _present(event, "job"):
        raise Invalid(f"{kind}: job is missing (it needs job.namespace and job.name)")
    job = _object(event["job"], "job", kind)
    namespace = _string(job, "namespace", "job", kind)
    name = _string(job, "name", "job", kind)
    if not name:
        raise Invalid(f"{kind}: job.name is empty")
    return JobId(namespace, name)


def run_id_of(event: dict[str, Any], kind: str) -> str | None:
    """A RunEvent's ``run.runId``: required, a UUID, returned in lowercase."""
    if kind != RUN_EVENT:
        return None
    run = _object(event["run"], "run", kind)
    raw = _string(run, "runId", "run", kind)
    run_id = normalise_uuid(raw)
    if run_id is None:
        raise Invalid(f"{kind}: run.runId {quote(raw)} is not a UUID")
    return run_id


def event_type_of(event: dict[str, Any], kind: str) -> tuple[str | None, str | None, list[str]]:
    """(eventType as a run state, eventType as sent, warnings). Missing → (None, None)."""
    raw = event.get("eventType")
    if raw is None:
        return None, None, []
    if not isinstance(raw, str):
        raise Invalid(f"{kind}: eventType is {json_type(raw)}, not a string")
    if raw in RUN_STATES:
        return raw, raw, []
    known = ", ".join(RUN_STATES)
    return "OTHER", raw, [f"eventType {quote(raw)} is not one of {known}; treated as OTHER"]


def facets_of(
    holder: dict[str, Any], key: str, location: str, where: str
) -> tuple[dict[str, Any], list[str]]:
    """The checked facets under ``holder[key]`` (see facet_schemas.check_facets)."""
    facets = holder.get(key)
    if facets is None:
        return {}, []
    if not isinstance(facets, dict):
        return {}, [f"{where} ignored: facets must be an object, not {json_type(facets)}"]
    return check_facets(location, facets, where)


# -- datasets -------------------------------------------------------------------------------


def datasets_of(event: dict[str, Any], kind: str) -> tuple[tuple[DatasetFacts, ...], list[str]]:
    """Every dataset of the event with its checked facets, in the order sent."""
    facts: list[DatasetFacts] = []
    warnings: list[str] = []
    if kind == DATASET_EVENT:
        if not _present(event, "dataset"):
            raise Invalid(f"{kind}: dataset is missing (an event needs run, job or dataset)")
        facts.append(_dataset(event["dataset"], "dataset", "dataset", None, kind, warnings))
        warnings += [
            f"{key} ignored: a DatasetEvent carries only dataset"
            for key in ("inputs", "outputs")
            if _present(event, key)
        ]
        return tuple(facts), warnings
    for key, role, own in (
        ("inputs", "input", "inputFacets"),
        ("outputs", "output", "outputFacets"),
    ):
        items = event.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            raise Invalid(f"{kind}: {key} is {json_type(items)}, not an array")
        for index, item in enumerate(items):
            facts.append(_dataset(item, f"{key}[{index}]", role, own, kind, warnings))
    return tuple(facts), warnings


def dataset_id(obj: dict[str, Any], where: str, kind: str) -> DatasetId:
    """(namespace, name): strings; the name non-empty and at most 1,000 characters."""
    namespace = _string(obj, "namespace", where, kind)
    name = _string(obj, "name", where, kind)
    if not name:
        raise Invalid(f"{kind}: {where}.name is empty")
    if len(name) > MAX_DATASET_NAME_CHARS:
        raise Invalid(
            f"{kind}: {where}.name is {len(name):,} characters long; "
            f"at most {MAX_DATASET_NAME_CHARS:,} are allowed"
        )
    return DatasetId(namespace, name)


def _dataset(
    item: Any, where: str, role: str, own_key: str | None, kind: str, warnings: list[str]
) -> DatasetFacts:
    obj = _object(item, where, kind)
    identity = dataset_id(obj, where, kind)
    facets, facet_warnings = facets_of(obj, "facets", "dataset", f"{where}.facets")
    warnings += facet_warnings
    role_facets: dict[str, Any] = {}
    if own_key is not None:
        role_facets, role_warnings = facets_of(obj, own_key, own_key, f"{where}.{own_key}")
        warnings += role_warnings
    return DatasetFacts(
        id=identity,
        role=role,
        facets=facets,
        role_facets=role_facets,
        symlinks=_symlinks(facets.get("symlinks"), where, warnings),
        version=_version(obj, facets.get("version"), where, warnings),
        lifecycle=_lifecycle(facets.get("lifecycleStateChange"), where, warnings),
    )


def _live(facet: Any) -> dict[str, Any] | None:
    """A facet to read facts from: an object that is not a deletion marker."""
    if isinstance(facet, dict) and facet.get("_deleted") is not True:
        return facet
    return None


def _symlinks(facet: Any, where: str, warnings: list[str]) -> tuple[Symlink, ...]:
    """SymlinksDatasetFacet 1-0-1 ``identifiers``, deduplicated, in the order sent."""
    live = _live(facet)
    identifiers = live.get("identifiers") if live is not None else None
    if not isinstance(identifiers, list):
        return ()
    found: dict[Symlink, None] = {}
    for index, entry in enumerate(identifiers):
        namespace, name, type_ = (
            (entry.get("namespace"), entry.get("name"), entry.get("type"))
            if isinstance(entry, dict)
            else (None, None, None)
        )
        if not (isinstance(namespace, str) and isinstance(name, str) and isinstance(type_, str)):
            continue  # the facet passed its schema, so this cannot happen: stay total anyway
        if not name or len(name) > MAX_DATASET_NAME_CHARS:
            warnings.append(
                f"{where}.facets.symlinks.identifiers[{index}] ignored: its name is empty "
                f"or longer than {MAX_DATASET_NAME_CHARS:,} characters"
            )
            continue
        found[Symlink(DatasetId(namespace, name), type_.upper())] = None
    return tuple(found)


def _version(obj: dict[str, Any], facet: Any, where: str, warnings: list[str]) -> str | None:
    """The dataset's ``version`` field, else the version facet's ``datasetVersion``
    (DatasetVersionDatasetFacet 1-0-1)."""
    field = obj.get("version")
    if isinstance(field, str):
        return field
    if field is not None:
        warnings.append(f"{where}.version ignored: it is {json_type(field)}, not a string")
    live = _live(facet)
    version = live.get("datasetVersion") if live is not None else None
    return version if isinstance(version, str) else None


def _lifecycle(facet: Any, where: str, warnings: list[str]) -> Lifecycle | None:
    """LifecycleStateChangeDatasetFacet 1-0-1: the state, and ``previousIdentifier``."""
    live = _live(facet)
    state = live.get("lifecycleStateChange") if live is not None else None
    if live is None or not isinstance(state, str):
        return None
    previous = live.get("previousIdentifier")
    previous_id = None
    if isinstance(previous, dict):
        namespace, name = previous.get("namespace"), previous.get("name")
        if isinstance(namespace, str) and isinstance(name, str) and name:
            previous_id = DatasetId(namespace, name)
    if state == "RENAME" and previous_id is None:
        warnings.append(
            f"{where}.facets.lifecycleStateChange is a RENAME without a usable "
            "previousIdentifier: no rename is recorded"
        )
    return Lifecycle(state, previous_id)


# -- parent ---------------------------------------------------------------------------------


def parent_of(run_facets: Any, run_id: str | None, warnings: list[str]) -> ParentRef | None:
    """The parent run and job, from the run facets AS SENT (ParentRunFacet 1-2-0, or the
    pre-standard ``parentRun``), keeping whatever part is well-formed."""
    if not isinstance(run_facets, dict):
        return None
    key = "parent" if isinstance(run_facets.get("parent"), dict) else "parentRun"
    facet = run_facets.get(key)
    if not isinstance(facet, dict):
        return None
    where = f"run.facets.{key}"
    parent_run = _ref_run_id(facet.get("run"), f"{where}.run.runId", warnings)
    if parent_run is not None and parent_run == run_id:
        warnings.append(f"{where}.run.runId is the run's own id: the parent run is ignored")
        parent_run = None
    root = facet.get("root")
    if not isinstance(root, dict):
        root = {}
    ref = ParentRef(
        run_id=parent_run,
        job=_ref_job(facet.get("job")),
        root_run_id=_ref_run_id(root.get("run"), f"{where}.root.run.runId", warnings),
        root_job=_ref_job(root.get("job")),
    )
    return None if ref == ParentRef(None, None) else ref


def _ref_run_id(run: Any, where: str, warnings: list[str]) -> str | None:
    raw = run.get("runId") if isinstance(run, dict) else None
    if raw is None:
        return None  # "run": {} in partial events: the parent run is unknown
    run_id = normalise_uuid(raw)
    if run_id is None:
        what = f"{quote(raw)} is not a UUID" if isinstance(raw, str) else f"is {json_type(raw)}"
        warnings.append(f"{where} {what}: the link to that run is ignored")
    return run_id


def _ref_job(job: Any) -> JobId | None:
    if not isinstance(job, dict):
        return None
    namespace, name = job.get("namespace"), job.get("name")
    if isinstance(namespace, str) and isinstance(name, str) and name:
        return JobId(namespace, name)
    return None
