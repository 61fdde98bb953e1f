"""Marquez's model from Embrasure's graph, decided once (docs/marquez.md#the-model).

Marquez stores its own model beside the events; here every notion is derived from the
graph, never stored apart:

- **Run states.** Marquez's five from the run's winning event type
  (docs/projection.md#runs): START, RUNNING and OTHER → RUNNING; COMPLETE → COMPLETED;
  FAIL → FAILED; ABORT → ABORTED; a run with no stored state → NEW (a safeguard: every
  projected run has one).
- **Versions.** Marquez makes a dataset version each time a run writes the dataset (its
  version hash includes the run), and a job version per distinct set of what the job's
  runs read and wrote. So here: a dataset's versions are the runs that wrote it, one
  each, named by a UUID derived from (namespace, name, runId); a job's versions are the
  distinct (inputs, outputs) sets of its runs, named by a UUID derived from the job and
  that set. Both are name-based UUIDs (RFC 9562 §5.5), so the same graph gives the same
  ids on every server and after every reproject.
- **Times.** ``createdAt`` is the earliest eventTime that named the entity,
  ``updatedAt`` the latest: Embrasure's graph holds eventTimes, not the moments rows were
  written (which depend on arrival, and order must not matter: docs/architecture.md).
- **Soft delete** is the admin hide (docs/operations.md#hiding-datasets-jobs-and-namespaces):
  hidden entities are left out; Marquez un-deletes on a later event, Embrasure keeps a
  hide until an unhide.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request

from embrasure.marquez.http import bad_request, not_found

# RFC 9562 §5.5 name-based UUIDs under a namespace of Embrasure's own: the same names
# give the same id everywhere.
_VERSIONS = uuid.uuid5(uuid.NAMESPACE_URL, "https://embrasure.dev/marquez/versions")

RUN_STATES = {
    "START": "RUNNING",
    "RUNNING": "RUNNING",
    "OTHER": "RUNNING",
    "COMPLETE": "COMPLETED",
    "FAIL": "FAILED",
    "ABORT": "ABORTED",
}
MARQUEZ_RUN_STATES = ("NEW", "RUNNING", "COMPLETED", "FAILED", "ABORTED")
# What Marquez's RunState also takes as a query parameter (``lastRunStates=OTHER`` answers
# 200 there); no run of Embrasure's is in it.
MARQUEZ_RUN_STATE_NAMES = (*MARQUEZ_RUN_STATES, "OTHER")

# Marquez's default page (its resources' @DefaultValue("100")); Embrasure's read API caps
# a page at 1,000 (web/params.MAX_LIMIT) and so does this one: a bigger limit is answered
# with 1,000 and ``totalCount`` tells a client there is more.
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def run_state(state: str | None) -> str:
    """Marquez's RunState of an Embrasure run state (None: no event of its own)."""
    return "NEW" if state is None else RUN_STATES.get(state, "RUNNING")


def embrasure_states(states: Iterable[str]) -> list[str | None]:
    """The Embrasure run states (None: no state) that are Marquez's ``states``: the
    inverse of ``run_state``."""
    wanted = set(states)
    out: list[str | None] = [s for s, marquez in RUN_STATES.items() if marquez in wanted]
    return [*out, None] if "NEW" in wanted else out


def version_id(*parts: str) -> str:
    """A name-based UUID of ``parts`` (the module's docstring, Versions)."""
    return str(uuid.uuid5(_VERSIONS, "\x1f".join(parts)))


def dataset_version(namespace: str, name: str, run_id: str) -> str:
    """The version of a dataset that run ``run_id`` wrote."""
    return version_id("dataset", namespace, name, run_id)


def schema_version(namespace: str, name: str, fields: Iterable[tuple[str, str | None]]) -> str:
    """The version of a dataset's schema: its top-level fields' names and types in order
    (Marquez keeps a schema version per distinct set of fields)."""
    parts = ["schema", namespace, name]
    for field, kind in fields:
        parts += [field, kind or ""]
    return version_id(*parts)


