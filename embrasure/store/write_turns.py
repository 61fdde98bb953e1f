"""Turns at SQLite's write lock for one process's writers, first come, first served.

SQLite queues no one for its write lock. A connection that finds it taken sleeps in its
busy handler (1, 2, 5, 10, 15, 20, 25 … ms) and tries again, so a receipt behind a 10 ms
projection commit waits 18 ms, behind 20 ms 33 ms; and a writer that commits and begins
again at once can take the lock back before a sleeper wakes (store/pacing.py). Within
one process (``serve``: the receiver's group commit, the projector, retention passes)
the writers take turns here instead, in the order they asked, each woken the moment the
one before it is done. Between processes (``serve``'s receiver and projector, two
``serve`` on one file, ``embrasure retention`` beside a server) a turn also holds an
``flock`` on a lock file beside the database, so the processes queue in the kernel;
SQLite's lock still decides, and a writer that takes no turn (a migration) is waited
for by the busy handler as before (docs/operations.md#two-servers-on-one-sqlite-file).

A turn is the thread's: a writer already holding one (a rebuild creating its tables in
a projection transaction) goes on without queueing behind itself. When a turn ends,
``after`` is called (the WAL's checkpoints run then, store/checkpoints.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Callable, Iterator


class WriteTurns:
    def __init__(
        self, after: Callable[[], None] = lambda: None, lock_path: str | None = None
    ) -> None:
        self._after = after
        # The lock file (module docstring): the kernel wakes the next process's writer
        # the moment the lock is let go, where SQLite's busy handler sleeps 1 to 100 ms
        # between tries.
        self._file = (
            os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            if lock_path is not None
            else None
        )
        self._changed = threading.Condition()
        self._issued = 0  # tickets handed out
        self._serving = 0  # the ticket whose turn it is
        self._given_up: set[int] = set()  # tickets of writers that stopped waiting
        self._owner: int | None = None
        self._depth = 0

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """Wait for this thread's turn, and hold it while the body runs."""
        me = threading.get_ident()
        with self._changed:
            if self._owner == me:
                self._depth += 1
            else:
                ticket = self._issued
                self._issued += 1
                try:
                    while self._serving != ticket:
                        self._changed.wait()
                except BaseException:  # interrupted while waiting: let the queue move on
                    self._given_up.add(ticket)
                    self._skip_given_up()
                    raise
                self._owner, self._depth = me, 1
                if self._file is not None:
                    fcntl.flock(self._file, fcntl.LOCK_EX)  # releases the GIL while it waits
        try:
            yield
        finally:
            with self._changed:
                self._depth -= 1
                ended = self._depth == 0
                if ended:
                    if self._file is not None:
                        fcntl.flock(self._file, fcntl.LOCK_UN)
                    self._owner = None
                    self._serving += 1
                    self._skip_given_up()
            if ended:
                self._after()

    def close(self) -> None:
        if self._file is not None:
            os.close(self._file)
            self._file = None

    def _skip_given_up(self) -> None:
        while self._serving in self._given_up:
            self._given_up.discard(self._serving)
            self._serving += 1
        self._changed.notify_all()
