"""Checking standard facets against their OpenLineage schemas (docs/projection.md#validation).

The schemas are the OpenLineage 2-0-2 core schema and the current facet schemas, bundled
in ``schemas/`` (see its README.md): nothing is fetched at run time, every
``https://openlineage.io/spec/...`` reference resolves from the bundled copy, and each
validator is compiled once, at import.

Which facets are standard, and where: a facet schema file defines facet keys (its
``properties``) whose definitions extend one of the core bases, and the base says where
the facet goes — ``RunFacet`` → ``run.facets``, ``JobFacet`` → ``job.facets``,
``DatasetFacet`` → a dataset's ``facets``, ``InputDatasetFacet`` → ``inputFacets``,
``OutputDatasetFacet`` → ``outputFacets``. So ``ownership`` is checked against
OwnershipJobFacet in job facets and OwnershipDatasetFacet in dataset facets, ``subset``
against the input or output variant, and a key found where its schema does not put it
(dbt sends ``dataQualityAssertions``, an *input* facet, in dataset ``facets``) is a
custom facet at that place.

Policy:

- A standard facet that breaks its schema is dropped from the event with a warning naming
  the facet, the schema (name and version) and the first error; the event itself goes on.
- The base facet's required ``_producer`` and ``_schemaURL`` are NOT enforced: most
  producer fixtures omit them and Marquez, the reference receiver, accepts them. The
  bundled core schema is relaxed in memory for that; every other rule stays.
- A member whose value is ``null`` is read as absent: openlineage-dbt writes unset
  optional fields as null (``"_deleted": null`` on job facets, ``"stackTrace": null`` in
  errorMessage, ``"description": null`` in schema fields), and dropping a whole
  errorMessage facet for a null stack trace would hide the error. A required field that
  is null still breaks the schema. The facet is kept as sent, nulls included.
- ``format`` keywords (uuid, date-time, uri) are annotations, as JSON Schema 2020-12
  makes them by default: a nominalTime without a timezone is read, not dropped.
- A job or dataset facet with ``"_deleted": true`` is a deletion marker (proposal 1837;
  only JobFacet and DatasetFacet define ``_deleted`` in 2-0-2): it is not checked, as it
  need not carry the facet's required fields. An input's or output's own facet with it
  is one too: Embrasure keeps those per run and lets a later event of the run take one
  back (docs/projection.md#what-each-run-did). On run facets the key means nothing, so
  those are checked like any value.
- Custom facets (keys no schema defines at that place) are kept unchecked, but a facet
  value must be a JSON object (every core base is ``type: object``): any other value is
  dropped with a warning, custom or not.
- Facets are checked against the CURRENT schema version, whatever their ``_schemaURL``
  says. The one known casualty: DataQualityMetricsInputDatasetFacet requires
  ``columnMetrics`` in every published version (1-0-0 to 1-0-3), yet Marquez and the
  fluentd proxy accept ``event_full.json`` whose ``dataQualityMetrics`` input facet has
  only rowCount and bytes. The rule holds: that facet is dropped with a warning and the
  event is projected (the fluentd proxy itself flags the same shape as invalid in
  ``event_invalid_input_dataset_facet.json``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from importlib import resources
from types import MappingProxyType
from typing import Any

import jsonschema_rs

from embrasure.receiver.jsonguard import json_type

CORE_ID = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
# Where a facet goes, by the core base its definition extends (OpenLineage 2-0-2 $defs).
BASE_LOCATION = {
    "RunFacet": "run",
    "JobFacet": "job",
    "DatasetFacet": "dataset",
    "InputDatasetFacet": "inputFacets",
    "OutputDatasetFacet": "outputFacets",
}
LOCATIONS = tuple(BASE_LOCATION.values())
# Locations where ``_deleted: true`` is a marker: the bases that define it (job, dataset),
# and the per-run input and output facets (docs/projection.md#what-each-run-did).
DELETABLE = frozenset({"job", "dataset", "inputFacets", "outputFacets"})
MAX_ERROR_CHARS = 300  # a schema error can quote a whole facet: keep warnings readable


@dataclasses.dataclass(frozen=True, slots=True)
class FacetSchema:
    """The schema of one standard facet key at one location."""

    key: str
    location: str
    name: str  # the $defs name, e.g. "OwnershipJobFacet"
    version: str  # from the schema's $id, e.g. "1-0-1"
    validator: jsonschema_rs.Validator

    def first_error(self, value: Any) -> str | None:
        """The first way ``value`` breaks the schema, as "at /pointer: message"; or None."""
        # Most facets pass as sent: only a failing one pays for the copy without nulls
        # (a null member can only break a schema, never satisfy it) and for the error.
        if self.validator.is_valid(value):
            return None
        error = next(self.validator.iter_errors(without_nulls(value)), None)
        if error is None:
            return None
        pointer = "".join(
            "/" + str(part).replace("~", "~0").replace("/", "~1")  # RFC 6901 escaping
            for part in error.instance_path
        )
        message = error.message
        if len(message) > MAX_ERROR_CHARS:
            # The quoted instance comes first and the rule last ("… is not of type"): keep
            # both ends.
            message = message[:100] + " … " + message[-(MAX_ERROR_CHARS - 103) :]
        return f"at {pointer or '/'}: {message}"


def without_nulls(value: Any) -> Any:
    """``value`` without the object members whose value is null, at any depth: the
    reading of null as "absent" that the checks use (see the module docstring)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def _load_documents() -> list[dict[str, Any]]:
    folder = resources.files(__package__).joinpath("schemas")
    return [
        json.loads(entry.read_text(encoding="utf-8"))
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".json")
    ]


