"""SQLite's WAL checkpoints in a thread of their own, mostly outside the writers' turns.

In WAL mode a commit appends its pages to the ``-wal`` file, and a checkpoint copies them
into the database file, syncing the WAL before and the database after
(https://www.sqlite.org/wal.html#ckpt). By default the connection whose commit takes the
WAL to 1,000 pages runs that checkpoint inside its COMMIT, and in this process that is
inside its turn at the write lock (store/write_turns.py): every writer queued behind it,
a receipt among them, waits for the page copies and both syncs. Measured with
``perf trace`` in the soak (bench/README.md, "Run steps after the snapshot reads"):
during a retention pass its run steps checkpointed every ~55 ms, the WAL's fdatasync
0.3-3 ms then the database's 4-9 ms, and their holds on the lock were bimodal, 2-6 ms or
10-20 ms whatever their size.

So after each write turn this thread runs a PASSIVE checkpoint, which copies what it can
without waiting for readers or writers and takes no write lock
(https://www.sqlite.org/c3ref/wal_checkpoint_v2.html): the writers go on meanwhile. That
alone does not stop the WAL growing. Only a writer that begins when the whole WAL is
copied starts it over from its beginning, and while writers commit every few ms a
checkpoint running beside them seldom sees it whole: in the soak of 0d83f7e, with only
this thread, the WAL grew to the writers' own autocheckpoint (then 10,000 pages), which
copied what was left inside a commit, 20-60 ms of a run step's hold. So once the WAL
holds ``RESTART_PAGES``, the thread copies the rest in a write turn of its own: the
frames since its checkpoint and two syncs of little, while the bulk was copied outside.
A writer's own autocheckpoint stays, at ``BACKSTOP_PAGES``, for when this thread is not
running (another process's writes) or falls behind.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable

log = logging.getLogger("embrasure.log")

# Past this many WAL pages (16 MiB of 4 KiB pages) the thread finishes a checkpoint in a
# write turn, so that the next writer starts the WAL over.
RESTART_PAGES = 4_000
# A writer checkpoints inside its own commit past this many (40 MiB).
BACKSTOP_PAGES = 10_000
# The least time between two checkpoints: during a retention pass writers commit every
# few ms, and a checkpoint for each would sync the database file as often. At the soak's
# pace (~1,000 WAL pages in 55 ms during a pass) a gap lets ~2,000 pages pile up.
GAP_S = 0.1


class Checkpointer:
    """Checkpoints the database at ``connect()``'s WAL soon after each ``wrote()``, in a
    daemon thread started at the first one; ``turn`` is a write turn of the process."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        turn: Callable[[], contextlib.AbstractContextManager[None]],
    ) -> None:
        self._connect = connect
        self._turn = turn
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._started = threading.Lock()
        self._thread: threading.Thread | None = None

    def wrote(self) -> None:
        """A write turn has ended: there are pages to copy."""
        self._wake.set()
        if self._thread is None:
            with self._started:
                if self._thread is None and not self._closed.is_set():
                    self._thread = threading.Thread(
                        target=self._run, name="embrasure-checkpoints", daemon=True
                    )
                    self._thread.start()

    def close(self) -> None:
        """Stop the thread (after the checkpoint it may be running) and close its
        connection; the last connection to close checkpoints what is left."""
        with self._started:
            self._closed.set()
            self._wake.set()
            thread = self._thread
        if thread is not None:
            thread.join()

    def checkpoint(self, conn: sqlite3.Connection) -> None:
        """One checkpoint beside the writers, finished in a write turn once the WAL has
        grown to ``RESTART_PAGES``. Even a checkpoint that found the WAL whole does not
        let it start over if a writer began meanwhile: a writer starts the WAL over only
        if the WAL was whole when it began (it then reads none of it)."""
        pages = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
        if pages >= RESTART_PAGES:
            with self._turn():
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()

    def _run(self) -> None:
        try:
            conn = self._connect()
        except sqlite3.Error as exc:
            log.warning("WAL checkpoints fall back to the writers: %s", exc)
            return
        failing = False  # said once until a checkpoint succeeds again
        try:
            while True:
                self._wake.wait()
                if self._closed.is_set():
                    return
                self._wake.clear()
                try:
                    self.checkpoint(conn)
                except sqlite3.Error as exc:  # a full disk: the writers' backstop still bounds it
                    if not failing:
                        log.warning("WAL checkpoints failing, the WAL grows meanwhile: %s", exc)
                    failing = True
                else:
                    if failing:
                        log.warning("WAL checkpoints succeed again")
                    failing = False
                if self._closed.wait(GAP_S):
                    return
        finally:
            conn.close()
