"""Strict JSON reading for untrusted request bodies.

The receiver must refuse, before it stores anything (docs/receiver.md): bytes that are not UTF-8,
text that is not JSON (RFC 8259), duplicate object keys anywhere, and nesting deeper than
64; and it must reject single events over 100,000 values or 1 MiB of facet data. Every
check here costs time bounded by the body size (the body is capped at 8 MiB before it
reaches us) and stops at the first violation.

How, cheaply:
- orjson parses (UTF-8 and RFC 8259 strictness in C; it refuses lone surrogates,
  NaN, trailing commas, a BOM).
- Duplicate keys: orjson keeps the last of two equal keys, so the re-serialised document
  has one key (one ':' outside strings) less than the request per dropped duplicate.
  Colons inside strings are copied verbatim either way, so the two colon counts are
  equal exactly when no key was dropped — unless an escaped colon (``\\u003a``) decodes
  to a new ':', in which case we ask jiter, whose parser checks every key. jiter also
  names the duplicate key in the error.
- Depth: orjson refuses to serialise nesting past a fixed limit; wrapping the document
  in (that limit - 64) lists turns the same serialisation into an exact depth-64 check.
  The limit is probed at import; if it ever changes shape we fall back to a walk.
- Values and facet bytes need a walk; a value takes at least one byte, so an event whose
  bytes are fewer than the bound cannot break it, and only such rare large events are
  walked.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator
from typing import Any

import jiter
import msgspec
import orjson

from embrasure.errors import Problem

ORJSON_DEPTH_PROBE_MAX = 4096
ORJSON_PARSE_DEPTH = 1024  # orjson.loads refuses deeper documents ("depth limit exceeded")


class JsonRejected(Problem):
    """The body is not acceptable JSON: 400, nothing stored."""

    def __init__(self, slug: str, title: str, detail: str, **extra: Any) -> None:
        super().__init__(400, slug, title, detail, **extra)


def _nest(depth: int) -> list[Any]:
    doc: list[Any] = []
    for _ in range(depth - 1):
        doc = [doc]
    return doc


def _probe_orjson_depth_limit() -> int | None:
    """The deepest nesting orjson.dumps accepts, or None if it accepts anything we try."""
    lo, hi = 1, ORJSON_DEPTH_PROBE_MAX
    try:
        orjson.dumps(_nest(hi))
        return None
    except orjson.JSONEncodeError:
        pass
    while lo + 1 < hi:  # invariant: depth lo serialises, depth hi does not
        mid = (lo + hi) // 2
        try:
            orjson.dumps(_nest(mid))
            lo = mid
        except orjson.JSONEncodeError:
            hi = mid
    return lo


_ORJSON_DEPTH_LIMIT = _probe_orjson_depth_limit()


class _Wrapper(threading.local):
    """A reusable chain of nested one-element lists, one per thread."""

    def __init__(self) -> None:
        self.cache: dict[int, tuple[list[Any], list[Any]]] = {}

    def chain(self, wraps: int) -> tuple[list[Any], list[Any]]:
        if wraps not in self.cache:
            inner: list[Any] = [None]
            outer = inner
            for _ in range(wraps - 1):
                outer = [outer]
            self.cache[wraps] = (outer, inner)
        return self.cache[wraps]


_wrapper = _Wrapper()


def depth_of(doc: Any) -> int:
    """Nesting depth: the top-level value is depth 1, each nested array or object adds 1."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if type(node) is dict:
            children: Any = node.values()
        elif type(node) is list:
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        for child in children:
            if type(child) is dict or type(child) is list:
                stack.append((child, depth + 1))
    return deepest


def _serialise_within_depth(doc: Any, max_depth: int) -> bytes | None:
    """Compact serialisation of ``doc``, or None if it nests deeper than ``max_depth``."""
    limit = _ORJSON_DEPTH_LIMIT
    if limit is None or limit <= max_depth:
        return None if depth_of(doc) > max_depth else orjson.dumps(doc)
    outer, inner = _wrapper.chain(limit - max_depth)
    inner[0] = doc
    try:
        return orjson.dumps(outer)
    except orjson.JSONEncodeError:
        return None
    finally:
        inner[0] = None


def _depth_problem(limit: int, actual: int, at_least: bool = False) -> JsonRejected:
    how = "at least " if at_least else ""
    return JsonRejected(
        "json-too-deep",
        "JSON nested too deeply",
        f"The document nests arrays and objects {how}{actual} levels deep; "
        f"at most {limit} are accepted (the top-level value is level 1).",
        limit=limit,
        actual=actual,
    )


