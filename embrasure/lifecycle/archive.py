"""The archive: where trimmed delivery bodies go, exactly, for years
(docs/operations.md#retention-and-the-archive).

A location (a directory, or an fsspec URL such as ``s3://bucket/prefix``) holds::

    segments/<name>.jsonl.zst   append-only: one zstd frame of JSON Lines (segments.py)
    manifest/<name>.json        one small entry per segment: its SHA-256, size and seqs

Object stores cannot append, so the manifest is not one file but one entry per segment,
written only after its segment is durable and read back; the manifest is the union of the
entries. A segment file with no entry (a pass that crashed mid-write) counts for nothing.
Names are ``<first seq>-<last seq>-<48 random bits>``: two writers, or a rerun beside a
crashed pass's partial file, never pick the same one (and a local write refuses to
replace a file that exists).
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import datetime
import errno
import hashlib
import os
import secrets
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import fsspec
import zstandard
from fsspec.implementations.local import LocalFileSystem

from embrasure.errors import ArchiveCorrupt, ArchiveUnavailable, EmbrasureError
from embrasure.lifecycle import segments as fmt
from embrasure.lifecycle.segments import ArchivedDelivery, Segment
from embrasure.lifecycle.verify import VerifyReport, verify_archive

__all__ = ["Archive", "ArchivedDelivery", "Segment", "VerifyReport"]

SEGMENTS = "segments"
MANIFEST = "manifest"
SEGMENT_SUFFIX = ".jsonl.zst"
ENTRY_SUFFIX = ".json"
# Measured on 10,000 bench events in segments of 1,000 (docs/operations.md): level 3 gives
# 0.0179 archived bytes per raw byte, 9 gives 0.0136 at ~500 MB/s, 19 gives 0.0113 at
# 3 MB/s. A retention pass is background work, but it shares the CPU with ingest: 9.
LEVEL = 9
# Decoded segments kept for bodies(): reproject asks in seq order, so the segment it is
# in is read once; a few are kept because passes interleave when a quarantined delivery is
# replayed and archived later. At least the last one is kept whatever its size.
CACHE_BYTES = 64 * 1024 * 1024


def _why(exc: BaseException) -> str:
    code = exc.errno if isinstance(exc, OSError) else None
    if code is not None and code in errno.errorcode:
        assert isinstance(exc, OSError)
        return f"{exc.strerror or os.strerror(code)} ({errno.errorcode[code]})"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _now() -> str:
    now = datetime.datetime.now(datetime.UTC)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Archive:
    """One archive location. Safe to share between threads; several processes may write
    to one location at once (names never collide; the manifest is their entries' union)."""

    def __init__(self, location: str, *, create: bool = True) -> None:
        """``create`` makes the directory when it is missing (a first retention pass);
        ``archive verify`` passes False, so a mistyped location is an error, not an empty
        archive that passes."""
        self.location = location
        try:
            self._fs, root = fsspec.core.url_to_fs(location)
        except ImportError as exc:  # "Install s3fs to access S3": fsspec names the package
            raise ArchiveUnavailable(
                f"archive {location}: {exc} (pip install it beside Embrasure)"
            ) from exc
        except ValueError as exc:  # "Protocol not known: …"
            raise ArchiveUnavailable(f"archive {location}: {exc}") from exc
        self._root = root.rstrip("/") or "/"
        self._local = isinstance(self._fs, LocalFileSystem)
        self._lock = threading.Lock()
        self._entries: dict[str, Segment] = {}
        self._index: list[tuple[int, int, str]] | None = None  # (first, last, name) by first
        self._reach: list[int] = []  # the highest last seq of the index up to each position
        self._cache: collections.OrderedDict[str, tuple[dict[int, ArchivedDelivery], int]]
        self._cache = collections.OrderedDict()
        with self._io("open", self._root):
            if self._fs.isdir(self._root):
                return
            if not create:
                raise FileNotFoundError(errno.ENOENT, "no such directory")
            if self._local:
                _make_dirs(self._root)
            else:
                self._fs.makedirs(self._root, exist_ok=True)

    # -- writing --------------------------------------------------------------------------

    def write_segment(self, deliveries: Sequence[ArchivedDelivery]) -> Segment:
        """Archive ``deliveries`` as one new segment and return it once it counts: the file
        durable (fsync'd with its directory on a local filesystem; on an object store, when
        the PUT returns), read back and its hash checked, and then its manifest entry
        written the same way. On any failure ArchiveUnavailable says what and where, and
        no entry exists (a left-over segment file is removed if it can be)."""
        ordered = sorted(deliveries, key=lambda d: d.seq)
        seqs = [d.seq for d in ordered]
        if not seqs or len(set(seqs)) != len(seqs):
            raise ValueError("a segment holds one or more deliveries, each once")
        data = fmt.encode_lines(ordered)
        blob = zstandard.ZstdCompressor(level=LEVEL, write_checksum=True).compress(data)
        name = f"{seqs[0]:012d}-{seqs[-1]:012d}-{secrets.token_hex(6)}"
        segment = Segment(
            name=name,
            first_seq=seqs[0],
            last_seq=seqs[-1],
            count=len(seqs),
            sha256=hashlib.sha256(blob).hexdigest(),
            size=len(blob),
            created_at=_now(),
            ranges=fmt.ranges_of(seqs),
        )
        path, entry = self._segment_path(name), self._entry_path(name)
        try:
            with self._io("write segment", path):
                try:
                    self._put(path, blob, replace=False)
                except FileExistsError:
                    # Another writer's file of this name (48 random bits make it all but
                    # impossible): fail without the clean-up below, which would remove it.
                    path = entry = ""
                    raise
                back = self._fs.cat_file(path)
            if back != blob or zstandard.ZstdDecompressor().decompress(back) != data:
                raise ArchiveUnavailable(
                    f"archive {self.location}: segment {name} read back differs from what "
                    f"was written ({len(back)} bytes read, {len(blob)} written)"
                )
            with self._io("write the manifest entry", entry):
                self._put(entry, fmt.entry_bytes(segment), replace=True)
        except BaseException:
            for leftover in (entry, path):
                if leftover:
                    self._remove_quietly(leftover)
            raise
        with self._lock:
            self._entries[name] = segment
            self._index = None
        return segment

    def discard(self, segment: Segment) -> None:
        """Remove a segment and its entry: the retention pass's way to drop an orphan (a
        segment written before a crash, whose deliveries the database still holds and
        has archived again). The entry goes first, so no entry names a missing file."""
        for path in (self._entry_path(segment.name), self._segment_path(segment.name)):
            with self._io("remove", path):
                self._remove(path)
        with self._lock:
            self._entries.pop(segment.name, None)
            self._cache.pop(segment.name, None)
            self._index = None

    # -- reading --------------------------------------------------------------------------

    def segments(self) -> list[Segment]:
        """Every segment the manifest lists, by first seq. ArchiveCorrupt names an entry
        that cannot be read (``verify`` reports them all instead of stopping)."""
        found, bad = self._load_entries()
        if bad:
            raise ArchiveCorrupt(bad[0][1])
        return found

    def read_segment(self, segment: Segment) -> list[ArchivedDelivery]:
        """The segment's deliveries, after checking its size and hash against its entry
        and its seqs against the entry's; ArchiveCorrupt names the segment otherwise."""
        path = self._segment_path(segment.name)
        try:
            with self._io("read segment", path):
                blob = self._fs.cat_file(path)
        except ArchiveUnavailable as exc:
            if isinstance(exc.__cause__, FileNotFoundError):
                raise ArchiveCorrupt(
                    f"segment {segment.name} is listed in the manifest but its file is missing"
                ) from exc
            raise
        return fmt.check_segment(segment, blob)

    def bodies(self, seqs: Iterable[int]) -> dict[int, ArchivedDelivery]:
        """The archived deliveries of ``seqs`` that the archive holds, by seq (a seq it
        does not hold is left out). Each segment needed is read once while it stays in
        the cache; the manifest is listed again only when a seq is in no known segment."""
        wanted = list(seqs)
        found: dict[int, ArchivedDelivery] = {}
        missing = self._collect(wanted, found)
        if missing:
            self._load_entries()
            self._collect(missing, found)
        return found

    def find(self, seq: int) -> Segment | None:
        """The segment holding ``seq`` among those listed when the manifest was last read
        (by segments(), bodies() or verify()), or None."""
        return self._find(seq)

    def verify(self, expected: Iterable[tuple[int, str]] | None = None) -> VerifyReport:
        """Every segment's hash and contents, every delivery in exactly one segment, and
        (when given) every ``(seq, body_sha256)`` expected found with that body: the
        database's trimmed deliveries. Problems are reported, each naming its segment,
        not raised; ArchiveUnavailable only when the location cannot be read at all."""
        entries, bad = self._load_entries()
        listed = {s.name for s in entries} | {name for name, _ in bad}
        unlisted = sorted(set(self._list(SEGMENTS, SEGMENT_SUFFIX)) - listed)
        return verify_archive(self, entries, bad, unlisted, expected)

    # -- the manifest and the cache -------------------------------------------------------

    def _load_entries(self) -> tuple[list[Segment], list[tuple[str, str]]]:
        """List the manifest; read the entries not read before. Returns the segments by
        first seq, and (name, problem) for each entry that cannot be read."""
        names = self._list(MANIFEST, ENTRY_SUFFIX)
        with self._lock:
            known = dict(self._entries)
        fresh = {name: known[name] for name in names if name in known}
        new = {self._entry_path(name): name for name in names if name not in known}
        bad: list[tuple[str, str]] = []
        # One call for them all: an object store's filesystem (s3fs) fetches them at once,
        # which matters to the first listing of years of segments.
        with self._io("read the manifest in", f"{self._root}/{MANIFEST}"):
            got: dict[str, Any] = self._fs.cat(list(new), on_error="return") if new else {}
        for path, name in new.items():
            data = got.get(path)
            try:
                with self._io("read the manifest entry", path):
                    if isinstance(data, Exception):
                        raise data
                    if data is None:  # a key spelled otherwise by some filesystem
                        data = self._fs.cat_file(path)
            except ArchiveUnavailable as exc:
                if isinstance(exc.__cause__, FileNotFoundError):
                    continue  # discarded since it was listed
                raise
            try:
                fresh[name] = fmt.parse_entry(data, name)
            except ArchiveCorrupt as exc:
                bad.append((name, str(exc)))
        with self._lock:
            if fresh.keys() != self._entries.keys():
                self._entries = fresh
                self._index = None
        return sorted(fresh.values(), key=lambda s: (s.first_seq, s.name)), bad

    def _collect(self, seqs: list[int], found: dict[int, ArchivedDelivery]) -> list[int]:
        missing = []
        for seq in seqs:
            segment = self._find(seq)
            if segment is None:
                missing.append(seq)
                continue
            found[seq] = self._decoded(segment)[seq]
        return missing

    def _find(self, seq: int) -> Segment | None:
        with self._lock:
            if self._index is None:
                ranges = [(a, b, s.name) for s in self._entries.values() for a, b in s.ranges]
                ranges.sort()
                self._index = ranges
                self._reach = []
                for _, b, _ in ranges:
                    self._reach.append(max(b, self._reach[-1]) if self._reach else b)
            index, reach, entries = self._index, self._reach, self._entries
        # The range starting at or before seq; walk back only while an earlier range can
        # still reach seq (ranges of segments overlap only when a delivery was archived
        # twice, which verify reports).
        i = bisect.bisect_right(index, seq, key=lambda r: r[0]) - 1
        while i >= 0 and reach[i] >= seq:
            first, last, name = index[i]
            if first <= seq <= last:
                return entries[name]
            i -= 1
        return None

    def _decoded(self, segment: Segment) -> dict[int, ArchivedDelivery]:
        with self._lock:
            hit = self._cache.get(segment.name)
            if hit is not None:
                self._cache.move_to_end(segment.name)
                return hit[0]
        deliveries = {d.seq: d for d in self.read_segment(segment)}
        weight = sum(len(d.body) for d in deliveries.values())
        with self._lock:
            self._cache[segment.name] = (deliveries, weight)
            total = sum(w for _, w in self._cache.values())
            while len(self._cache) > 1 and total > CACHE_BYTES:
                _, (_, dropped) = self._cache.popitem(last=False)
                total -= dropped
        return deliveries

    # -- the filesystem -------------------------------------------------------------------

    @contextlib.contextmanager
    def _io(self, doing: str, path: str) -> Iterator[None]:
        """Any failure of the location becomes ArchiveUnavailable naming the operation,
        the place and the cause. Remote filesystems raise their own kinds (botocore's
        NoCredentialsError is no OSError), so there anything but our own errors is taken
        as the location failing; a local filesystem only fails with OSError."""
        try:
            yield
        except EmbrasureError:
            raise
        except Exception as exc:
            if self._local and not isinstance(exc, OSError):
                raise
            where = path if self._local else self._fs.unstrip_protocol(path)
            raise ArchiveUnavailable(
                f"archive {self.location}: cannot {doing} {where}: {_why(exc)}"
            ) from exc

    def _segment_path(self, name: str) -> str:
        return f"{self._root}/{SEGMENTS}/{name}{SEGMENT_SUFFIX}"

    def _entry_path(self, name: str) -> str:
        return f"{self._root}/{MANIFEST}/{name}{ENTRY_SUFFIX}"

    def _list(self, folder: str, suffix: str) -> list[str]:
        path = f"{self._root}/{folder}"
        with self._io("list", path):
            self._fs.invalidate_cache(path)  # s3fs caches listings; another writer adds
            try:
                listed: list[Any] = self._fs.ls(path, detail=False)
            except FileNotFoundError:
                return []
        names = (str(p).rstrip("/").rsplit("/", 1)[-1] for p in listed)
        # A leading dot is a local write in progress (_put_local's temporary name).
        return sorted(
            n[: -len(suffix)] for n in names if n.endswith(suffix) and not n.startswith(".")
        )

    def _put(self, path: str, data: bytes, *, replace: bool) -> None:
        if self._local:
            _put_local(path, data, replace=replace)
        else:
            # An object store's PUT is atomic and durable once it returns.
            self._fs.pipe_file(path, data)

    def _remove(self, path: str) -> None:
        try:
            if self._local:
                os.unlink(path)
                _fsync_dir(os.path.dirname(path))
            else:
                self._fs.rm_file(path)
        except FileNotFoundError:
            pass

    def _remove_quietly(self, path: str) -> None:
        """Clean up after a failed write; the failure itself is what the caller hears."""
        with contextlib.suppress(Exception):
            self._remove(path)


def _put_local(path: str, data: bytes, *, replace: bool) -> None:
    """Write ``data`` at ``path`` durably: the file fsync'd, then its directory (a new
    name is durable only once its directory is). ``replace=False`` writes in place and
    refuses an existing file (O_EXCL); ``replace=True`` writes a temporary file and
    renames it over, so a reader never sees half of it."""
    directory = os.path.dirname(path)
    _make_dirs(directory)
    target = path
    if replace:
        target = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(6)}")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(target, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(target)
        raise
    _fsync_dir(directory)


def _make_dirs(directory: str) -> None:
    """Create ``directory`` and its missing parents durably: each new directory's name is
    fsync'd in its parent, or a power cut could take a whole new archive with it after
    the database had let its bodies go."""
    missing = []
    while not os.path.isdir(directory):
        missing.append(directory)
        directory = os.path.dirname(directory)
    for new in reversed(missing):
        try:
            os.mkdir(new)
        except FileExistsError:
            if not os.path.isdir(new):  # a file in the way, not another writer's mkdir
                raise
        _fsync_dir(os.path.dirname(new))


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
