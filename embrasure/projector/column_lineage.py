"""Column lineage: field → field facts from one event, and the edge merge across events.

Implements docs/projection.md#column-lineage over ColumnLineageDatasetFacet 1-2-0 (per input
field ``transformations`` and the facet-level ``dataset`` array) and its older shapes:
1-0-0 (``inputFields`` only) and 1-0-1/1-0-2 (per output field ``transformationType`` /
``transformationDescription``, deprecated since 1-1-0).

Extraction (``extract``, a function of one event's datasets):

- Each input field names a dataset (namespace, name) that must be one of the SAME event's
  inputs, by identity or by alias (an input's TABLE symlinks are its identities). Anything
  else, and empty field names, are ignored with a warning — never guessed.
- Per input field, from its transformations (1-1-0+): DIRECT/IDENTITY → direct,
  DIRECT/TRANSFORMATION → expression, DIRECT/AGGREGATION → aggregate; the strongest wins
  (aggregate > expression > direct); an unknown type or subtype counts as expression. When
  every transformation is INDIRECT the field is an indirect dependency (kind "indirect",
  no class). Without transformations the deprecated per-output-field ``transformationType``
  decides: IDENTITY → direct, any other non-empty string → expression (MASKED, the other
  value the 1-0-1 schema documents, also marks the mapping masked). No metadata at all →
  expression. ``masking: true`` on any transformation marks the fact masked.
- The facet's dataset-level ``dataset`` entries are indirect dependencies of every output
  field: the keys of ``fields`` and the top-level fields of the same output's ``schema``
  facet (a column fed only by, say, ``count(*)`` has no ``fields`` entry but is grouped all
  the same).
- Subtypes are kept qualified by their type, ``"INDIRECT/JOIN"``, ``"DIRECT/IDENTITY"``
  (a type without subtype is kept alone), so the INDIRECT subtypes of a mapping stay
  distinguishable from its DIRECT ones and unknown strings are kept verbatim.
- One fact per (source dataset, source field, target dataset, target field): duplicates
  within the event merge with the cross-event rule below.

Merge (``edge_of`` then ``merge_edges``, over the set of facts of every event): one edge per (source
field, target field, job); the class is the strongest ever seen, a mapping beats an
indirect dependency, ``masked`` is true if any fact said so, subtypes are unioned; a
declared fact beats one derived from SQL (``derived="sql"``): when any declared fact
exists for an edge, the derived ones are ignored. All joins of a semilattice, so any
order, duplication or split gives the same edges (docs/architecture.md#order-independence).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from embrasure.model import ColumnFact, DatasetFacts, DatasetId, JobId

MAPPING = "mapping"
INDIRECT = "indirect"
# Strength order of mapping classes: the strongest of several wins.
CLASSES = ("direct", "expression", "aggregate")
_DIRECT_SUBTYPES = {
    "IDENTITY": "direct",
    "TRANSFORMATION": "expression",
    "AGGREGATION": "aggregate",
}


class ColumnEdgeKey(NamedTuple):
    source: DatasetId
    source_field: str
    target: DatasetId
    target_field: str
    job: JobId | None


@dataclasses.dataclass(frozen=True, slots=True)
class ColumnEdge:
    """A field → field edge of one job, merged over every event that declared it."""

    source: DatasetId
    source_field: str
    target: DatasetId
    target_field: str
    job: JobId | None
    kind: str  # "mapping" or "indirect"
    klass: str | None  # direct / expression / aggregate for mappings, else None
    masked: bool
    subtypes: tuple[str, ...]  # sorted, "TYPE/SUBTYPE"
    derived: str | None = None  # "sql" when only derived facts ever named it

    @property
    def key(self) -> ColumnEdgeKey:
        return ColumnEdgeKey(
            self.source, self.source_field, self.target, self.target_field, self.job
        )

    @property
    def indirect(self) -> tuple[str, ...]:
        """The INDIRECT subtypes (the API's ``indirect``)."""
        return indirect_subtypes(self.subtypes)


def indirect_subtypes(subtypes: Iterable[str]) -> tuple[str, ...]:
    """``("DIRECT/IDENTITY", "INDIRECT/JOIN")`` → ``("JOIN",)``."""
    return tuple(s[len("INDIRECT/") :] for s in subtypes if s.startswith("INDIRECT/"))


# -- extraction ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Dep:
    """One input field's dependency as read from the facet, before merging (shared
    between fields: _classify remembers them)."""

    kind: str
    klass: str | None
    masked: bool
    subtypes: frozenset[str]


def _stronger(a: str | None, b: str | None) -> str | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if CLASSES.index(a) >= CLASSES.index(b) else b


def _classify(entry: Mapping[str, Any], legacy: Any) -> _Dep:
    transformations = entry.get("transformations")
    items = (
        [t for t in transformations if isinstance(t, dict)]
        if isinstance(transformations, list)
        else []
    )
    if not items:
        # 1-0-x shape: no per-input metadata; the deprecated per-output-field
        # transformationType applies to every input field of that output field. An empty
        # string (openlineage-airflow's SQL extractor sends "") is no metadata.
        if isinstance(legacy, str) and legacy:
            legacy_class = "direct" if legacy == "IDENTITY" else "expression"
            return _Dep(MAPPING, legacy_class, legacy == "MASKED", frozenset())
        return _Dep(MAPPING, "expression", False, frozenset())
    # Each transformation as the rule reads it; a platform's column lineage repeats a
    # handful of them thousands of times, so their reading is remembered.
    read = tuple(_transformation(t) for t in items)
    found = _classified.get(read)
    if found is None:
        if len(_classified) >= 4096:
            _classified.clear()
        found = _classified[read] = _classify_read(read)
    return found


Transformation = tuple[str, str | None, bool]  # type ('' none), subtype (None), masking
_classified: dict[tuple[Transformation, ...], _Dep] = {}


def _transformation(t: dict[str, Any]) -> Transformation:
    typ, sub = t.get("type"), t.get("subtype")
    return (
        typ if isinstance(typ, str) else "",
        sub if isinstance(sub, str) and sub else None,
        t.get("masking") is True,
    )


def _classify_read(read: tuple[Transformation, ...]) -> _Dep:
    klass: str | None = None
    masked = False
    subtypes: set[str] = set()
    for kind_s, sub_s, masking in read:
        if kind_s or sub_s:
            subtypes.add(f"{kind_s}/{sub_s}" if sub_s else kind_s)
        masked = masked or masking
        if kind_s == "INDIRECT":
            continue
        if kind_s == "DIRECT" and sub_s in _DIRECT_SUBTYPES:
            klass = _stronger(klass, _DIRECT_SUBTYPES[sub_s])
        else:  # unknown type, or DIRECT with an unknown or missing subtype
            klass = _stronger(klass, "expression")
    return _Dep(MAPPING if klass is not None else INDIRECT, klass, masked, frozenset(subtypes))


def _merge_dep(a: _Dep | None, b: _Dep) -> _Dep:
    if a is None:
        return b
    return _Dep(
        MAPPING if MAPPING in (a.kind, b.kind) else INDIRECT,
        _stronger(a.klass, b.klass),
        a.masked or b.masked,
        a.subtypes | b.subtypes,
    )


class _Inputs:
    """Matches a dataset named in a columnLineage facet to one of the event's inputs."""

    def __init__(
        self,
        inputs: Sequence[DatasetFacts],
        resolve: Callable[[DatasetId], DatasetId | None] | None,
    ) -> None:
        self._exact = {d.id for d in inputs}
        self._alias: dict[DatasetId, DatasetId] = {}
        for d in sorted(inputs, key=lambda d: d.id, reverse=True):
            # Two inputs sharing a TABLE alias are one node (symlinks.py), so either may
            # stand for it; the smallest wins (the loop runs largest first).
            for s in d.symlinks:
                if s.type == "TABLE":
                    self._alias[s.target] = d.id
        self._resolve = resolve
        self._canonical: dict[DatasetId, DatasetId] | None = None
        self._inputs = inputs

    def match(self, named: DatasetId) -> DatasetId | None:
        if named in self._exact:
            return named
        found = self._alias.get(named)
        if found is not None or self._resolve is None:
            return found
        canonical = self._resolve(named)
        return None if canonical is None else self._by_canonical().get(canonical)

    def _by_canonical(self) -> dict[DatasetId, DatasetId]:
        if self._canonical is None:
            assert self._resolve is not None
            self._canonical = {}
            for d in sorted(self._inputs, key=lambda d: d.id, reverse=True):
                for ident in (d.id, *(s.target for s in d.symlinks if s.type == "TABLE")):
                    c = self._resolve(ident)
                    if c is not None:
                        self._canonical[c] = d.id
        return self._canonical


def schema_fields(output: DatasetFacts) -> list[str]:
    """The field names of a dataset's SchemaDatasetFacet (``fields[].name``)."""
    schema = output.facets.get("schema")
    fields = schema.get("fields") if isinstance(schema, dict) else None
    if not isinstance(fields, list):
        return []
    return [f["name"] for f in fields if isinstance(f, dict) and isinstance(f.get("name"), str)]


def _label(d: DatasetId) -> str:
    return f"{d.namespace}:{d.name}"


class _Entry(NamedTuple):
    """One input field entry of a columnLineage facet, with the output field it feeds."""

    target: DatasetId
    out_field: str
    entry: Any
    legacy: Any  # the deprecated per-output-field transformationType (1-0-1/1-0-2)
    dataset_level: bool  # from the facet's ``dataset`` array


def _field_entries(
    output: DatasetFacts, fields: Mapping[str, Any]
) -> tuple[list[_Entry], set[str], set[str]]:
    """The ``fields`` entries of an output's facet, its output field names, and warnings."""
    entries: list[_Entry] = []
    out_fields: set[str] = set()
    warnings: set[str] = set()
    for out_field, spec in fields.items():
        if not out_field:
            warnings.add(
                f"columnLineage of {_label(output.id)}: an output field with an empty name "
                "was ignored"
            )
            continue
        out_fields.add(out_field)
        if not isinstance(spec, dict):
            continue
        listed = spec.get("inputFields")
        legacy = spec.get("transformationType")
        entries += [
            _Entry(output.id, out_field, entry, legacy, False)
            for entry in (listed if isinstance(listed, list) else ())
        ]
    return entries, out_fields, warnings


def _facet_entries(output: DatasetFacts, facet: Mapping[str, Any]) -> tuple[list[_Entry], set[str]]:
    """Every input field entry of an output's columnLineage facet, and warnings: the
    ``fields`` entries, then the ``dataset`` ones for every field the output names."""
    fields = facet.get("fields")
    entries, out_fields, warnings = _field_entries(
        output, fields if isinstance(fields, dict) else {}
    )
    dataset_level = facet.get("dataset")
    if isinstance(dataset_level, list) and dataset_level:
        out_fields.update(f for f in schema_fields(output) if f)
        if not out_fields:
            warnings.add(
                f"columnLineage of {_label(output.id)}: dataset-level dependencies were "
                "ignored: the output names no fields"
            )
        entries += [
            _Entry(output.id, out_field, entry, None, True)
            for out_field in sorted(out_fields)
            for entry in dataset_level
        ]
    return entries, warnings


def _named_field(target: DatasetId, entry: Any) -> tuple[DatasetId, str] | str:
    """The (dataset, field) an input field entry names, or the warning that ignores it."""
    # The warning's prefix is built only for a warning: this runs for every field.
    if not isinstance(entry, dict):
        return (
            f"columnLineage of {_label(target)}: an input field that is not an object was ignored"
        )
    ns, name, field = entry.get("namespace"), entry.get("name"), entry.get("field")
    if not (isinstance(ns, str) and isinstance(name, str) and isinstance(field, str)):
        return (
            f"columnLineage of {_label(target)}: an input field without namespace, name "
            "and field was ignored"
        )
    if not field:
        return (
            f"columnLineage of {_label(target)}: an input field of "
            f"{_label(DatasetId(ns, name))} with an empty field name was ignored"
        )
    return DatasetId(ns, name), field


def _dep_of(item: _Entry) -> _Dep:
    dep = _classify(item.entry, item.legacy)
    if item.dataset_level and dep.kind == MAPPING:
        # The facet calls these "lineage that affects the whole dataset";
        # docs/projection.md#column-lineage makes them indirect dependencies of every field,
        # whatever their type says.
        return _Dep(INDIRECT, None, dep.masked, dep.subtypes)
    return dep


def _unmatched_warnings(unmatched: Mapping[tuple[DatasetId, DatasetId], set[str]]) -> set[str]:
    return {
        f"columnLineage of {_label(target)}: input dataset {_label(named)} is not among "
        f"the event's inputs; ignored for {len(out_fields)} field(s)"
        for (target, named), out_fields in unmatched.items()
    }


def _facts_of(
    deps: Mapping[tuple[DatasetId, str, DatasetId, str], _Dep],
) -> tuple[ColumnFact, ...]:
    return tuple(
        ColumnFact(
            target=target,
            target_field=target_field,
            source=source,
            source_field=source_field,
            kind=dep.kind,
            klass=dep.klass,
            masked=dep.masked,
            subtypes=tuple(sorted(dep.subtypes)),
        )
        for (source, source_field, target, target_field), dep in sorted(deps.items())
    )


def extract(
    outputs: Sequence[DatasetFacts],
    inputs: Sequence[DatasetFacts],
    resolve_input: Callable[[DatasetId], DatasetId | None] | None = None,
) -> tuple[tuple[ColumnFact, ...], tuple[str, ...]]:
    """Column facts declared by the outputs' columnLineage facets, and warnings.

    ``resolve_input`` (optional) maps an identity to its canonical node identity as the
    store knows it, so that an input field named by an alias learned from ANOTHER event
    still matches. That makes the result depend on what the store knew when the event was
    projected; the pure, order-independent reading is without it (the default), where only
    the event's own inputs and their TABLE symlinks count, as
    docs/projection.md#column-lineage requires. Facts and warnings come out sorted, so equal
    events give equal results.
    """
    match = _Inputs(inputs, resolve_input)
    deps: dict[tuple[DatasetId, str, DatasetId, str], _Dep] = {}
    unmatched: dict[tuple[DatasetId, DatasetId], set[str]] = {}
    warnings: set[str] = set()
    for output in outputs:
        facet = output.facets.get("columnLineage")
        if not isinstance(facet, dict) or facet.get("_deleted") is True:
            continue
        entries, found = _facet_entries(output, facet)
        warnings |= found
        for item in entries:
            named = _named_field(item.target, item.entry)
            if isinstance(named, str):
                warnings.add(named)
                continue
            source = match.match(named[0])
            if source is None:
                unmatched.setdefault((item.target, named[0]), set()).add(item.out_field)
                continue
            key = (source, named[1], item.target, item.out_field)
            deps[key] = _merge_dep(deps.get(key), _dep_of(item))
    warnings |= _unmatched_warnings(unmatched)
    return _facts_of(deps), tuple(sorted(warnings))


# -- merge across events ---------------------------------------------------------------------


def edge_of(job: JobId | None, fact: ColumnFact) -> ColumnEdge:
    """The edge one fact declares, before merging with the others."""
    mapping = fact.kind == MAPPING
    return ColumnEdge(
        source=fact.source,
        source_field=fact.source_field,
        target=fact.target,
        target_field=fact.target_field,
        job=job,
        kind=MAPPING if mapping else INDIRECT,
        # A mapping always has a class: none or an unknown one (a SQL parser's, say)
        # counts as expression, as unknown transformation metadata does.
        klass=(fact.klass if fact.klass in CLASSES else "expression") if mapping else None,
        masked=fact.masked,
        subtypes=tuple(sorted(set(fact.subtypes))),
        derived=fact.derived,
    )


def merge_edges(a: ColumnEdge, b: ColumnEdge) -> ColumnEdge:
    """Join two edges with the same key (commutative, associative, idempotent)."""
    if a.key != b.key:
        raise ValueError(f"cannot merge different column edges: {a.key} and {b.key}")
    if a == b:
        return a  # idempotent, and the common case: every run of a job says the same
    # Declared (derived None) beats derived: a lexicographic join, so still a semilattice.
    if (a.derived is None) != (b.derived is None):
        return a if a.derived is None else b
    kind = MAPPING if MAPPING in (a.kind, b.kind) else INDIRECT
    return dataclasses.replace(
        a,
        kind=kind,
        klass=_stronger(a.klass, b.klass) if kind == MAPPING else None,
        masked=a.masked or b.masked,
        subtypes=tuple(sorted(set(a.subtypes) | set(b.subtypes))),
        derived=a.derived if a.derived == b.derived else min(a.derived or "", b.derived or ""),
    )
