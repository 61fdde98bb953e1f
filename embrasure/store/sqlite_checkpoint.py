"""WAL checkpoints off the commit path (store/sqlite.py).

By default SQLite checkpoints inside a COMMIT: the transaction that takes the WAL past
``wal_autocheckpoint`` pages (1,000) copies the WAL into the database file and syncs it
before its COMMIT returns (https://www.sqlite.org/wal.html#automatic_checkpoint). That
commit is the receiver's as often as anyone's, so a receipt waited for a checkpoint now
and then, and so did everything queued behind it for the write lock (store/write_turns.py).
In the soak (bench/README.md) the steps of a retention pass, which dirty many pages,
held the lock 1.7 ms at p50 and 83 ms at p99 (segment trims), and receipts during passes
had a p99 of 81 ms against 28.5 ms between them.

So a store's connections set ``wal_autocheckpoint = 0`` and one thread checkpoints
every ``EVERY_S`` seconds in PASSIVE mode, which takes neither the write lock nor any
reader's: writers append to the WAL while it copies. A checkpoint that cannot finish
(a reader still on old frames) is retried at the next tick, as an automatic one would
be at the next commit. A process that does not run the thread (a CLI command's short
store) leaves its WAL to the last connection's close, which checkpoints it.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

log = logging.getLogger("embrasure.store")

EVERY_S = 1.0  # at 500 events/s the WAL then stays within a few MiB between checkpoints


class Checkpointer(threading.Thread):
    """Checkpoints the WAL of ``conn``'s database every ``every_s``, on ``conn`` (its own
    connection, which it closes when stopped)."""

    def __init__(self, conn: sqlite3.Connection, every_s: float = EVERY_S) -> None:
        super().__init__(name="embrasure-wal-checkpoint", daemon=True)
        self._conn = conn
        self._every_s = every_s
        self._stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self._stopping.wait(self._every_s):
                try:
                    self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:  # a full disk, an I/O error: try again later
                    log.warning("WAL checkpoint failed, retried in %.0f s: %s", self._every_s, exc)
        finally:
            self._conn.close()

    def stop(self) -> None:
        """Stop (a store's ``close``, or the store's collection: see store/sqlite.py)."""
        self._stopping.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()
