"""The parse ceiling: how fast one process parses the batch bodies with orjson.

Batched ingest is measured against this ceiling, the fastest of: ``orjson.loads`` of the
whole array, and msgspec splitting the array into raw per-event spans then
``orjson.loads`` of each; each with the cyclic gc on and off. The gc matters because
parsing a 500-event array allocates ~46,000 dicts and lists in one call, and the collections
that triggers walk the growing document again and again; per-event parsing frees each
event before the next, so it stays cheap.

The receiver's own strict parse is timed beside them for context: it is what Embrasure
runs on every body, and is not part of the ceiling.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import orjson
import servers

Parser = Callable[[bytes], None]

_RAW_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])


def _parse_whole(body: bytes) -> None:
    orjson.loads(body)


def _parse_split(body: bytes) -> None:
    # memoryview: orjson reads msgspec.Raw's buffer without copying it to bytes.
    for raw in _RAW_ITEMS.decode(body):
        orjson.loads(memoryview(raw))


CEILING_PARSERS: dict[str, Parser] = {
    "orjson whole array": _parse_whole,
    "msgspec split + orjson per event": _parse_split,
}


def load_receiver_parse(source: Path) -> tuple[str, Parser]:
    """The receiver's own strict parse of a bare-array batch, imported from the source
    being measured, at the receiver's depth bound: ``jsonguard.iter_array`` (one pass,
    each item let go, as the receiver's check_body runs it) where that code has it, else
    ``jsonguard.parse_array`` (item by item, every item kept), else
    ``jsonguard.parse_strict`` (the whole body)."""
    sys.path.insert(0, str(source))
    # Where the receiver's modules are since the package per stage, then before it.
    jsonguard = servers.moved("embrasure.receiver.jsonguard", "embrasure.jsonguard")
    bounds = servers.moved("embrasure.receiver.bounds", "embrasure.receiver")
    depth = bounds.Limits().json_depth
    name = next(n for n in ("iter_array", "parse_array", "parse_strict") if hasattr(jsonguard, n))
    chosen = getattr(jsonguard, name)

    def parse(body: bytes) -> None:
        if name == "iter_array":
            for _ in chosen(body, depth):
                pass
        else:
            chosen(body, depth)

    return f"receiver's jsonguard.{name} (context)", parse


def parse_rates(
    bodies: list[bytes], per_body: int, trials: int, receiver_parse: tuple[str, Parser]
) -> dict[str, float]:
    """Events/s per parser and gc setting: the fastest of ``trials`` passes over bodies."""
    rates = {}
    for name, parse in {**CEILING_PARSERS, receiver_parse[0]: receiver_parse[1]}.items():
        for gc_on in (True, False):
            gc.collect()  # every variant starts from the same heap
            if not gc_on:
                gc.disable()
            try:
                best = min(_timed_pass(parse, bodies) for _ in range(trials))
            finally:
                gc.enable()
            rates[f"{name}, gc {'on' if gc_on else 'off'}"] = len(bodies) * per_body / best
    return rates


def _timed_pass(parse: Parser, bodies: list[bytes]) -> float:
    start = time.perf_counter()
    for body in bodies:
        parse(body)
    return time.perf_counter() - start


def ceiling(rates: dict[str, float]) -> float:
    """The fastest orjson variant (the receiver's strict parse is not a candidate)."""
    return max(v for k, v in rates.items() if k.startswith(tuple(CEILING_PARSERS)))
