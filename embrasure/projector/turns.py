"""Two projector processes taking turns at the graph
(docs/projection.md#two-processes-taking-turns).

On SQLite one transaction at a time writes the graph, and a projection step is two
halves: ``prepare`` (reading, validating and folding the deliveries: Python, no lock)
and ``commit`` (writing the rows under the graph's write lock). One process does them
one after the other and uses one core. Two processes alternate steps instead: while
one commits step k, the other reads and folds step k+1 from where k ends, then
commits it as soon as k has committed. Nothing crosses between them but a few
integers over a pipe — where the next step starts, and "my commit is done" — each
reads its deliveries from the log itself, and each warms its own memos. (Handing
folded rows from a folding process to a writing one was measured first: pickling a
step's contributions cost as much as folding them, bench/README.md.)

Correctness never rests on the turns. A commit checks under the write lock that the
graph's position is where its deliveries start (worker.py ``_validate_then_lock``), so a
turn out of order applies nothing: a partner that died, a reproject's swap moving the
position. Either raises ``TurnLost``, and the leader starts the pair over from the
stored position. A delivery retried one by one after a failed step waits for the
partner's turn too, so positions only ever move forward in log order.

The partner says ``("ready",)`` once started (an interpreter, its imports, the store:
half a second or more). The leader does not wait for it to begin: its first step tells
the partner where the second starts, which waits in the pipe, so the partner folds step
2 as soon as it is up while step 1 is being written; the leader waits for it only after
its own first commit, and at most ``START_WAIT_S`` (a partner that never starts is a
broken pair: the leader goes on alone). The protocol, per step of either process: read
the deliveries from ``start`` → send ``("next", end, count)`` (the partner starts
there) → fold → receive ``("done",)`` (the partner's commit) → commit → send
``("done",)``. The leader (the projector's own process) starts first and ends the pair
with ``("stop",)`` after the partner's last ``done``.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from embrasure.store.base import LogEntry

log = logging.getLogger("embrasure.projector")

STOP_WAIT_S = 30.0  # for the partner to exit after ``stop`` (a step in hand commits)
START_WAIT_S = 30.0  # for the partner to say it is ready, after the leader's first step


class TurnLost(Exception):
    """The pair's order is broken (a partner gone, the position moved under it)."""


def _send(conn: Connection, message: tuple[Any, ...]) -> None:
    try:
        conn.send(message)
    except (OSError, ValueError) as exc:  # broken pipe, closed connection
        raise TurnLost(f"the partner is gone: {exc}") from exc


def _recv(conn: Connection) -> tuple[Any, ...]:
    try:
        message = conn.recv()
    except (EOFError, OSError) as exc:
        raise TurnLost(f"the partner is gone: {exc!r}") from exc
    if not isinstance(message, tuple) or not message:
        raise TurnLost(f"unexpected message from the partner: {message!r}")
    return message


class Turn:
    """One step of a process in the pair: its deliveries start after ``start``."""

    def __init__(self, conn: Connection, start: int, first: bool = False) -> None:
        self.conn = conn
        self.start = start
        self._waited = first  # the leader's first step waits for nobody

    def read(self, entries: Sequence[LogEntry]) -> None:
        """Tell the partner where its next step starts: after these deliveries."""
        end = entries[-1].seq if entries else self.start
        _send(self.conn, ("next", end, len(entries)))

    def wait(self) -> None:
        """Until the partner's step has committed (once per turn; before any write)."""
        if self._waited:
            return
        self._waited = True
        message = _recv(self.conn)
        if message != ("done",):
            raise TurnLost(f"expected the partner's commit, got {message!r}")

    def done(self) -> None:
        """This step has committed (or had nothing to commit): the partner's turn."""
        self.wait()
        _send(self.conn, ("done",))


def follow(conn: Connection, step: Callable[[Turn], int]) -> None:
    """The partner's loop: a step from wherever the leader's last one ended, until
    ``stop``. Raises TurnLost when the leader is gone or the order broke."""
    _send(conn, ("ready",))
    while True:
        message = _recv(conn)
        if message == ("stop",):
            return
        if message[0] != "next":
            raise TurnLost(f"expected where to start, got {message!r}")
        turn = Turn(conn, int(message[1]))
        step(turn)
        turn.done()


class Partner:
    """The leader's side of the pair: the partner process and the pipe to it. The
    partner runs ``python -m <module> <fd>`` (a fresh interpreter: the leader may hold
    threads, locks and SQLite connections no forked child could use, and unlike
    multiprocessing's spawn it never re-runs the leader's ``__main__``); its first
    message is ``args``, what it opens the store by."""

    def __init__(self, module: str, args: tuple[Any, ...]) -> None:
        ours, theirs = socket.socketpair()
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-m", module, str(theirs.fileno())], pass_fds=[theirs.fileno()]
            )
        self.conn = Connection(ours.detach())
        self.deliveries = 0  # what its steps read, for the leader's count and the tests
        self.started = False  # it said it is ready
        _send(self.conn, args)
        log.info("projector partner started (pid %s)", self.process.pid)

    def ready(self) -> bool:
        """Whether the partner has started (an interpreter, its imports and the store:
        a second or more), without waiting for it."""
        if not self.started and self.conn.poll():
            if (message := _recv(self.conn)) != ("ready",):
                raise TurnLost(f"expected the partner to start, got {message!r}")
            self.started = True
        return self.started

    def next(self, stop: threading.Event) -> tuple[int, int]:
        """Where the partner's step ends and how many deliveries it read; the first
        time, after it has started (within ``START_WAIT_S``, unless ``stop`` is set)."""
        deadline = time.monotonic() + START_WAIT_S
        while not self.ready():
            if stop.is_set():
                raise TurnLost("stopped while the partner was starting")
            if time.monotonic() > deadline:
                raise TurnLost(f"the partner did not start within {START_WAIT_S:.0f} s")
            self.conn.poll(0.05)
        message = _recv(self.conn)
        if len(message) != 3 or message[0] != "next":
            raise TurnLost(f"expected where the partner's step ends, got {message!r}")
        self.deliveries += int(message[2])
        return int(message[1]), int(message[2])

    def finish(self) -> None:
        """After the partner's last ``next``: wait for its commit, then stop it."""
        Turn(self.conn, 0).wait()
        _send(self.conn, ("stop",))
        with contextlib.suppress(subprocess.TimeoutExpired):  # killed below
            self.process.wait(STOP_WAIT_S)
        self.kill()

    def terminate(self) -> None:
        """Signal the partner to end now, from any thread: the leader's next read of
        the pipe then finds it closed (``kill`` waits for it and closes the pipe)."""
        if self.process.poll() is None:
            self.process.terminate()

    def kill(self) -> None:
        """Stop the partner now (a step it had in hand rolls back: nothing is lost, its
        deliveries are projected again from the stored position)."""
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait()
        self.conn.close()


def partner_pipe(argv: Sequence[str]) -> Connection:
    """In the partner: its end of the pipe, from the file descriptor it was given."""
    return Connection(int(argv[1]))


def recv_args(conn: Connection) -> tuple[Any, ...]:
    """In the partner: the leader's first message, what ``follow`` is called with."""
    return _recv(conn)
