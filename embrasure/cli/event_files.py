"""`embrasure ingest`: OpenLineage events from files, sent in batches to the batch route.

Inputs: files given by name, whatever they are called, and folders (walked recursively
for *.json, *.jsonl and *.ndjson, in sorted order). What a file holds is read from its
content, not its name: a JSON array of events, one event, ``{"events": [...]}``, one
event per line (JSONL), or events one after another (openlineage-python's FileTransport
with ``append: true`` writes the last two, under whatever name it is given). Each event is
checked here with the receiver's own strict parser (``jsonguard``) before it joins a
batch, because the receiver refuses a whole request for one bad byte: a line that is not
JSON is reported with its file:line and counted invalid, and the other events go on.
Events are sent as their bytes from the file, never re-serialised, so the log holds what
the producer wrote.

Batches keep within the receiver's bounds (``receiver.bounds.Limits``) and are cut
deterministically from the sorted input, so ingesting the same files again sends the same
request bodies, which the receiver recognises as duplicates (docs/receiver.md#idempotency: a
delivery's identity is its provider_key and body hash). An event repeated within one run is
sent once and counted a duplicate.

Counts come from the receipts: ``accepted`` and ``duplicate`` are the valid items of new
and of duplicate deliveries, ``invalid`` the items rejected here or at the transport
boundary (a 400 answer refuses its whole batch's events); every event read is exactly one
of the three. A request that fails otherwise (401, 403, 404, 5xx, no answer) is no
verdict on the events: it ends the run with its cause (``ClientError``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embrasure.errors import Problem
from embrasure.projector.canonical import canonical_json
from embrasure.receiver import jsonguard
from embrasure.receiver.bounds import Limits, check_items

if TYPE_CHECKING:  # httpx loads only when a client is made
    from embrasure.cli.client import Client

LIMITS = Limits()
# Half the receiver's 1,000: a batch this size is where the benchmark's throughput
# levels off (bench/results/ingest.md), and the progress bar moves more often.
BATCH_EVENTS = 500
BATCH_ROUTE = "/api/v1/lineage/batch"
JSONL_SUFFIXES = (".jsonl", ".ndjson")
JSON_SUFFIXES = (".json",)
BOM = b"\xef\xbb\xbf"
# 429 and 503 say "retry after a while": how many times before giving up.
OVERLOAD_RETRIES = 10
MAX_RETRY_WAIT = 30.0
PROJECTION_TIMEOUT = 120.0
# Problems listed in the human summary (all of them are in --json).
SHOWN_PROBLEMS = 20


@dataclasses.dataclass(frozen=True, slots=True)
class Item:
    """One event read from the input."""

    source: str  # where it came from: "path:line", "path[index]" or "path"
    raw: bytes  # its bytes as the file holds them
    doc: Any  # parsed
    weight: int  # input bytes it accounts for (the progress bar's unit)


@dataclasses.dataclass(frozen=True, slots=True)
class Unreadable:
    """Input that is not an event the receiver could take: counted invalid, not sent."""

    source: str
    reason: str
    weight: int


@dataclasses.dataclass(frozen=True, slots=True)
class Empty:
    """A file that holds no event (nothing but whitespace, ``[]``, ``{"events": []}``):
    not an event, so not counted as one; named in the summary."""

    source: str


Read = Item | Unreadable | Empty


@dataclasses.dataclass
class Batch:
    items: list[Item] = dataclasses.field(default_factory=list)
    size: int = 2  # "[" and "]"
    rejected: set[int] = dataclasses.field(default_factory=set)  # indexes the receiver rejects

    def body(self) -> bytes:
        return b"[" + b",".join(i.raw for i in self.items) + b"]"


@dataclasses.dataclass(frozen=True, slots=True)
class Sent:
    """What is kept of a sent batch to report its outcomes: not the events' bytes, so an
    ingest holds one batch of them at a time, whatever the input's size."""

    delivery_id: str
    sources: list[str]
    rejected: set[int]


