"""Administrative log entries: hide or unhide a dataset, job or namespace
(docs/operations.md#hiding-datasets-jobs-and-namespaces); tag or untag a dataset, a
dataset's field or a job, and define a tag (the Marquez API's tags, docs/marquez.md).

An admin's request is appended to the delivery log like a producer's delivery — route
``admin``, one item, provider_key ``embrasure-admin`` — so the graph stays a function of
the log and ``reproject`` keeps what admins decided. Producers cannot write one: the
ingest routes store only the routes ``single`` and ``batch``.

Hiding is not deleting: the entity's events are still projected, and its node, edges and
runs are kept, only left out of what the read API serves (query/hidden.py). The
latest entry for an entity, by log position, decides. Each hidden row keeps the position
of the entry that set it, and a merge takes the later one (schema.MERGES), so
projectors committing out of log order (PostgreSQL) reach the same table. Tag entries
fill the ``tags`` table by the same rule, one row per (kind, namespace, name, field,
tag); how the Marquez port reads them is query/tags.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import orjson

from embrasure.projector.validate import Invalid
from embrasure.store.rows import HiddenRow, TagRow

ROUTE = "admin"
PROVIDER_KEY = "embrasure-admin"
KINDS = ("dataset", "job", "namespace")
ACTIONS = ("hide", "unhide", "tag", "untag")
TAG_ACTIONS = ("tag", "untag")
# What a tag entry names: an entity, a dataset's field, or the tag itself (its
# definition, with a description; namespace '' and name the tag).
TAG_KINDS = ("dataset", "field", "job", "tag")
MAX_TAG = 1000  # characters of a tag's name
MAX_REASON = 1000  # characters


@dataclasses.dataclass(frozen=True)
class AdminEntry:
    """One hide, unhide, tag or untag, as stored in the log (``to_json``) and read back
    (``parse``). Entries stored before tags have no ``tag``, ``field`` or ``description``
    keys: they read as None."""

    action: str  # hide / unhide / tag / untag
    kind: str  # hide, unhide: dataset / job / namespace; tag, untag: TAG_KINDS
    namespace: str
    name: str  # '' for a namespace
    at: str  # when the admin asked: RFC 3339 UTC
    by: str | None  # the admin's token, "name (id)"; None while auth is off
    reason: str | None = None
    tag: str | None = None  # tag / untag: the tag
    field: str | None = None  # tag / untag of a field: the dataset's field
    description: str | None = None  # a tag's definition

    def to_json(self) -> bytes:
        return orjson.dumps(dataclasses.asdict(self), option=orjson.OPT_SORT_KEYS)

    @classmethod
    def parse(cls, doc: Any) -> AdminEntry:
        """The entry, or Invalid naming what is wrong with it."""
        if not isinstance(doc, dict):
            raise Invalid("an admin entry is a JSON object")
        action = _one_of(doc, "action", ACTIONS)
        tagging = action in TAG_ACTIONS
        kind = _one_of(doc, "kind", TAG_KINDS if tagging else KINDS)
        entry = cls(
            action=action,
            kind=kind,
            namespace=_text(doc, "namespace", empty=kind == "tag"),
            name=_text(doc, "name", empty=True),
            at=_text(doc, "at"),
            by=_optional(doc, "by"),
            reason=_optional(doc, "reason"),
            tag=_optional(doc, "tag"),
            field=_optional(doc, "field"),
            description=_optional(doc, "description"),
        )
        if tagging:
            entry._check_tag()
        elif (entry.kind == "namespace") != (entry.name == ""):
            raise Invalid("a namespace entry has an empty name; a dataset or job entry a name")
        if entry.reason is not None and len(entry.reason) > MAX_REASON:
            raise Invalid(f"reason is longer than {MAX_REASON} characters")
        return entry

    def _check_tag(self) -> None:
        if not self.tag or len(self.tag) > MAX_TAG:
            raise Invalid(f"a tag entry names a tag of 1 to {MAX_TAG} characters")
        if (self.kind == "field") != bool(self.field):
            raise Invalid("a field's tag entry names the field; no other tag entry does")
        if self.kind == "tag" and (self.namespace or self.name != self.tag):
            raise Invalid("a tag's definition has namespace '' and the tag as its name")
        if self.kind != "tag" and not self.name:
            raise Invalid("a tag entry names the dataset or job")
        if self.description is not None and len(self.description) > MAX_REASON:
            raise Invalid(f"description is longer than {MAX_REASON} characters")

    def row(self, seq: int) -> HiddenRow | TagRow:
        """Its ``hidden`` or ``tags`` row, decided at log position ``seq``."""
        if self.action in TAG_ACTIONS:
            assert self.tag is not None
            present = int(self.action == "tag")
            return TagRow(
                self.kind,
                self.namespace,
                self.name,
                self.field or "",
                self.tag,
                present,
                seq,
                self.description,
            )
        hidden = int(self.action == "hide")
        return HiddenRow(
            self.kind, self.namespace, self.name, hidden, seq, self.at, self.by, self.reason
        )


Decided = TypeVar("Decided", HiddenRow, TagRow)


def latest(rows: list[Decided]) -> list[Decided]:
    """One row per key, the latest in the log: a batch's rows, ready to merge."""
    best: dict[tuple[Any, ...], Decided] = {}
    for row in rows:
        key = tuple(row[: 5 if isinstance(row, TagRow) else 3])
        if key not in best or row.seq > best[key].seq:
            best[key] = row
    return [best[k] for k in sorted(best)]


def _one_of(doc: dict[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    value = doc.get(key)
    if value not in allowed:
        raise Invalid(f"{key} must be one of {', '.join(allowed)}; got {value!r}")
    return str(value)


def _text(doc: dict[str, Any], key: str, empty: bool = False) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or (not value and not empty):
        raise Invalid(f"{key} must be a {'' if empty else 'non-empty '}string")
    return value


def _optional(doc: dict[str, Any], key: str) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise Invalid(f"{key} must be a string or null")
    return value
