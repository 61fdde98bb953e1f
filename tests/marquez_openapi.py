"""Marquez's own OpenAPI document (``spec/openapi.yml`` of MarquezProject/marquez at tag
0.50.0, Apache-2.0, kept unchanged as tests/data/marquez-0.50.0-openapi.yml), with the
corrections its known faults need before schemathesis can check answers against it
(docs/marquez.md#clients).

Each correction in ``CORRECTIONS`` says what it changes and why; "Marquez answers"
means Marquez 0.50.0 itself fails the check without it, measured by
bench/peers/marquez_spec.py over the same events (the demo platform), so the
correction is the document's fault, not the port's. Used by
tests/marquez/test_marquez_spec.py (the port, in CI) and bench/peers/marquez_spec.py
(Marquez and the port side by side).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import schemathesis

SPEC = Path(__file__).parent / "data" / "marquez-0.50.0-openapi.yml"
Doc = dict[str, Any]
Request = tuple[str, dict[str, str], dict[str, str]]  # a path, its parameters, its query


class Getter(Protocol):
    """An HTTP client at the API's base (httpx's, or Starlette's TestClient)."""

    def get(self, url: str) -> Any: ...


@dataclasses.dataclass(frozen=True)
class Correction:
    what: str
    why: str
    apply: Callable[[Doc], None]
    to_read: bool = False  # without it, the document cannot be read at all


def _schemas(doc: Doc) -> Doc:
    schemas: Doc = doc["components"]["schemas"]
    return schemas


def _nullable(schema: str, *props: str) -> Callable[[Doc], None]:
    def apply(doc: Doc) -> None:
        for prop in props:
            target = _schemas(doc)[schema]["properties"][prop]
            if "$ref" in target:  # OpenAPI 3.0: siblings of a $ref are ignored
                _schemas(doc)[schema]["properties"][prop] = {
                    "allOf": [{"$ref": target["$ref"]}],
                    "nullable": True,
                }
            else:
                target["nullable"] = True

    return apply


def _typed(schema: str, kinds: dict[str, Doc]) -> Callable[[Doc], None]:
    def apply(doc: Doc) -> None:
        for prop, kind in kinds.items():
            _schemas(doc)[schema]["properties"][prop].update(kind)

    return apply


def _parameters_spelled(doc: Doc) -> None:
    operation = doc["paths"]["/runlineage/upstream"]["get"]
    operation["parameters"] = operation.pop("paramteters")


# What Marquez 0.50.0's models mark ``@Nullable`` (marquez/service/models/*.java,
# marquez/api/models/JobVersion.java), of the properties the document describes: Marquez
# writes them as null, the document says nothing of null.
NULLABLE = {
    "Namespace": ("description",),
    "Source": ("description",),
    "Tag": ("description",),
    "Dataset": (
        *("lastModifiedAt", "lastLifecycleState", "description", "currentVersion"),
        *("fields", "tags", "facets"),
    ),
    "DatasetVersion": ("description", "createdByRun", "fields", "tags", "facets"),
    "Job": (
        *("location", "description", "latestRun", "latestRuns", "facets"),
        *("currentVersion", "parentJobName", "parentJobUuid"),
    ),
    "JobVersion": ("location", "latestRun"),
    "IncompleteRun": (
        *("nominalStartTime", "nominalEndTime", "startedAt", "endedAt", "durationMs"),
        *("args", "facets"),
    ),
    "GraphNode": ("data", "inEdges", "outEdges"),
}
ERRORS = ("400", "404")


FIELDS_IN = ("Dataset", "DatasetVersion", "DbTable", "Stream")  # marquez.common.models.Field


def _nullables(doc: Doc) -> None:
    for schema, props in NULLABLE.items():
        _nullable(schema, *props)(doc)
    for schema in FIELDS_IN:  # a field's type and description: @Nullable in Field.java
        field = _schemas(doc)[schema]["properties"]["fields"]["items"]["properties"]
        for prop in ("type", "description"):
            field[prop]["nullable"] = True