@dataclasses.dataclass
class Summary:
    target: str
    files: int = 0
    events: int = 0
    accepted: int = 0
    duplicate: int = 0
    invalid: int = 0
    deliveries: list[str] = dataclasses.field(default_factory=list)
    problems: list[dict[str, str]] = dataclasses.field(default_factory=list)
    empty: list[str] = dataclasses.field(default_factory=list)  # files with no event
    # The projector's warnings on accepted events, each text once: how many events and
    # which (an ingest of a dbt project can give the same warning for every model).
    warnings: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # Outcomes of the accepted and duplicate events once projected (None: not waited for).
    projection: dict[str, int] | None = None

    def problem(self, source: str, reason: str) -> None:
        self.problems.append({"source": source, "reason": reason})

    def warning(self, source: str, text: str) -> None:
        for seen in self.warnings:
            if seen["warning"] == text:
                seen["count"] += 1
                seen["sources"].append(source)
                return
        self.warnings.append({"warning": text, "count": 1, "sources": [source]})

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def ok(self) -> bool:
        """Every event read is in the graph (or was already)."""
        return self.invalid == 0 and not (self.projection and self.projection["quarantined"])


# -- reading ---------------------------------------------------------------------------------


def discover(paths: Sequence[Path]) -> list[Path]:
    """The files to read: each file as given, each folder's JSON and JSONL files sorted,
    every file once."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = []
            for folder, dirs, names in os.walk(path):
                dirs.sort()
                found += [
                    Path(folder, n)
                    for n in names
                    if n.lower().endswith(JSON_SUFFIXES + JSONL_SUFFIXES)
                ]
            files += sorted(found)
        else:
            files.append(path)
    return list(dict.fromkeys(files))


def _too_deep(depth: int) -> str:
    return (
        f"the event nests {depth + 1} levels deep inside a batch; at most "
        f"{LIMITS.json_depth} are accepted"
    )


def _reason(problem: Problem) -> str:
    if problem.slug == "json-too-deep" and problem.actual is not None:
        return _too_deep(problem.actual)  # checked alone (depth 1), sent inside a batch
    return problem.detail


def _parse_event(raw: bytes) -> Any:
    return jsonguard.parse_strict(raw, LIMITS.json_depth - 1)  # in a batch it is at depth 2


def read_lines(source: str, data: bytes) -> Iterator[Item | Unreadable]:
    """JSONL: one event per line; blank lines are skipped."""
    for number, line in enumerate(data.split(b"\n"), 1):
        raw = line.strip()
        if not raw:
            continue
        where = f"{source}:{number}"
        try:
            yield Item(where, raw, _parse_event(raw), len(line) + 1)
        except Problem as problem:
            yield Unreadable(where, _reason(problem), len(line) + 1)


def read_document(source: str, data: bytes) -> Iterator[Item | Unreadable]:
    """A file, by what it holds: one event, an array of events, a batch envelope, JSONL,
    or JSON documents one after another. Nothing for a file of whitespace."""
    raw = data.strip()
    if not raw:
        return
    try:
        if raw[:1] == b"[":
            docs, spans = jsonguard.parse_array(raw, LIMITS.json_depth)
            weights = [len(s) + 1 for s in spans]
            for i, (doc, span) in enumerate(zip(docs, spans, strict=True)):
                yield Item(f"{source}[{i}]", span.strip(), doc, weights[i])
            return
        doc = jsonguard.parse_strict(raw, LIMITS.json_depth)
    except Problem as problem:
        if problem.slug == "not-json" and _looks_like_lines(raw):
            yield from read_lines(source, data)
        elif problem.slug == "not-json" and (documents := _concatenated(source, data)):
            yield from documents
        else:
            yield Unreadable(source, _reason(problem), len(data))
        return
    events = doc.get("events") if isinstance(doc, dict) else None
    if isinstance(events, list) and not {"run", "job", "eventType"} & doc.keys():
        for i, span in enumerate(jsonguard.split_items(raw)):
            yield Item(f"{source}[{i}]", span.strip(), events[i], len(span) + 1)
        return
    depth = jsonguard.depth_of(doc)
    if depth > LIMITS.json_depth - 1:  # in a batch the event is at depth 2
        yield Unreadable(source, _too_deep(depth), len(data))
    else:
        yield Item(source, raw, doc, len(data))


_SPACE = re.compile(r"[ \t\r\n]*")  # JSON's whitespace (RFC 8259 §2)


def _concatenated(source: str, data: bytes) -> list[Item | Unreadable] | None:
    """Pretty-printed JSON documents one after another, or None when ``data`` is not
    that. openlineage-python's FileTransport writes them so with ``append: true`` and
    ``debug_mode: true`` (json.dumps with indent=2, then a newline, per event; checked
    with 1.54.0). Python's decoder only finds where each document ends; each one is then
    read with the receiver's strict rules like any other event, and sent as its bytes."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    decoder = json.JSONDecoder()
    spans: list[tuple[int, int]] = []
    start = _SPACE.match(text, 0).end()  # type: ignore[union-attr]  # always matches
    while start < len(text):
        try:
            _, end = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            return None
        following = _SPACE.match(text, end).end()  # type: ignore[union-attr]
        spans.append((start, following))
        start = following
    if len(spans) < 2:
        return None
    out: list[Item | Unreadable] = []
    line = 1
    previous = 0
    for start, end in spans:
        line += text.count("\n", previous, start)
        previous = start
        raw = text[start:end].strip().encode("utf-8")
        where = f"{source}:{line}"
        weight = len(text[start:end].encode("utf-8"))
        try:
            out.append(Item(where, raw, _parse_event(raw), weight))
        except Problem as problem:
            out.append(Unreadable(where, _reason(problem), weight))
    return out


