"""An item read from the log as its top-level members, the large ones left as sent.

A job runs hourly with the same job, datasets and facets: of a 4.7 KB event only the
run, its time and its type change (docs/projection.md#what-makes-it-fast-enough). So an
item the receiver stored (valid JSON, checked strictly) is split into its top-level
members without decoding them (msgspec), and only the small ones are parsed. The content
members — ``job``, ``inputs``, ``outputs``, ``dataset`` — are looked up by their bytes
in a memo (``content``) holding what the pipeline reads from them, read once per
distinct content: their parsed values, their canonical JSON, the job they name.

The event's identity (docs/architecture.md#event-identity) is the SHA-256 of its
canonical JSON, which is the members' canonical JSON joined in key order:
``{"k1":v1,"k2":v2}``, keys sorted by code point as orjson's OPT_SORT_KEYS sorts them
(tests/projector/test_members.py checks both spellings agree on random events). So the
identity needs no canonical form of the whole event, only of its small members.

An item that is not an object, or whose inputs or outputs carry their own facets
(``inputFacets``/``outputFacets``, about one run's use of them: different in every
event, so never a memo hit), is parsed whole instead (``read`` returns None).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from embrasure.model import DATASET_EVENT, JOB_EVENT, RUN_EVENT
from embrasure.projector.canonical import canonical_json

CONTENT = ("job", "inputs", "outputs", "dataset")
# The end of the names of an input's or output's own facets (``"inputFacets"``,
# ``"outputFacets"``), searched once: a member holding it is read whole (a false alarm,
# the word inside a string, only costs that). A name spelled with escapes is found when
# the content is parsed (``Content.own``).
OWN_MARK = b'Facets"'

_MEMBERS = msgspec.json.Decoder(dict[str, msgspec.Raw])


@dataclasses.dataclass(slots=True)
class Content:
    """What the content members of some events say, read once (the memo's entry)."""

    # Each member's name, and ``"name":value`` as canonical JSON writes it.
    canonical: list[tuple[str, bytes]]
    values: dict[str, Any]  # each member parsed (nothing downstream may change them)
    own: bool  # an input or output has facets of its own: the event is read whole
    # Filled by the pipeline the first time it needs them (validate.job_of, _declared):
    # anything, cached as a pure function of the content.
    read: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class Members:
    """An object item: its small members parsed (``head``), its content read."""

    kind: str
    head: dict[str, Any]
    head_canonical: list[tuple[str, bytes]]
    content: Content

    def identity(self) -> str:
        """SHA-256 hex of the event's canonical JSON, from its members' (module doc)."""
        parts = sorted(self.head_canonical + self.content.canonical)  # names are distinct
        return hashlib.sha256(b"{" + b",".join(p for _n, p in parts) + b"}").hexdigest()


MEMO_SIZE = 4096  # distinct contents remembered (about a platform's job count)
# Keyed by the content's bytes themselves: exact, and hashing them costs less than a
# digest. At most MEMO_SIZE contents (and their canonical JSON) are kept.
_memo: dict[tuple[str, bytes | None, bytes | None, bytes | None, bytes | None], Content] = {}
# Small members that repeat (producer, schemaURL, eventType): their value and canonical
# JSON by their bytes. A string or a number: nothing can change it.
_SMALL_SIZE = 1024
_small: dict[bytes, tuple[Any, bytes]] = {}
_REPEATED = frozenset({"producer", "schemaURL", "eventType"})
_names: dict[str, bytes] = {}  # member names as canonical JSON writes them


def read(raw: bytes) -> Members | None:
    """The item's members, or None when it is to be parsed whole (module doc)."""
    if raw.lstrip()[:1] != b"{":
        return None
    decoded = _MEMBERS.decode(raw)
    content_raw: list[bytes | None] = []
    for name in CONTENT:
        value = decoded.pop(name, None)
        data = None if value is None else bytes(value)
        if data is not None and name != "dataset" and OWN_MARK in data:
            return None
        content_raw.append(data)
    head: dict[str, Any] = {}
    head_canonical: list[tuple[str, bytes]] = []
    for name, value in decoded.items():
        head[name], canonical = _small_member(name, value)
        head_canonical.append((name, _name(name) + canonical))
    job = content_raw[0]
    if head.get("run") is not None:
        kind = RUN_EVENT
    else:  # model.event_kind: a member whose value is null is absent
        kind = JOB_EVENT if job is not None and job != b"null" else DATASET_EVENT
    key = (kind, job, content_raw[1], content_raw[2], content_raw[3])
    content = _memo.get(key)
    if content is None:
        content = _content(content_raw)
        if len(_memo) >= MEMO_SIZE:
            _memo.clear()  # cheaper than LRU bookkeeping; refilled within one batch
        _memo[key] = content
    return None if content.own else Members(kind, head, head_canonical, content)


def _name(name: str) -> bytes:
    """``"name":``"""
    found = _names.get(name)
    if found is None:
        if len(_names) >= _SMALL_SIZE:
            _names.clear()
        found = _names[name] = orjson.dumps(name) + b":"
    return found


def _small_member(name: str, raw: msgspec.Raw) -> tuple[Any, bytes]:
    """A small member parsed, and its canonical JSON."""
    if name in _REPEATED:
        data = bytes(raw)
        found = _small.get(data)
        if found is None:
            value = orjson.loads(data)
            if type(value) not in (str, int, float, bool, type(None)):
                return value, canonical_json(value)  # not shared: it could be changed
            if len(_small) >= _SMALL_SIZE:
                _small.clear()
            found = _small[data] = (value, canonical_json(value))
        return found
    value = orjson.loads(memoryview(raw))
    return value, canonical_json(value)


def _content(raw: list[bytes | None]) -> Content:
    named = zip(CONTENT, raw, strict=True)
    values = {name: orjson.loads(data) for name, data in named if data is not None}
    canonical = [(name, _name(name) + canonical_json(value)) for name, value in values.items()]
    own = any(
        isinstance(item, dict) and own_key in item
        for key, own_key in (("inputs", "inputFacets"), ("outputs", "outputFacets"))
        if isinstance(values.get(key), list)
        for item in values[key]
    )
    return Content(canonical, values, own)


def cached(content: Content, name: str, compute: Callable[[], Any]) -> Any:
    """``compute()`` for ``content``, once: a pure function of it."""
    found = content.read.get(name, _MISSING)
    if found is _MISSING:
        found = content.read[name] = compute()
    return found


_MISSING = object()
