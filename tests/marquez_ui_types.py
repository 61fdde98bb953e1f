"""What marquez-web reads of each Marquez answer, as JSON Schemas (draft 2020-12), written
from the types of marquez-web 0.50.0 (its web/src/types/api.ts and types/lineage.ts):
``required`` are the keys it reads, with the types it reads them as (``null`` where its
type is Nullable or the key is optional in Marquez's model). tests/marquez replays the
requests marquez-web made against the Marquez port and checks each answer here.
"""

from __future__ import annotations

import re
from typing import Any

S: dict[str, Any] = {"type": "string"}
S_OR_NULL: dict[str, Any] = {"type": ["string", "null"]}
INT: dict[str, Any] = {"type": "integer"}
OBJ: dict[str, Any] = {"type": "object"}


def obj(required: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": sorted(required), "properties": required}


def array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


ID = obj({"namespace": S, "name": S})
FIELD = obj({"name": S, "type": S_OR_NULL, "tags": array(S), "description": S_OR_NULL})
RUN_STATES = {"enum": ["NEW", "RUNNING", "COMPLETED", "FAILED", "ABORTED"]}
RUN = obj(
    {
        "id": S,
        "createdAt": S,
        "updatedAt": S,
        "nominalStartTime": S_OR_NULL,
        "nominalEndTime": S_OR_NULL,
        "state": RUN_STATES,
        "jobVersion": obj({"namespace": S, "name": S, "version": S}),
        "startedAt": S_OR_NULL,
        "endedAt": S_OR_NULL,
        "durationMs": {"type": ["integer", "null"]},
        "args": OBJ,
        "facets": OBJ,
    }
)
NAMESPACE = obj(
    {
        "name": S,
        "createdAt": S_OR_NULL,
        "updatedAt": S_OR_NULL,
        "ownerName": S,
        "description": S_OR_NULL,
        "isHidden": {"type": "boolean"},
    }
)
DATASET = obj(
    {
        "id": ID,
        "type": {"enum": ["DB_TABLE", "STREAM"]},
        "name": S,
        "physicalName": S,
        "createdAt": S_OR_NULL,
        "updatedAt": S_OR_NULL,
        "namespace": S,
        "sourceName": S,
        "fields": array(FIELD),
        "tags": array(S),
        "lastModifiedAt": S_OR_NULL,
        "description": S_OR_NULL,
        "facets": OBJ,
        "deleted": {"type": "boolean"},
        "columnLineage": {"type": ["array", "null"]},
    }
)
DATASET_VERSION = obj(
    {
        "id": ID,
        "type": {"enum": ["DB_TABLE", "STREAM"]},
        "createdByRun": {"anyOf": [RUN, {"type": "null"}]},
        "name": S,
        "physicalName": S,
        "createdAt": S_OR_NULL,
        "version": S,
        "namespace": S,
        "sourceName": S,
        "fields": array(FIELD),
        "tags": array(S),
        "lifecycleState": S_OR_NULL,
        "description": S_OR_NULL,
        "facets": OBJ,
    }
)
JOB = obj(
    {
        "id": ID,
        "type": {"enum": ["BATCH", "STREAM", "SERVICE"]},
        "name": S,
        "createdAt": S_OR_NULL,
        "updatedAt": S_OR_NULL,
        "inputs": array(ID),
        "outputs": array(ID),
        "namespace": S,
        "location": S_OR_NULL,
        "description": S_OR_NULL,
        "latestRun": {"anyOf": [RUN, {"type": "null"}]},
        "latestRuns": {"anyOf": [{"type": "array", "items": RUN, "minItems": 1}, {"type": "null"}]},
        "tags": array(S),
        "parentJobName": S_OR_NULL,
        "parentJobUuid": S_OR_NULL,
    }
)
EDGE = obj({"origin": S, "destination": S})
LINEAGE_NODE = obj(
    {
        "id": S,
        "type": {"enum": ["DATASET", "JOB"]},
        "data": OBJ,
        "inEdges": array(EDGE),
        "outEdges": array(EDGE),
    }
)
COLUMN_INPUT = obj(
    {
        "namespace": S,
        "dataset": S,
        "datasetVersion": S_OR_NULL,
        "field": S,
        "transformationDescription": S_OR_NULL,
        "transformationType": S_OR_NULL,
    }
)
COLUMN_NODE = obj(
    {
        "id": S,
        "type": S,
        "data": obj(
            {
                "namespace": S,
                "dataset": S,
                "datasetVersion": S_OR_NULL,
                "field": S,
                "fieldType": S_OR_NULL,
                "transformationDescription": S_OR_NULL,
                "transformationType": S_OR_NULL,
                "inputFields": array(COLUMN_INPUT),
            }
        ),
        "inEdges": array(EDGE),
        "outEdges": array(EDGE),
    }
)
SEARCH_RESULT = obj(
    {
        "name": S,
        "namespace": S,
        "nodeId": S,
        "type": {"enum": ["DATASET", "JOB"]},
        "updatedAt": S_OR_NULL,
    }
)
INTERVAL = {"startInterval": S, "endInterval": S}

# Route templates (regular expressions over the path) and what marquez-web reads there.
SHAPES: list[tuple[str, dict[str, Any]]] = [
    (r"/api/v1/namespaces", obj({"namespaces": array(NAMESPACE)})),
    (r"/api/v1/namespaces/[^/]+", NAMESPACE),
    (r"/api/v1/namespaces/[^/]+/jobs", obj({"totalCount": INT, "jobs": array(JOB)})),
    (r"/api/v1/jobs", obj({"totalCount": INT, "jobs": array(JOB)})),
    (r"/api/v1/namespaces/[^/]+/jobs/[^/]+", JOB),
    (r"/api/v1/namespaces/[^/]+/jobs/[^/]+/runs", obj({"totalCount": INT, "runs": array(RUN)})),
    (r"/api/v1/namespaces/[^/]+/jobs/[^/]+/tags/[^/]+", JOB),
    (r"/api/v1/namespaces/[^/]+/datasets", obj({"totalCount": INT, "datasets": array(DATASET)})),
    (r"/api/v1/namespaces/[^/]+/datasets/[^/]+", DATASET),
    (r"/api/v1/namespaces/[^/]+/datasets/[^/]+/tags/[^/]+", DATASET),
    (r"/api/v1/namespaces/[^/]+/datasets/[^/]+/fields/[^/]+/tags/[^/]+", DATASET),
    (
        r"/api/v1/namespaces/[^/]+/datasets/[^/]+/versions",
        obj({"totalCount": INT, "versions": array(DATASET_VERSION)}),
    ),
    (r"/api/v1/jobs/runs/[^/]+", RUN),
    (r"/api/v1/jobs/runs/[^/]+/facets", obj({"runId": S, "facets": OBJ})),
    (r"/api/v1/lineage", obj({"graph": array(LINEAGE_NODE)})),
    (r"/api/v1/column-lineage", obj({"graph": array(COLUMN_NODE)})),
    (r"/api/v1/events/lineage", obj({"events": array(OBJ), "totalCount": INT})),
    (r"/api/v1/search", obj({"totalCount": INT, "results": array(SEARCH_RESULT)})),
    (r"/api/v2beta/search/(jobs|datasets)", obj({"hits": array(OBJ), "highlights": array(OBJ)})),
    (r"/api/v1/tags", obj({"tags": array(obj({"name": S, "description": S_OR_NULL}))})),
    (
        r"/api/v1/stats/lineage-events",
        array(obj({**INTERVAL, "fail": INT, "start": INT, "complete": INT, "abort": INT})),
    ),
    (r"/api/v1/stats/(jobs|datasets|sources)", array(obj({**INTERVAL, "count": INT}))),
]


def shape_of(path: str) -> dict[str, Any] | None:
    """What marquez-web reads of the answer to ``path`` (raw, percent-encoded)."""
    for pattern, schema in SHAPES:
        if re.fullmatch(pattern, path):
            return schema
    return None
