"""Reading a body that retention moved to the archive (docs/operations.md
#retention-and-the-archive): reproject, ``GET /api/v1/events`` and replay get the same
bytes from the archive as they got from the database before the pass.

A trimmed delivery is one whose row stays and whose body the store no longer holds (the
store hands out None for it). ``ArchivedBodies`` opens the archive at the first such
read, not at start-up: a server whose archive is unreachable still serves everything
the database holds.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

from embrasure.errors import ArchiveCorrupt, ArchiveUnavailable
from embrasure.lifecycle.archive import Archive
from embrasure.store.base import LogEntry


class ArchivedBodies:
    """The bodies of trimmed deliveries, from the archive at ``location`` ("" when
    none is configured: a trimmed body is then a clear ArchiveUnavailable)."""

    def __init__(self, location: str, open_archive: Callable[[str], Archive] = Archive) -> None:
        self.location = location
        self._open = open_archive
        self._archive: Archive | None = None
        self._lock = threading.Lock()

    def _get(self) -> Archive:
        with self._lock:
            if self._archive is None:
                if not self.location:
                    raise ArchiveUnavailable(
                        "this delivery's body was moved to the archive by retention: give"
                        " --archive (EMBRASURE_ARCHIVE) to read it"
                    )
                self._archive = self._open(self.location)
            return self._archive

    def bodies(self, seqs: Iterable[int]) -> dict[int, bytes]:
        """seq → body for every one of ``seqs``; ArchiveCorrupt names a seq the database
        trimmed and no segment holds."""
        wanted = sorted(set(seqs))
        if not wanted:
            return {}
        found = self._get().bodies(wanted)
        missing = [seq for seq in wanted if seq not in found]
        if missing:
            raise ArchiveCorrupt(
                f"the body of delivery seq {missing[0]} (and {len(missing) - 1} more) left"
                f" the database but archive {self.location} holds no segment with it:"
                " run `embrasure archive verify`"
            )
        return {seq: found[seq].body for seq in wanted}

    def body(self, seq: int, stored: bytes | None) -> bytes:
        """A delivery's body: ``stored`` when the database still has it."""
        return stored if stored is not None else self.bodies([seq])[seq]

    def fill(self, entries: Sequence[LogEntry]) -> list[LogEntry]:
        """Log entries with every trimmed body read back from the archive."""
        trimmed = [e.seq for e in entries if e.body is None]
        if not trimmed:
            return list(entries)
        found: Mapping[int, bytes] = self.bodies(trimmed)
        return [
            e if e.body is not None else dataclasses.replace(e, body=found[e.seq]) for e in entries
        ]


NO_ARCHIVE = ArchivedBodies("")  # where retention is off: a trimmed body is an error
