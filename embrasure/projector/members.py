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
# Bytes that may start an input's or output's own facets: a member holding them is read
# whole (a false alarm, the word inside a string, only costs that).
OWN_MARKS = (b'"inputFacets"', b'"outputFacets"')

_MEMBERS = msgspec.json.Decoder(dict[str, msgspec.Raw])


@dataclasses.dataclass(slots=True)
class Content:
    """What the content members of some events say, read once (the memo's entry)."""

    canonical: dict[str, bytes]  # each member's canonical JSON
    values: dict[str, Any]  # each member parsed (nothing downstream may change them)
    # Filled by the pipeline the first time it needs them (validate.job_of, _declared):
    # anything, cached as a pure function of the content.
    read: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class Members:
    """An object item: its small members parsed (``head``), its content read."""

    kind: str
    head: dict[str, Any]
    head_canonical: dict[str, bytes]
    content: Content

    def identity(self) -> str:
        """SHA-256 hex of the event's canonical JSON, from its members' (module doc)."""
        parts = {**self.head_canonical, **self.content.canonical}
        digest = hashlib.sha256()
        separator = b"{"
        for key in sorted(parts):
            digest.update(separator)
            digest.update(orjson.dumps(key))
            digest.update(b":")
            digest.update(parts[key])
            separator = b","
        digest.update(b"}" if parts else b"{}")
        return digest.hexdigest()


MEMO_SIZE = 4096  # distinct contents remembered (about a platform's job count)
_memo: dict[bytes, Content] = {}
# The canonical JSON of small members that repeat (producer, schemaURL, eventType).
_SMALL_SIZE = 1024
_small: dict[bytes, bytes] = {}
_REPEATED = frozenset({"producer", "schemaURL", "eventType"})


def read(raw: bytes) -> Members | None:
    """The item's members, or None when it is to be parsed whole (module doc)."""
    if raw.lstrip()[:1] != b"{":
        return None
    members = _MEMBERS.decode(raw)
    content_raw: dict[str, bytes] = {}
    head: dict[str, Any] = {}
    head_canonical: dict[str, bytes] = {}
    for key, value in members.items():
        if key in CONTENT:
            content_raw[key] = data = bytes(value)
            if key != "dataset" and any(mark in data for mark in OWN_MARKS):
                return None
        else:
            head[key], head_canonical[key] = _small_member(key, value)
    kind = _kind(head, content_raw)
    return Members(kind, head, head_canonical, _content(kind, content_raw))


def _small_member(key: str, raw: msgspec.Raw) -> tuple[Any, bytes]:
    """A small member parsed, and its canonical JSON."""
    if key in _REPEATED:
        data = bytes(raw)
        canonical = _small.get(data)
        if canonical is None:
            value = orjson.loads(data)
            if len(_small) >= _SMALL_SIZE:
                _small.clear()
            canonical = _small[data] = canonical_json(value)
            return value, canonical
        return orjson.loads(data), canonical
    value = orjson.loads(memoryview(raw))
    return value, canonical_json(value)


def _kind(head: dict[str, Any], content: dict[str, bytes]) -> str:
    """model.event_kind from the members: a member whose value is null is absent."""
    if head.get("run") is not None:
        return RUN_EVENT
    return JOB_EVENT if content.get("job", b"null") != b"null" else DATASET_EVENT


def _content(kind: str, raw: dict[str, bytes]) -> Content:
    key = hashlib.blake2b(kind.encode(), digest_size=16)
    for name in CONTENT:
        data = raw.get(name)
        # Length-prefixed, so that no two different contents give one stream.
        key.update(b"-" if data is None else len(data).to_bytes(8, "little") + data)
    digest = key.digest()
    found = _memo.get(digest)
    if found is None:
        values = {name: orjson.loads(data) for name, data in raw.items()}
        canonical = {name: canonical_json(value) for name, value in values.items()}
        found = Content(canonical, values)
        if len(_memo) >= MEMO_SIZE:
            _memo.clear()  # cheaper than LRU bookkeeping; refilled within one batch
        _memo[digest] = found
    return found


def cached(content: Content, name: str, compute: Callable[[], Any]) -> Any:
    """``compute()`` for ``content``, once: a pure function of it."""
    found = content.read.get(name, _MISSING)
    if found is _MISSING:
        found = content.read[name] = compute()
    return found


_MISSING = object()