def _relaxed_core(core: dict[str, Any]) -> dict[str, Any]:
    """The core schema without BaseFacet's ``required: [_producer, _schemaURL]``."""
    relaxed: dict[str, Any] = json.loads(json.dumps(core))
    relaxed["$defs"]["BaseFacet"].pop("required", None)
    return relaxed


def _location_of(definition: dict[str, Any]) -> str | None:
    for part in definition.get("allOf", ()):
        ref = part.get("$ref", "") if isinstance(part, dict) else ""
        base, _, pointer = ref.partition("#/$defs/")
        if base == CORE_ID and pointer in BASE_LOCATION:
            return BASE_LOCATION[pointer]
    return None


def _facet_defs(doc: dict[str, Any], node: dict[str, Any]) -> Iterator[str]:
    """Names of the facet definitions ``node`` stands for, through local refs and
    anyOf/oneOf (LineageFacet: dataset or job; BaseSubsetDatasetFacet: input or output)."""
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        target = doc["$defs"][name]
        if _location_of(target) is not None:
            yield name
        else:
            yield from _facet_defs(doc, target)
    for combinator in ("anyOf", "oneOf"):
        for sub in node.get(combinator, ()):
            yield from _facet_defs(doc, sub)


def _build() -> Mapping[str, Mapping[str, FacetSchema]]:
    documents = _load_documents()
    core = next(doc for doc in documents if doc.get("$id") == CORE_ID)
    facet_docs = [doc for doc in documents if doc is not core]
    registry = jsonschema_rs.Registry(
        [(CORE_ID, _relaxed_core(core))] + [(doc["$id"], doc) for doc in facet_docs]
    )
    table: dict[str, dict[str, FacetSchema]] = {location: {} for location in LOCATIONS}
    for doc in facet_docs:
        version = doc["$id"].rsplit("/", 2)[-2]  # .../facets/1-0-1/OwnershipJobFacet.json
        for key, prop in doc.get("properties", {}).items():
            for name in _facet_defs(doc, prop):
                location = _location_of(doc["$defs"][name])
                assert location is not None
                if key in table[location]:
                    raise RuntimeError(f"two bundled schemas define {location} facet {key!r}")
                validator = jsonschema_rs.Draft202012Validator(
                    {"$ref": f"{doc['$id']}#/$defs/{name}"}, registry=registry, offline=True
                )
                table[location][key] = FacetSchema(key, location, name, version, validator)
    return MappingProxyType({loc: MappingProxyType(keys) for loc, keys in table.items()})


STANDARD_FACETS: Mapping[str, Mapping[str, FacetSchema]] = _build()


def check_facets(
    location: str, facets: Mapping[str, Any], where: str
) -> tuple[dict[str, Any], list[str]]:
    """The facets to keep and a warning per dropped one.

    ``location`` is one of LOCATIONS; ``where`` names the facets object in warnings
    (e.g. ``"outputs[0].outputFacets"``).
    """
    schemas = STANDARD_FACETS[location]
    kept: dict[str, Any] = {}
    warnings: list[str] = []
    for key, value in facets.items():
        if not isinstance(value, dict):
            warnings.append(
                f"{where}.{key} dropped: a facet must be an object, not {json_type(value)}"
            )
            continue
        schema = schemas.get(key)
        if schema is None or (location in DELETABLE and value.get("_deleted") is True):
            kept[key] = value
            continue
        try:
            error = schema.first_error(value)
        except Exception as exc:  # e.g. a number the validator cannot convert
            error = f"it could not be checked ({type(exc).__name__}: {exc})"
        if error is None:
            kept[key] = value
        else:
            warnings.append(
                f"{where}.{key} dropped: it breaks {schema.name} {schema.version} {error}"
            )
    return kept, warnings
