"""The facet merge rule: which value of a facet name is current (docs/projection.md#facets).

Rule, per entity and facet name, over the SET of records ever seen for it:

- the value from the latest eventTime wins; an unknown eventTime orders before every known
  one (docs/projection.md#validation); equal eventTimes break by the larger value hash
  (BLAKE2b-128 of the value's canonical JSON: sorted keys, no insignificant whitespace),
  then — when even the values are equal — by the larger event id, so that the event
  credited with the value is deterministic too. The hash is as total an order as the JSON
  it replaced (equal hashes: equal values, barring a BLAKE2b collision) and is what the
  store keeps (docs/architecture.md#storage): a stored row ranks by 16 bytes, not by a
  value of kilobytes;
- a job or dataset facet carrying ``"_deleted": true`` is a deletion marker (OpenLineage
  proposal 1837, "static lineage and deleted facets"): it removes the facet when its
  eventTime is not older than the winning value's (deletion time >= value time). A later
  value brings the facet back. ``"_deleted": null`` or ``false`` is an ordinary value.
  Run, input and output facets cannot be deleted (proposal 1837), so callers merging those
  pass ``honour_deleted=False`` and the marker is then an ordinary value.

Every step is a maximum under a total order, so the result depends on the set of records
only: any order, duplication or split of the history gives the same answer
(docs/architecture.md#order-independence). ``FacetSlot`` is that maximum kept per name (the
best value and the latest deletion); it is a join-semilattice (``merge_slots`` is
commutative, associative, idempotent), so a store can fold new records into what it already
holds without re-reading the history.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, TypeVar

from embrasure.model import EventTime
from embrasure.projector.canonical import canonical_json

_K = TypeVar("_K")  # a slot's key: a facet name, or (owner, name)


class FacetRecord(NamedTuple):
    """One facet value as one event set it. A plain 4-tuple works too."""

    name: str
    time: EventTime | None
    event_id: str
    value: Any


@dataclasses.dataclass(frozen=True, slots=True)
class FacetValue:
    """A facet's current value and which event set it, when (the facet history's head)."""

    value: Any
    event_id: str
    time: EventTime | None
    # The value's canonical JSON and its hash when the caller has them already (a stored
    # row holds the hash); computed on demand otherwise. Ranking values compares hashes.
    canonical: bytes = dataclasses.field(default=b"", compare=False, repr=False)
    digest: bytes = dataclasses.field(default=b"", compare=False, repr=False)

    def canonical_json(self) -> bytes:
        return self.canonical or canonical_json(self.value)

    def value_hash(self) -> bytes:
        return self.digest or value_hash(self.canonical_json())


@dataclasses.dataclass(frozen=True, slots=True)
class FacetSlot:
    """What decides one facet name: the best value and the latest deletion marker seen."""

    value: FacetValue | None = None
    deletion: FacetValue | None = None

    @property
    def current(self) -> FacetValue | None:
        """The surviving value, or None when there is none or a deletion covers it."""
        if self.value is None:
            return None
        if self.deletion is not None and time_key(self.deletion.time) >= time_key(self.value.time):
            return None
        return self.value


def value_hash(canonical: bytes) -> bytes:
    """A facet value's key in facet_values and its rank among equal times: BLAKE2b-128
    of its canonical JSON."""
    return hashlib.blake2b(canonical, digest_size=16).digest()


def time_key(time: EventTime | None) -> tuple[bool, str]:
    """Sort key of an eventTime: unknown (None) before every known time.

    Only ``EventTime.key`` counts: two spellings of one instant are the same time.
    """
    return (False, "") if time is None else (True, time.key)


def is_deletion(value: Any) -> bool:
    """``{"_deleted": true, …}``: JSON true only — null, false or "true" are values."""
    return isinstance(value, dict) and value.get("_deleted") is True


def _rank(item: FacetValue) -> tuple[tuple[bool, str], bytes, str]:
    # schema.MERGES["facets"] ranks stored rows the same way (value_key, value_hash); the
    # event id it does not store only makes the Python fold's choice deterministic.
    return (time_key(item.time), item.value_hash(), item.event_id)


def _later(a: FacetValue | None, b: FacetValue | None) -> FacetValue | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if _rank(a) >= _rank(b) else b


def merge_slots(a: FacetSlot, b: FacetSlot) -> FacetSlot:
    """Join two partial results for one facet name (order- and grouping-free)."""
    return FacetSlot(_later(a.value, b.value), _later(a.deletion, b.deletion))


def fold_value(
    slots: dict[_K, FacetSlot],
    key: _K,
    item: tuple[Any, str, EventTime | None, bytes, bytes],
    deletion: bool,
) -> None:
    """``slots[key]`` joined with one value (``FacetValue``'s fields, in its order) as
    ``merge_slots`` joins it, in place. Most values a batch folds lose to the one held
    (a run's facets repeat in each of its events), so the loser's slot is not built."""
    value, event_id, time, canonical, digest = item
    old = slots.get(key)
    if old is not None:
        held = old.deletion if deletion else old.value
        digest = digest or value_hash(canonical or canonical_json(value))
        if held is not None and _rank(held) >= (time_key(time), digest, event_id):
            return
    new = FacetValue(value, event_id, time, canonical, digest)
    if old is None:
        slots[key] = FacetSlot(None, new) if deletion else FacetSlot(new)
    else:
        slots[key] = FacetSlot(old.value, new) if deletion else FacetSlot(new, old.deletion)


def fold_facets(
    history: Iterable[FacetRecord | tuple[str, EventTime | None, str, Any]],
    *,
    honour_deleted: bool = True,
    into: Mapping[str, FacetSlot] | None = None,
) -> dict[str, FacetSlot]:
    """Fold facet records into one slot per name, starting from ``into`` when given."""
    slots: dict[str, FacetSlot] = dict(into) if into is not None else {}
    for name, time, event_id, value in history:
        canonical = canonical_json(value)
        item = (value, event_id, time, canonical, value_hash(canonical))
        fold_value(slots, name, item, honour_deleted and is_deletion(value))
    return slots


def current_of(slots: Mapping[str, FacetSlot]) -> dict[str, FacetValue]:
    """The surviving value per facet name, names sorted (a stable export order)."""
    out: dict[str, FacetValue] = {}
    for name in sorted(slots):
        value = slots[name].current
        if value is not None:
            out[name] = value
    return out


def current_facets(
    history: Iterable[FacetRecord | tuple[str, EventTime | None, str, Any]],
    *,
    honour_deleted: bool = True,
) -> dict[str, FacetValue]:
    """The current value of every facet name in ``history`` (docs/projection.md#facets).

    ``honour_deleted=False`` for run facets and input/output facets, which proposal 1837
    says cannot be deleted: ``{"_deleted": true}`` there is just a value.
    """
    return current_of(fold_facets(history, honour_deleted=honour_deleted))
