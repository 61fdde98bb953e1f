"""Data-quality checks a run sent (docs/projection.md#what-each-run-did): pure rules over
the DataQualityAssertionsDatasetFacet (1-1-0) of an input or output.

OpenLineage defines ``dataQualityAssertions`` as an input dataset facet (the run that
checks a dataset reads it: Great Expectations, dbt tests, Soda); older producers (dbt's
structured-log integration) send it among the dataset's ``facets``. Both are read, the
input's (or output's) own facet first. A ``_deleted`` marker is not a check result.

``checks_of`` is what the projector keeps per dataset and check (``dataset_checks``):
each check's latest result, by eventTime then the assertion's hash, so that lineage and
impact can mark a dataset one of whose checks last failed without reading facet values
(query/quality.py). A check is an assertion, its column and its name: dbt runs each
test as a run of its own, so "the latest run that sent assertions" would let a passing
``unique`` test that ran a second later hide a failed ``accepted_values`` one on the same
table. ``summary`` is what the read API shows per run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from embrasure.model import DatasetFacts
from embrasure.projector import facets as facet_rules
from embrasure.projector.canonical import canonical_json

ASSERTIONS = "dataQualityAssertions"


def assertions_facet(own: Mapping[str, Any], facets: Mapping[str, Any]) -> dict[str, Any] | None:
    """The dataQualityAssertions facet of one input or output: from its role facets
    (``own``: inputFacets / outputFacets), else from its dataset facets."""
    for holder in (own, facets):
        value = holder.get(ASSERTIONS)
        if isinstance(value, dict) and not facet_rules.is_deletion(value):
            return value
    return None


def _assertions(facet: Mapping[str, Any]) -> list[dict[str, Any]]:
    listed = facet.get("assertions")
    if not isinstance(listed, list):
        return []
    return [a for a in listed if isinstance(a, dict)]


def failed(facet: Mapping[str, Any]) -> bool:
    """At least one assertion says ``success: false`` (JSON false only)."""
    return any(a.get("success") is False for a in _assertions(facet))


def summary(facet: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{passed, failed, failures: [{assertion, column?}]}``; an assertion whose
    ``success`` is not a boolean counts as neither."""
    passed = 0
    failures: list[dict[str, Any]] = []
    for a in _assertions(facet or {}):
        if a.get("success") is True:
            passed += 1
        elif a.get("success") is False:
            failure: dict[str, Any] = {"assertion": a.get("assertion")}
            if isinstance(a.get("column"), str) and a["column"]:
                failure["column"] = a["column"]
            failures.append(failure)
    return {"passed": passed, "failed": len(failures), "failures": failures}


def check_id(assertion: Mapping[str, Any]) -> str:
    """A check's identity: its assertion, column and name, as canonical JSON."""
    parts = [assertion.get(k) if isinstance(assertion.get(k), str) else None for k in _ID_KEYS]
    return canonical_json(parts).decode()


_ID_KEYS = ("assertion", "column", "name")

CheckKey = tuple[str, str, str]  # dataset ns, name (as sent), check_id
Check = tuple[str, bytes, int]  # eventTime key ('' unknown), assertion hash, failed


def checks_of(
    datasets: Iterable[DatasetFacts], own: bool = True
) -> tuple[tuple[CheckKey, bytes, int], ...]:
    """Per input or output carrying assertions, per check with a boolean ``success``:
    (dataset ns, name, check id), the assertion's value hash, 1 when it failed. A check
    named twice in one event keeps the larger hash, as the facet rule breaks ties
    (projector/facets.py). ``own=False`` reads the dataset facets only."""
    found: dict[CheckKey, tuple[bytes, int]] = {}
    for ds in datasets:
        if ds.role not in ("input", "output"):
            continue
        facet = assertions_facet(ds.role_facets if own else {}, ds.facets)
        for a in _assertions(facet or {}):
            if not isinstance(a.get("success"), bool):
                continue
            key = (ds.id.namespace, ds.id.name, check_id(a))
            digest = facet_rules.value_hash(canonical_json(a))
            old = found.get(key)
            if old is None or digest > old[0]:
                found[key] = (digest, int(a["success"] is False))
    return tuple((key, digest, flag) for key, (digest, flag) in sorted(found.items()))


def later_check(old: Check | None, new: Check) -> Check:
    """A check's latest result: by eventTime key, then assertion hash (the rule of
    schema.MERGES["dataset_checks"]); commutative, associative, idempotent."""
    if old is None or new[:2] > old[:2]:
        return new
    return old
