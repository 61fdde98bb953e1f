"""``embrasure archive verify``'s checks (docs/operations.md#retention-and-the-archive):
every segment read and checked against its manifest entry, every delivery in exactly one
segment, and every trimmed delivery the database expects found with its body's SHA-256.

Memory stays flat however long the archive: segments are read one at a time, overlaps
are found from the entries' seq ranges (each checked against its segment's contents), and
the expected deliveries are looked up through the archive's cache in chunks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Iterable, Sequence
from typing import Protocol

from embrasure.errors import ArchiveCorrupt
from embrasure.lifecycle.segments import ArchivedDelivery, Segment, deliveries, describe, ranges_of


class Archive(Protocol):
    """What the checks read of an archive (lifecycle/archive.py's ``Archive``, which
    calls them: a protocol, so this module need not import that one)."""

    location: str

    def read_segment(self, segment: Segment) -> list[ArchivedDelivery]: ...

    def find(self, seq: int) -> Segment | None: ...

    def bodies(self, seqs: Iterable[int]) -> dict[int, ArchivedDelivery]: ...


# Expected deliveries looked up at once: seq order keeps each segment's one read.
CHUNK = 1000
# Per-seq problems (a body whose hash differs) listed before only counting the rest.
MOST_LISTED = 20


@dataclasses.dataclass(frozen=True, slots=True)
class SegmentCheck:
    """One segment's result: ``problem`` is None when it is sound."""

    segment: Segment
    problem: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class VerifyReport:
    location: str
    checks: tuple[SegmentCheck, ...]
    # Every problem, each naming the segment, manifest entry or seqs concerned; the
    # segments' own problems come first, as in ``checks``.
    problems: tuple[str, ...]
    # Segment files with no manifest entry: a pass that crashed while writing, or a
    # discard interrupted. They count for nothing; reported so they can be removed.
    unlisted: tuple[str, ...]
    deliveries: int  # held by the segments listed
    expected: int  # trimmed deliveries checked against the archive (0 without a database)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_archive(
    archive: Archive,
    entries: Sequence[Segment],
    bad_entries: Sequence[tuple[str, str]],
    unlisted: Sequence[str],
    expected: Iterable[tuple[int, str]] | None,
) -> VerifyReport:
    checks = []
    for segment in entries:
        try:
            archive.read_segment(segment)
            checks.append(SegmentCheck(segment, None))
        except ArchiveCorrupt as exc:
            checks.append(SegmentCheck(segment, str(exc)))
    problems = [c.problem for c in checks if c.problem]
    problems += [problem for _, problem in bad_entries]
    problems += _overlaps(entries)
    count = 0
    if expected is not None:
        damaged = {c.segment.name for c in checks if c.problem}
        count, found = _check_expected(archive, expected, damaged)
        problems += found
    return VerifyReport(
        location=archive.location,
        checks=tuple(checks),
        problems=tuple(problems),
        unlisted=tuple(unlisted),
        deliveries=sum(s.count for s in entries),
        expected=count,
    )


def _overlaps(entries: Sequence[Segment]) -> list[str]:
    """Seqs listed by two segments: a sweep over every range by its first seq, comparing
    each with the range reaching furthest so far."""
    ranges = sorted((a, b, s.name) for s in entries for a, b in s.ranges)
    pairs: dict[tuple[str, str], list[tuple[int, int]]] = {}
    reach, holder = -1, ""
    for first, last, name in ranges:
        if first <= reach and name != holder:
            pair = (holder, name) if holder < name else (name, holder)
            pairs.setdefault(pair, []).append((first, min(last, reach)))
        if last > reach:
            reach, holder = last, name
    out = []
    for (one, other), shared in sorted(pairs.items()):
        n = sum(b - a + 1 for a, b in shared)
        out.append(
            f"segments {one} and {other} both hold seqs {describe(shared)} "
            f"({deliveries(n)} archived twice)"
        )
    return out


def _check_expected(
    archive: Archive, expected: Iterable[tuple[int, str]], damaged_names: set[str]
) -> tuple[int, list[str]]:
    count = 0
    missing: list[int] = []
    differ: list[int] = []
    damaged: dict[str, int] = {}
    pending = iter(expected)
    while chunk := list(itertools.islice(pending, CHUNK)):
        count += len(chunk)
        sound = {}
        for seq, sha256 in chunk:
            segment = archive.find(seq)
            if segment is None:
                missing.append(seq)
            elif segment.name in damaged_names:
                damaged[segment.name] = damaged.get(segment.name, 0) + 1
            else:
                sound[seq] = sha256
        for seq, delivery in sorted(archive.bodies(sound).items()):
            if hashlib.sha256(delivery.body).hexdigest() != sound[seq]:
                differ.append(seq)
    problems = []
    if missing:
        problems.append(
            f"{deliveries(len(missing))} trimmed but in no segment: seqs "
            f"{describe(ranges_of(sorted(missing)))}"
        )
    if differ:
        listed = ", ".join(map(str, differ[:MOST_LISTED]))
        more = f" and {len(differ) - MOST_LISTED} more" if len(differ) > MOST_LISTED else ""
        problems.append(
            f"{deliveries(len(differ))} archived with a body whose SHA-256 is not the one "
            "the database recorded: "
            f"seqs {listed}{more}"
        )
    problems += [
        f"{deliveries(n)} trimmed, archived in damaged segment {name}"
        for name, n in damaged.items()
    ]
    return count, problems
