"""The quality mark of lineage and impact answers (docs/queries.md#what-each-run-did): a
dataset node gets ``quality: "failed"`` when one of its data-quality checks failed the
last time it ran.

A check is an assertion of a dataQualityAssertions facet (its assertion, column and
name), sent for the dataset under any of its identities and in either role; its latest
result, by eventTime, is kept by the projector in ``dataset_checks``
(projector/quality.py). The issue asked for "the latest write"; OpenLineage sends
assertions as an input facet of the run that checks the dataset (a dbt test, a Great
Expectations checkpoint), not of the run that wrote it, and dbt runs each test as a run
of its own, so each check's latest result is what the facets allow.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from embrasure.model import DatasetId
from embrasure.projector.quality import Check, later_check
from embrasure.query.entities import Identities
from embrasure.store.base import GraphReader
from embrasure.store.rows import DatasetCheckRow

FAILED = "failed"


def failed_datasets(
    reader: GraphReader, ids: Identities, nodes: Iterable[DatasetId]
) -> set[DatasetId]:
    """Those of the (canonical) ``nodes`` with a check whose latest result failed."""
    members = ids.members(nodes)
    node_of = {m: node for node, group in members.items() for m in group}
    latest: dict[tuple[DatasetId, str], Check] = {}
    for row in reader.rows(
        DatasetCheckRow, ("ds_ns", "ds_name"), [(m.namespace, m.name) for m in node_of]
    ):
        key = (node_of[DatasetId(row.ds_ns, row.ds_name)], row.check_id)
        latest[key] = later_check(
            latest.get(key), (row.check_key, bytes(row.check_hash), row.failed)
        )
    return {node for (node, _check), result in latest.items() if result[2]}


def mark_failed(reader: GraphReader, ids: Identities, nodes: Iterable[dict[str, Any]]) -> None:
    """Add ``quality: "failed"`` to the dataset nodes (JSON, as entities.dataset_node
    makes them) with a check whose latest result failed."""
    datasets = [n for n in nodes if n.get("type") == "dataset"]
    failed = failed_datasets(reader, ids, (DatasetId(n["namespace"], n["name"]) for n in datasets))
    for n in datasets:
        if DatasetId(n["namespace"], n["name"]) in failed:
            n["quality"] = FAILED