def job_version(
    namespace: str,
    name: str,
    inputs: Iterable[tuple[str, str]],
    outputs: Iterable[tuple[str, str]],
) -> str:
    """The version of a job whose run read ``inputs`` and wrote ``outputs``."""
    parts = ["job", namespace, name, "in"]
    for ns, n in sorted(set(inputs)):
        parts += [ns, n]
    parts.append("out")
    for ns, n in sorted(set(outputs)):
        parts += [ns, n]
    return version_id(*parts)


def entity_uuid(kind: str, namespace: str, name: str) -> str:
    """A stable UUID for an entity Marquez names by UUID (a parent job's ``parentJobUuid``)."""
    return version_id(kind, namespace, name)


def paging(request: Request, default: int = DEFAULT_LIMIT) -> tuple[int, int]:
    """``limit`` and ``offset`` as Marquez takes them: whole numbers ≥ 0."""
    return whole(request, "limit", default, MAX_LIMIT), whole(request, "offset", 0, None)


# Marquez's integer parameters are Java ints: nothing past this reaches its queries (nor
# SQLite's, whose integers end at 2^63 - 1: an offset past that was a 500).
JAVA_INT_MAX = 2**31 - 1


def whole(
    request: Request, name: str, default: int, cap: int | None = None, low: int | None = 0
) -> int:
    """A whole-number query parameter up to a Java int's greatest, as Marquez takes it
    (``default`` when absent), at most ``cap``: below ``low`` (0 unless None: no bound),
    a 400 in Marquez's words (Dropwizard's ``@Min``); not a Java int at all, Jersey's 404
    (it cannot make the resource's ``int``: a ParamException, answered 404)."""
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    # Java's Integer.valueOf: an optional sign and ASCII digits, nothing else (Python's
    # int() would also take spaces, "_" and other scripts' digits).
    value = int(text) if _JAVA_INT.fullmatch(text) else None
    if value is None or not -JAVA_INT_MAX - 1 <= value <= JAVA_INT_MAX:
        raise not_found("HTTP 404 Not Found")
    if low is not None and value < low:
        raise bad_request(f"query param {name} must be greater than or equal to {low}")
    return min(value, cap) if cap is not None else value


_JAVA_INT = re.compile(r"[+-]?[0-9]{1,12}")  # longer is out of range anyway


def enum_param(text: str) -> str:
    """A query parameter naming an enum constant as Dropwizard reads it
    (``Enums.fromStringFuzzy``): spaces around it dropped, ``-`` and `` `` read as ``_``,
    any case: ``update-at`` is UPDATE_AT, ``failed`` FAILED."""
    return text.strip().replace("-", "_").replace(" ", "_").upper()


def facet_text(facets: dict[str, Any], facet: str, key: str) -> str | None:
    """A string member of a facet (``documentation.description``…), or None."""
    value = facets.get(facet)
    text = value.get(key) if isinstance(value, dict) else None
    return text if isinstance(text, str) else None


def instant(key: str | None) -> str | None:
    """An Embrasure time key (``2026-11-30T09:00:00.120000000Z``) as Java's Instant prints
    it, which Marquez's answers carry: no fraction when it is zero, else 3, 6 or 9 digits
    (``2026-11-30T09:00:00.120Z``)."""
    if not key:
        return None
    base, fraction = key[:19], key[20:29]
    for digits in (0, 3, 6):
        if fraction[digits:] == "0" * (9 - digits):
            return f"{base}.{fraction[:digits]}Z" if digits else f"{base}Z"
    return f"{base}.{fraction}Z"


def lifecycle_state(facets: dict[str, Any]) -> str:
    """The lifecycleStateChange facet's state (OpenLineage LifecycleStateChangeDatasetFacet),
    or "" when none was sent: Marquez answers "" there, not null (seen beside it)."""
    return facet_text(facets, "lifecycleStateChange", "lifecycleStateChange") or ""