def _graph_nodes(doc: Doc) -> None:
    schemas = _schemas(doc)
    schemas["NodeType"]["enum"] = [*schemas["NodeType"]["enum"], "DATASET_FIELD"]
    field_node = {  # Marquez's ColumnLineageNodeData
        "type": "object",
        "properties": {
            "namespace": {"type": "string"},
            "dataset": {"type": "string"},
            "field": {"type": "string"},
            "inputFields": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["namespace", "dataset", "field"],
    }
    data = schemas["GraphNode"]["properties"]["data"]
    data.pop("discriminator", None)
    data["anyOf"] = [*data.pop("oneOf"), field_node]


def _facets_by_name(doc: Doc) -> None:
    _schemas(doc)["FacetsResult"]["properties"]["facets"] = {
        "type": "object",
        "additionalProperties": {"$ref": "#/components/schemas/CustomFacet"},
    }


def _version_id(doc: Doc) -> None:
    _schemas(doc)["DatasetVersion"]["properties"]["id"] = {"$ref": "#/components/schemas/DatasetId"}


def _error_statuses(doc: Doc) -> None:
    message = {
        "type": "object",
        "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
        "required": ["code", "message"],
    }
    # Dropwizard's answer to a parameter its validation refuses (``limit=-1``).
    refused = {
        "type": "object",
        "properties": {"errors": {"type": "array", "items": {"type": "string"}}},
        "required": ["errors"],
    }
    body = {"anyOf": [message, refused]}
    for item in doc["paths"].values():
        operation = item.get("get")
        if operation is None:
            continue
        for status in ERRORS:
            operation["responses"].setdefault(
                status,
                {
                    "description": f"Marquez's error ({status})",
                    "content": {"application/json": {"schema": body}},
                },
            )


CORRECTIONS: list[Correction] = [
    Correction(
        "`SearchResult.name` and `.updatedAt` typed `string`",
        "the document gives them an empty `type:` (null), which is no JSON Schema type"
        " (schemathesis stops reading the document on it)",
        _typed("SearchResult", {"name": {"type": "string"}, "updatedAt": {"type": "string"}}),
        to_read=True,
    ),
    Correction(
        "`/runlineage/upstream`'s `paramteters` read as `parameters`",
        "a misspelling: its `runId` parameter is otherwise not declared",
        _parameters_spelled,
        to_read=True,
    ),
    Correction(
        "400 and 404 listed for every GET, with Marquez's error bodies (`{code, message}`,"
        " or Dropwizard's `{errors}` for a parameter its validation refuses)",
        "the document lists 200 alone, where Marquez answers 400 for a parameter it"
        " refuses and 404 for an unknown namespace, dataset, job, run or node",
        _error_statuses,
    ),
    Correction(
        "`nullable: true` on what Marquez's models mark `@Nullable` (`NULLABLE`)",
        "OpenAPI 3.0 refuses null unless `nullable` says so, and the document never does;"
        " Marquez writes these as null (a namespace's or a source's description, a run's"
        " times, a job without a run's `latestRun`, a field's type and description, ...)",
        _nullables,
    ),
    Correction(
        "`DatasetVersion.id` a `DatasetId` (`namespace`, `name`)",
        "the document makes it a `DatasetVersionId` with a required `version`; Marquez's"
        " model (DatasetVersion.java) and its answers hold a DatasetId, the version apart",
        _version_id,
    ),
    Correction(
        "a lineage node's `data` any of Dataset, Job or a column-lineage field node, its"
        " `type` also `DATASET_FIELD`",
        "the document has `oneOf` Dataset or Job with a discriminator on the data's own"
        " `type`, which is a dataset's (DB_TABLE) or a job's (BATCH), never DATASET or JOB,"
        " and a dataset's data also satisfies Job's schema; and column lineage answers"
        " DATASET_FIELD nodes (ColumnLineageNodeData), which the document never names",
        _graph_nodes,
    ),
    Correction(
        "`FacetsResult.facets` a map of facets by name",
        "the document makes it one facet (a `CustomFacet`, `_producer` required), where"
        " `/jobs/runs/{id}/facets` answers `{name: facet}` (an empty map for none)",
        _facets_by_name,
    ),
    Correction(
        "`DatasetVersion.tags` an array of strings",
        "the document types it `string`; Marquez answers a list, as `Dataset.tags`",
        _typed("DatasetVersion", {"tags": {"type": "array", "items": {"type": "string"}}}),
    ),
]

# The document as schemathesis reads it (its own YAML reading keeps unquoted example
# times strings, where PyYAML makes them datetimes), corrected, served at ``base``.


def corrected(base: str = "/api/v1") -> Doc:
    return _with(CORRECTIONS, base)


def readable(base: str = "/api/v1") -> Doc:
    """With only the corrections it cannot be read without."""
    return _with([c for c in CORRECTIONS if c.to_read], base)


def _with(corrections: list[Correction], base: str) -> Doc:
    document = copy.deepcopy(schemathesis.openapi.from_path(SPEC).raw_schema)
    document["servers"] = [{"url": base}]
    for correction in corrections:
        correction.apply(document)
    return document


def known_requests(client: Getter) -> list[Request]:
    """Requests for what the demo platform holds (generated names are mostly unknown
    ones, answered 404, whose bodies no shape check reads): each namespace, dataset and
    job with its runs and versions, a run and its facets, lineage, column lineage and
    run lineage, search, sources and tags."""
    out: list[Request] = [
        ("/namespaces", {}, {}),
        ("/sources", {}, {}),
        ("/tags", {}, {}),
        ("/search", {}, {"q": "orders"}),
        ("/events/lineage", {}, {"limit": "20"}),
    ]
    for ns in [n["name"] for n in client.get("/namespaces").json()["namespaces"]]:
        out.append(("/namespaces/{namespace}", {"namespace": ns}, {}))
        datasets = client.get(f"/namespaces/{quote(ns, safe='')}/datasets").json()
        out.append(("/namespaces/{namespace}/datasets", {"namespace": ns}, {}))
        for d in datasets["datasets"]:
            at = {"namespace": ns, "dataset": d["name"]}
            out.append(("/namespaces/{namespace}/datasets/{dataset}", at, {}))
            out.append(("/namespaces/{namespace}/datasets/{dataset}/versions", at, {}))
            node = f"dataset:{ns}:{d['name']}"
            out.append(("/lineage", {}, {"nodeId": node, "depth": "5"}))
            out.append(("/column-lineage", {}, {"nodeId": node, "depth": "5"}))
            if d.get("currentVersion"):
                path = "/namespaces/{namespace}/datasets/{dataset}/versions/{version}"
                out.append((path, {**at, "version": d["currentVersion"]}, {}))
            if d.get("sourceName"):
                out.append(("/sources/{source}", {"source": d["sourceName"]}, {}))
        jobs = client.get(f"/namespaces/{quote(ns, safe='')}/jobs").json()
        out.append(("/namespaces/{namespace}/jobs", {"namespace": ns}, {}))
        for j in jobs["jobs"]:
            at = {"namespace": ns, "job": j["name"]}
            out.append(("/namespaces/{namespace}/jobs/{job}", at, {}))
            out.append(("/namespaces/{namespace}/jobs/{job}/runs", at, {}))
            out.append(("/namespaces/{namespace}/jobs/{job}/versions", at, {}))
            if j.get("currentVersion"):
                path = "/namespaces/{namespace}/jobs/{job}/versions/{version}"
                out.append((path, {**at, "version": j["currentVersion"]}, {}))
            for run in (j.get("latestRuns") or [])[:1]:
                out.append(("/jobs/runs/{id}", {"id": run["id"]}, {}))
                for kind in ("run", "job"):
                    out.append(("/jobs/runs/{id}/facets", {"id": run["id"]}, {"type": kind}))
                out.append(("/runlineage/upstream", {}, {"runId": run["id"], "depth": "5"}))
    # schemathesis puts path parameters in the path as they are: encoded here, as a
    # client encodes a namespace such as s3://lake.
    encoded = [(p, {k: quote(v, safe="") for k, v in at.items()}, q) for p, at, q in out]
    return list({repr(x): x for x in encoded}.values())  # each once (sources repeat)
