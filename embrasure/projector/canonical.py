"""An event's canonical JSON and identity (docs/architecture.md#event-identity).

Canonical JSON here is orjson's compact output with sorted keys: object keys in code
point order, no insignificant whitespace (RFC 8259 §2), strings as UTF-8 with only the
escapes JSON requires. Two deliveries of the same event — re-indented, keys reordered,
``\\u00e9`` written as ``é`` — parse to the same value and so get the same bytes and the
same identity, ``event_id`` = SHA-256 hex of those bytes.

It is not RFC 8785 (JCS): numbers keep orjson's spelling, so ``1`` and ``1.0`` are
different events (they are different JSON texts, and a producer resending an event
resends the same spelling). The number caveat: orjson parses an integer beyond 64 bits
(outside [-2**63, 2**64 - 1]) as a double, so ``18446744073709551616`` and
``1.8446744073709552e19`` are one value, hence one identity. ``canonical_json`` applies
the same rule to such integers when a value comes from another parser, so the identity
does not depend on which parser read the bytes. A value orjson cannot represent at all
(an integer too large for a double, a string with a lone surrogate, nesting beyond
orjson's limit) raises ValueError: no accepted delivery holds one, since the receiver
parses with orjson (embrasure.receiver.jsonguard).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1


def _as_orjson_reads(value: Any) -> Any:
    """``value`` with integers beyond 64 bits turned into doubles, as orjson.loads does."""
    if isinstance(value, dict):
        return {k: _as_orjson_reads(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_orjson_reads(v) for v in value]
    if type(value) is int and not _INT_MIN <= value <= _INT_MAX:
        try:
            return float(value)
        except OverflowError:
            raise ValueError("the event holds an integer too large for a JSON double") from None
    return value


def canonical_json(obj: Any) -> bytes:
    """``obj`` as canonical JSON bytes: sorted keys, compact, UTF-8.

    Raises ValueError for a value that has no JSON form (see the module docstring).
    """
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError as exc:
        if "Integer exceeds 64-bit range" not in str(exc):
            raise ValueError(f"the event cannot be written as JSON: {exc}") from None
    try:
        return orjson.dumps(_as_orjson_reads(obj), option=orjson.OPT_SORT_KEYS)
    except RecursionError:
        raise ValueError("the event nests too deeply to be written as JSON") from None
    except orjson.JSONEncodeError as exc:
        raise ValueError(f"the event cannot be written as JSON: {exc}") from None


def event_id(obj: Any) -> str:
    """The event's identity: SHA-256 hex of its canonical JSON
    (docs/architecture.md#event-identity)."""
    return hashlib.sha256(canonical_json(obj)).hexdigest()