def _looks_like_lines(raw: bytes) -> bool:
    """JSONL: most lines are an object each, ``{…}`` (a line that is not JSON among them is
    still one event's line, reported by its number). Pretty-printed documents one after
    another have "{" and "}" alone on their lines, and nested lines between."""
    lines = [line.strip() for line in raw.split(b"\n")]
    lines = [line for line in lines if line]
    whole = sum(1 for line in lines if len(line) > 1 and line[:1] == b"{" and line[-1:] == b"}")
    return len(lines) > 1 and whole * 2 > len(lines)


def read_files(files: Iterable[Path]) -> Iterator[Read]:
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            yield Unreadable(str(path), f"cannot read the file: {exc.strerror}", 0)
            continue
        data = data.removeprefix(BOM)  # RFC 8259 §8.1: a reader may ignore it
        found = False
        for item in read_document(str(path), data):
            found = True
            yield item
        if not found:
            yield Empty(str(path))


# -- batching and sending ----------------------------------------------------------------------


def batches(items: Iterable[Read], summary: Summary) -> Iterator[Batch]:
    """Batches within the receiver's bounds; what cannot be sent is counted invalid here,
    and an event seen before in this run is counted a duplicate and not sent again."""
    seen: set[bytes] = set()
    batch = Batch()
    for item in items:
        if isinstance(item, Empty):
            summary.empty.append(item.source)
            continue
        summary.events += 1
        if isinstance(item, Unreadable):
            summary.invalid += 1
            summary.problem(item.source, item.reason)
            continue
        if len(item.raw) + 2 > LIMITS.body_bytes:
            summary.invalid += 1
            summary.problem(
                item.source,
                f"the event is {len(item.raw):,} bytes; a request carries at most "
                f"{LIMITS.body_bytes:,}",
            )
            continue
        try:
            identity = hashlib.sha256(canonical_json(item.doc)).digest()
        except ValueError:
            identity = hashlib.sha256(item.raw).digest()
        if identity in seen:
            summary.duplicate += 1
            continue
        seen.add(identity)
        if len(batch.items) == BATCH_EVENTS or batch.size + len(item.raw) + 1 > LIMITS.body_bytes:
            yield batch
            batch = Batch()
        # The receiver's own per-event bounds, to name the file:line of what it rejects.
        for rejection in check_items([item.doc], item.raw, True, LIMITS):
            batch.rejected.add(len(batch.items))
            summary.problem(item.source, rejection.reason)
        batch.items.append(item)
        batch.size += len(item.raw) + (1 if len(batch.items) > 1 else 0)
    if batch.items:
        yield batch


# Answers that judge the events themselves (the receiver's bounds, docs/receiver.md
# #bounds): the batch's events are invalid. Any other refusal is the request's failure.
INVALID_STATUSES = (400, 422)