def parse_strict(body: bytes, max_depth: int) -> Any:
    """Parse ``body`` or raise JsonRejected saying what is wrong with it."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _explain_decode_error(body, exc, max_depth) from None

    serialised = _serialise_within_depth(doc, max_depth)
    if serialised is None:
        raise _depth_problem(max_depth, depth_of(doc))

    _check_duplicate_keys(body, serialised.count(b":"))
    return doc


def parse_array(body: bytes, max_depth: int) -> tuple[list[Any], list[bytes]]:
    """Parse a JSON array strictly: its items and each item's bytes (``iter_array``,
    every item kept)."""
    items, spans = [], []
    for item, raw in iter_array(body, max_depth):
        items.append(item)
        spans.append(bytes(raw))
    return items, spans


def iter_array(body: bytes, max_depth: int) -> Iterator[tuple[Any, msgspec.Raw]]:
    """Parse a JSON array strictly, one item at a time: each item and its raw span.

    The same checks as ``parse_strict``, in one pass over the items: msgspec first splits
    the array into its items' raw spans without decoding them (checking the array's own
    syntax); then each item is parsed and checked alone (depth, and its keys counted for
    the duplicate-key check) as the caller takes it. A caller that checks each item and
    lets it go holds one parsed event at a time, not the batch's hundred thousand objects:
    parsing is then as fast as parsing alone can be (bench/parse_ceiling.py). The
    duplicate-key check, which needs every item's count, runs after the last item: a
    caller must consume the whole iterator before it acts on what it saw.
    """
    try:
        spans = _RAW_ITEMS.decode(body)
    except msgspec.DecodeError as exc:
        raise _explain_decode_error(body, exc, max_depth) from None
    except RecursionError:
        # msgspec skips nested values recursively, bounded by Python's recursion limit
        # (about a thousand levels): far past our limit, and all we know.
        raise _depth_problem(max_depth, max_depth + 1, at_least=True) from None
    colons = yield from _items(spans, max_depth, 2)
    # The array's own bytes hold no colon, so the items' counts add up to the body's.
    _check_duplicate_keys(body, colons)


def iter_envelope(body: bytes, max_depth: int) -> Iterator[tuple[Any, msgspec.Raw]]:
    """``iter_array`` of an object's ``events`` array (a batch's envelope,
    ``{"events": [...]}``), its other members checked as ``parse_strict`` checks them.
    Raises ``NotAnEnvelope`` for a valid JSON object whose ``events`` is no array (the
    caller's shape error), after every check of the JSON itself."""
    try:
        members = _RAW_MEMBERS.decode(body)
    except msgspec.DecodeError as exc:
        parse_strict(body, max_depth)  # says what is wrong, in parse_strict's words
        raise _explain_decode_error(body, exc, max_depth) from None
    except RecursionError:
        parse_strict(body, max_depth)
        raise _depth_problem(max_depth, max_depth + 1, at_least=True) from None
    events = members.get("events")
    is_array = events is not None and bytes(memoryview(events)[:1]) == b"["
    colons = 0
    for name, raw in members.items():
        colons += orjson.dumps(name).count(b":") + 1  # the member's name, and its colon
        if name == "events" and is_array:
            continue  # its items are checked one by one below
        value = _parsed(raw, max_depth)
        serialised = _serialise_within_depth(value, max_depth - 1)  # at depth 2
        if serialised is None:
            raise _depth_problem(max_depth, depth_of(value) + 1)
        colons += serialised.count(b":")
    if events is None or not is_array:
        _check_duplicate_keys(body, colons)
        raise NotAnEnvelope()
    try:
        spans = _RAW_ITEMS.decode(events)
    except RecursionError:
        raise _depth_problem(max_depth, max_depth + 1, at_least=True) from None
    colons += yield from _items(spans, max_depth, 3)
    _check_duplicate_keys(body, colons)


class NotAnEnvelope(Exception):
    """A JSON object without an ``events`` array (not a batch: receiver/bounds.py)."""


def _items(
    spans: list[msgspec.Raw], max_depth: int, depth: int
) -> Generator[tuple[Any, msgspec.Raw], None, int]:
    """Each item of an array at ``depth`` (the array's items'), parsed and checked; the
    colons of their compact JSON, counted."""
    colons = 0
    for raw in spans:
        item = _parsed(raw, max_depth)
        serialised = _serialise_within_depth(item, max_depth - depth + 1)
        if serialised is None:
            raise _depth_problem(max_depth, depth_of(item) + depth - 1)
        colons += serialised.count(b":")
        yield item, raw
    return colons


def _parsed(raw: msgspec.Raw, max_depth: int) -> Any:
    try:
        return orjson.loads(memoryview(raw))  # msgspec.Raw's buffer, not a copy
    except orjson.JSONDecodeError as exc:
        raise _explain_decode_error(bytes(raw), exc, max_depth) from None


def _check_duplicate_keys(body: bytes, serialised_colons: int) -> None:
    """Raise unless the parse kept every key (see the module docstring)."""
    # One scan for the common prefix of both spellings, a second only when it is there.
    escaped_colon = b"\\u003" in body and (b"\\u003a" in body or b"\\u003A" in body)
    if escaped_colon or serialised_colons != body.count(b":"):
        try:
            jiter.from_json(body, catch_duplicate_keys=True)
        except ValueError as exc:
            raise JsonRejected(
                "json-duplicate-key",
                "Duplicate object key",
                f"{exc}. Duplicate keys are ambiguous (RFC 8259 §4): producers and "
                "Embrasure could read different events from the same bytes.",
            ) from None


def _explain_decode_error(
    body: bytes, exc: orjson.JSONDecodeError | msgspec.DecodeError, max_depth: int
) -> Problem:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as bad:
        return JsonRejected(
            "not-utf8",
            "Body is not UTF-8",
            f"The byte at offset {bad.start} is not valid UTF-8 ({bad.reason}); JSON must be UTF-8 "
            "(RFC 8259 §8.1).",
        )
    message = str(exc)
    if message.startswith("depth limit exceeded"):
        # orjson stops parsing past its own depth limit: we only know it is deeper.
        return _depth_problem(max_depth, ORJSON_PARSE_DEPTH + 1, at_least=True)
    if not body.strip():
        return JsonRejected("not-json", "Body is not JSON", "The request body is empty.")
    return JsonRejected("not-json", "Body is not JSON", f"Invalid JSON: {message}.")


def json_type(value: Any) -> str:
    """The JSON type of a parsed value, with its article ("a string", "null"), for
    messages that say what was sent instead of what was expected."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def count_values(doc: Any, stop_after: int) -> int:
    """Every object, array, string, number, true, false and null in ``doc`` (itself
    included; object keys are not values). Stops counting once past ``stop_after``."""
    count = 0
    stack = [doc]
    while stack:
        node = stack.pop()
        count += 1
        if count > stop_after:
            return count
        if type(node) is dict:
            stack.extend(node.values())
        elif type(node) is list:
            stack.extend(node)
    return count


_RAW_MEMBERS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_RAW_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])


class _Envelope(msgspec.Struct):
    events: list[msgspec.Raw]


_RAW_ENVELOPE = msgspec.json.Decoder(_Envelope)


def split_items(body: bytes) -> list[bytes]:
    """The raw bytes of each item of an already-parsed batch body (array or envelope)."""
    if body.lstrip()[:1] == b"[":
        return [bytes(raw) for raw in _RAW_ITEMS.decode(body)]
    return [bytes(raw) for raw in _RAW_ENVELOPE.decode(body).events]


def _members(raw: bytes) -> dict[str, bytes]:
    if raw.lstrip()[:1] != b"{":
        return {}
    return {k: bytes(v) for k, v in _RAW_MEMBERS.decode(raw).items()}


def _compact_size(raw: bytes) -> int:
    # Reformatting copies strings verbatim, so this is the object's bytes in the request
    # without insignificant whitespace (RFC 8259 §2), as docs/receiver.md#bounds counts facet data.
    return len(msgspec.json.format(raw, indent=-1))


def facet_bytes(raw_event: bytes) -> int:
    """Bytes of every run, job and dataset ``facets``/``inputFacets``/``outputFacets``
    object of one event (OpenLineage 2-0-2 places them there), as sent."""
    event = _members(raw_event)
    facet_objects = [
        _members(event[k]).get("facets") for k in ("run", "job", "dataset") if k in event
    ]
    for key, own in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        raw_list = event.get(key, b"")
        if raw_list.lstrip()[:1] == b"[":
            for raw_dataset in _RAW_ITEMS.decode(raw_list):
                dataset = _members(bytes(raw_dataset))
                facet_objects += [dataset.get("facets"), dataset.get(own)]
    return sum(
        _compact_size(raw) for raw in facet_objects if raw is not None and raw.lstrip()[:1] == b"{"
    )
