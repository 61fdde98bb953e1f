"""Realistic OpenLineage 2-0-2 events for benchmarks.

The shape follows ../shared/MEASURED.md: a COMPLETE RunEvent with a parent facet, a sql
facet, two inputs with 10-field schemas and one output with a schema and a
columnLineage facet over 8 fields (about 4.7 KB of compact JSON).
"""

from __future__ import annotations

import uuid
from typing import Any

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/integration/spark"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
FACET = "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"


def _schema(prefix: str, n: int) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": FACET,
        "fields": [
            {"name": f"{prefix}_col_{k}", "type": "varchar" if k % 3 else "bigint"}
            for k in range(n)
        ],
    }


def run_event(i: int, event_type: str = "COMPLETE", run_id: str | None = None) -> dict[str, Any]:
    """Event number ``i``: unique runId, datasets spread over a few hundred tables."""
    t = i % 500
    run_id = run_id or str(uuid.UUID(int=(0x0190_0000_0000_7000_8000_0000_0000_0000 | i)))
    inputs = [
        {
            "namespace": "postgres://warehouse:5432",
            "name": f"analytics.public.source_{(t + k) % 500}",
            "facets": {"schema": _schema(f"s{k}", 10)},
        }
        for k in range(2)
    ]
    lineage_fields = {
        f"out_col_{k}": {
            "inputFields": [
                {
                    "namespace": "postgres://warehouse:5432",
                    "name": inputs[k % 2]["name"],
                    "field": f"s{k % 2}_col_{k}",
                    "transformations": [
                        {
                            "type": "DIRECT",
                            "subtype": "IDENTITY" if k % 2 else "TRANSFORMATION",
                            "masking": k == 3,
                        }
                    ],
                }
            ]
        }
        for k in range(8)
    }
    return {
        "eventType": event_type,
        "eventTime": (
            f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:{(i // 60) % 60:02d}"
            f".{i % 1000:03d}Z"
        ),
        "producer": PRODUCER,
        "schemaURL": SCHEMA_URL,
        "run": {
            "runId": run_id,
            "facets": {
                "parent": {
                    "_producer": PRODUCER,
                    "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json",
                    "run": {"runId": str(uuid.UUID(int=i * 7919 + 1))},
                    "job": {"namespace": "airflow", "name": f"dag_{t % 50}"},
                }
            },
        },
        "job": {
            "namespace": "spark",
            "name": f"etl.job_{t}",
            "facets": {
                "sql": {
                    "_producer": PRODUCER,
                    "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/SQLJobFacet.json",
                    "query": (
                        f"INSERT INTO target_{t} SELECT * FROM source_{t} "
                        f"JOIN source_{t + 1} USING (id)"
                    ),
                }
            },
        },
        "inputs": inputs,
        "outputs": [
            {
                "namespace": "postgres://warehouse:5432",
                "name": f"analytics.public.target_{t}",
                "facets": {
                    "schema": _schema("out", 8),
                    "columnLineage": {
                        "_producer": PRODUCER,
                        "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
                        "fields": lineage_fields,
                    },
                },
            }
        ],
    }