def send(client: Client, batch: Batch, provider_key: str | None) -> dict[str, Any] | str:
    """The receipt, or the problem that refused the whole batch as invalid. 429 and 503
    are retried after their Retry-After; a server that stays overloaded, or any other
    refusal, ends the run (ClientError)."""
    from embrasure.cli.client import ClientError

    body = batch.body()
    reply = None
    for _attempt in range(OVERLOAD_RETRIES):
        reply = client.request(
            "POST",
            BATCH_ROUTE,
            params={"provider_key": provider_key},
            content=body,
            headers={"Content-Type": "application/json"},
        )
        if reply.status == 202:
            receipt: dict[str, Any] = reply.json()
            return receipt
        if reply.status in INVALID_STATUSES:
            return reply.problem(client.target)
        if reply.status not in (429, 503):
            raise ClientError(client.failure("POST", BATCH_ROUTE, reply))
        try:
            wait = float(reply.headers.get("retry-after", "1"))
        except ValueError:
            wait = 1.0
        time.sleep(min(max(wait, 0.1), MAX_RETRY_WAIT))
    assert reply is not None
    raise ClientError(
        f"{client.target} is still refusing deliveries after {OVERLOAD_RETRIES} tries: "
        f"{reply.problem(client.target)}"
    )


def ingest(
    client: Client,
    items: Iterable[Read],
    *,
    provider_key: str | None = None,
    wait: bool = True,
    progress: Callable[[int], None] = lambda weight: None,
) -> Summary:
    """Send ``items`` and count what the receipts say; with ``wait``, wait for the
    projection and add the outcomes. ``progress`` is told the input bytes done."""
    summary = Summary(client.target)
    sent: list[Sent] = []
    delivered: set[str] = set()
    for batch in batches(items, summary):
        answer = send(client, batch, provider_key)
        progress(sum(i.weight for i in batch.items))
        if isinstance(answer, str):
            summary.invalid += len(batch.items)
            first, last = batch.items[0].source, batch.items[-1].source
            summary.problem(first if first == last else f"{first} … {last}", answer)
            continue
        invalid = int(answer["invalid_item_count"])
        valid = int(answer["item_count"]) - invalid
        summary.invalid += invalid
        if answer["duplicate"]:
            summary.duplicate += valid
        else:
            summary.accepted += valid
        delivery_id = answer["delivery_id"]
        if delivery_id not in delivered:
            delivered.add(delivery_id)
            summary.deliveries.append(delivery_id)
        if wait:
            sent.append(Sent(delivery_id, [i.source for i in batch.items], batch.rejected))
    if sent:
        summary.projection = outcomes(client, sent, summary)
    return summary


def outcomes(client: Client, sent: list[Sent], summary: Summary) -> dict[str, int]:
    """Wait for the projector, then count the sent events' outcomes, name the source of
    each one quarantined and gather the warnings of the others."""
    counts = {"projected": 0, "quarantined": 0, "pending": 0}
    if not client.wait_for_projection(max(s.delivery_id for s in sent), PROJECTION_TIMEOUT):
        summary.problem("projection", f"not finished after {PROJECTION_TIMEOUT:.0f} s")
    statuses: dict[str, dict[int, dict[str, Any]]] = {}
    for batch in sent:
        if batch.delivery_id not in statuses:
            view = client.get(f"/api/v1/deliveries/{batch.delivery_id}")
            statuses[batch.delivery_id] = {i["index"]: i for i in view["items"]}
        items = statuses[batch.delivery_id]
        for index, source in enumerate(batch.sources):
            if index in batch.rejected:
                continue  # counted invalid already
            outcome = items[index]["outcome"]
            counts[outcome] += 1
            if outcome == "quarantined":
                summary.problem(source, f"quarantined: {items[index]['reason']}")
            for warning in items[index]["warnings"]:
                summary.warning(source, warning)
    return counts


def count_files_bytes(files: Iterable[Path]) -> int:
    total = 0
    for path in files:
        with contextlib.suppress(OSError):  # read_files reports an unreadable file
            total += path.stat().st_size
    return total
