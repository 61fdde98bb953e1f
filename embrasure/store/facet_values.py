"""Facet values as stored: each distinct value once, by hash, zstd-compressed when large.

A facet value is kept once in ``facet_values`` however many entities name it (a run facet
repeats across runs, a dataset schema across the tables of a pipeline and across its
versions), and the ``facets`` and ``facet_sets`` rows name it by hash
(docs/architecture.md#storage). A value of ``COMPRESS_FROM`` bytes or more is stored as a
zstd frame (level 3, no dictionary) when that is smaller; a shorter one stays the
canonical JSON's UTF-8 bytes, which a frame's own header would outweigh. Values are
encoded and decoded here only: readers get the canonical JSON as ``str``
(``GraphReader.facet_values``).
"""

from __future__ import annotations

import threading

import zstandard

from embrasure.store.rows import FacetValueRow

PLAIN = 0  # the canonical JSON as UTF-8
ZSTD = 1  # a zstd frame of it

LEVEL = 3  # zstd's default, as the log's bodies (store/compression.py)
# Measured (zstd level 3, no dictionary): a column lineage facet of ~6.5 KB (bench/query.py's
# platform) shrinks ninefold, a 256-512 byte SQL facet by 30%, a ~230-byte standard facet
# (jobType, nominalTime, a short schema: _producer and _schemaURL make most of it) by 25-30%;
# a value of a few dozen bytes grows (a frame's header and checksum), and below 128 bytes
# hardly any facet is that small anyway.
COMPRESS_FROM = 128

# zstd's compressor and decompressor objects are not thread-safe: one per thread.
_local = threading.local()


def _compressor() -> zstandard.ZstdCompressor:
    cctx: zstandard.ZstdCompressor | None = getattr(_local, "cctx", None)
    if cctx is None:
        cctx = _local.cctx = zstandard.ZstdCompressor(level=LEVEL)
    return cctx


def _decompressor() -> zstandard.ZstdDecompressor:
    dctx: zstandard.ZstdDecompressor | None = getattr(_local, "dctx", None)
    if dctx is None:
        dctx = _local.dctx = zstandard.ZstdDecompressor()
    return dctx


def value_row(digest: bytes, canonical: bytes) -> FacetValueRow:
    """The stored row of a value: ``digest`` is its hash (projector/facets.py value_hash)."""
    if len(canonical) >= COMPRESS_FROM:
        frame = _compressor().compress(canonical)
        if len(frame) < len(canonical):
            return FacetValueRow(digest, ZSTD, frame)
    return FacetValueRow(digest, PLAIN, canonical)


def decode(encoding: int, stored: bytes) -> str:
    """A stored value back as its canonical JSON."""
    if encoding == ZSTD:
        return _decompressor().decompress(stored).decode()
    if encoding == PLAIN:
        return bytes(stored).decode()
    raise ValueError(f"facet value encoding {encoding} is not one this version knows")
