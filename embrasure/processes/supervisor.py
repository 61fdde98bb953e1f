"""``embrasure serve``'s processes, supervised (docs/operations.md#processes).

The receiver, the projector, the retention passes and the Kafka consumer each run on an
interpreter of their own, so none waits for another's GIL: each is the command that runs
that stage alone (``serve --single-process --no-projector``, ``project``,
``retention --loop``, ``consume``), started with the supervisor's settings in their
``EMBRASURE_*`` variables.

- **Sockets.** The supervisor binds and listens on the ports itself and hands the
  sockets to the receiver (``--listen-fd``): a bad address fails before anything starts,
  and while a receiver restarts, connections wait in the socket's backlog instead of
  being refused.
- **Restarts.** A process that exits while the server runs is logged with its status
  and started again, after 1 s, doubling to 30 s while it keeps dying within 10 s of its
  start. Nothing acknowledged is lost by a death: a receipt is sent only once its
  delivery is durable (docs/architecture.md), and every stage resumes from the database.
- **Stopping.** SIGTERM or SIGINT stops the receiver first (it answers what it has
  accepted and commits its queue: ``--graceful-shutdown-seconds``), then the Kafka
  consumer (its batch in hand commits, then its offsets), then the projector and
  retention (between two transactions). A process that has not stopped after
  ``STOP_GRACE_S`` more is killed; nothing it acknowledged is lost to that either.
- **Orphans.** Each child asks the kernel for SIGTERM when the supervisor dies
  (``PR_SET_PDEATHSIG``): a supervisor killed with -9 does not leave a receiver holding
  the port.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from embrasure.model import utc_now
from embrasure.processes.status import StatusBoard

log = logging.getLogger("embrasure.processes")

FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
QUICK_DEATH_S = 10.0  # a process that dies sooner than this backs off further
STOP_GRACE_S = 10.0  # past a stage's own shutdown time, before SIGKILL
POLL_S = 0.2
STOP_FIRST = ("receiver", "kafka")  # stopped one after the other, before the others
_PR_SET_PDEATHSIG = 1


@dataclasses.dataclass
class Stage:
    """One supervised process: ``name``, the ``embrasure`` arguments that run it, its
    environment (the supervisor's settings, with this stage's changes), the sockets it
    inherits, how long it may take to stop, and whether it serves the receiver's
    forwarded reads (it then says when it does: status.announce_serving)."""

    name: str
    args: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    stop_seconds: float = 0.0
    serves: bool = False
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0  # time.monotonic() at its start
    started_at: str | None = None  # the same, for people (UTC)
    restarts: int = 0
    quick_deaths: int = 0  # deaths in a row within QUICK_DEATH_S of a start
    restart_at: float | None = None
    last_exit: int | None = None

    def row(self) -> dict[str, Any]:
        running = self.proc is not None and self.proc.poll() is None
        return {
            "pid": self.proc.pid if running and self.proc is not None else None,
            "state": "running" if running else "starting" if self.proc is None else "restarting",
            "restarts": self.restarts,
            "started_at": self.started_at if running else None,
            "last_exit": self.last_exit,
            "serves": self.serves,
        }


def _die_with(parent: int) -> Callable[[], None]:
    """What the child runs before exec: SIGTERM when the supervisor dies (Linux only)."""

    def ask() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):  # not Linux: orphans are the operator's to stop
            return
        if os.getppid() != parent:  # it died before we asked (prctl(2)): stop now
            os._exit(1)

    return ask


class Supervisor:
    """Runs ``stages`` until SIGTERM/SIGINT; publishes its table on ``board``."""

    def __init__(self, stages: Sequence[Stage], board: StatusBoard) -> None:
        self.stages = list(stages)
        self.board = board
        self._stop = threading.Event()

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: self._stop.set())
        self._publish()  # first: the receiver reads which processes there are
        for stage in self.stages:
            self._start(stage)
        self._publish()
        last_published = time.monotonic()
        while not self._stop.wait(POLL_S):
            now = time.monotonic()
            for stage in self.stages:
                self._watch(stage, now)
            if now - last_published >= 1.0:
                self._publish()
                last_published = now
        self._stop_all()
        self._publish()
        return 0

    def _start(self, stage: Stage) -> None:
        argv = [sys.executable, "-m", "embrasure", *stage.args]
        # A process group of its own: Ctrl-C in a terminal reaches the supervisor alone,
        # which stops the processes in order (a receiver signalled twice would skip its
        # graceful shutdown).
        stage.proc = subprocess.Popen(
            argv,
            env=stage.env,
            pass_fds=stage.pass_fds,
            preexec_fn=_die_with(os.getpid()),
            process_group=0,
        )
        stage.started, stage.restart_at = time.monotonic(), None
        stage.started_at = utc_now()
        log.info(
            "started the %s (pid %d)",
            stage.name,
            stage.proc.pid,
            extra={"stage": stage.name, "pid": stage.proc.pid},
        )

    def _watch(self, stage: Stage, now: float) -> None:
        if stage.restart_at is not None:
            if now >= stage.restart_at:
                stage.restarts += 1
                self._start(stage)
            return
        assert stage.proc is not None
        code = stage.proc.poll()
        if code is None:
            return
        ran = now - stage.started
        stage.quick_deaths = stage.quick_deaths + 1 if ran < QUICK_DEATH_S else 0
        wait = min(FIRST_BACKOFF_S * 2 ** max(0, stage.quick_deaths - 1), MAX_BACKOFF_S)
        stage.last_exit, stage.restart_at = code, now + wait
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        log.error(
            "the %s (pid %d) %s after %.1f s; starting it again in %.0f s",
            stage.name,
            stage.proc.pid,
            how,
            ran,
            wait,
            extra={"stage": stage.name, "pid": stage.proc.pid, "exit_status": code},
        )

    def _stop_all(self) -> None:
        """In order: the receiver, the consumer, then the others together."""
        rest = [s for s in self.stages if s.name not in STOP_FIRST]
        for group in [*([s for s in self.stages if s.name == n] for n in STOP_FIRST), rest]:
            self._stop_group(group)

    def _stop_group(self, group: list[Stage]) -> None:
        running = [s for s in group if s.proc is not None and s.proc.poll() is None]
        for stage in running:
            assert stage.proc is not None
            stage.proc.send_signal(signal.SIGTERM)
        for stage in running:
            assert stage.proc is not None
            try:
                stage.proc.wait(stage.stop_seconds + STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                log.error(
                    "the %s (pid %d) did not stop within %.0f s: killed",
                    stage.name,
                    stage.proc.pid,
                    stage.stop_seconds + STOP_GRACE_S,
                )
                stage.proc.kill()
                stage.proc.wait()

    def _publish(self) -> None:
        self.board.publish("processes", {s.name: s.row() for s in self.stages})
