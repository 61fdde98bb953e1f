"""What each process of ``serve`` tells the others (docs/operations.md#processes).

``serve`` runs the receiver, the projector, the retention passes and the Kafka consumer
in processes of their own (processes/supervisor.py); ``/readyz`` and ``/metrics`` are the
receiver's, and report every process. So the supervisor makes a directory (its path in
``EMBRASURE_STATUS_DIR``, set for its children only) where each process keeps one JSON
document of what it has to report, rewritten every ``PUBLISH_SECONDS`` and replaced
atomically (a reader sees the old document or the new one, never half of one):

- ``processes``: the supervisor's table: each process's pid, state and restarts;
- ``retention``: the retention process's passes (lifecycle/retention.RetentionState);
- ``kafka``: the consumer's outcomes, lag, pause and broker error (receiver/kafka.KafkaStatus);
- ``serving-<pid>``: a read process that has started serving (written once): until each
  read process in the table has, ``/readyz`` answers 503 (its reads would wait).

The receiver reads them through ``RemoteRetention`` and ``RemoteKafka``, which answer as
the in-process ``RetentionLoop`` and ``KafkaConsumer`` do, so web/health.py and
web/metrics.py serve either. The database's own figures (backlog, projection lag) need
no board: every process reads them from the database.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from embrasure.lifecycle.retention import PassReport, RetentionState

if TYPE_CHECKING:  # librdkafka loads only in a process that consumes
    from embrasure.receiver.kafka import KafkaStatus

STATUS_DIR_ENV = "EMBRASURE_STATUS_DIR"
PUBLISH_SECONDS = 1.0


class RetentionView(Protocol):
    """What the passes did (None: no retention runs)."""

    def snapshot(self) -> RetentionState | None: ...


class KafkaView(Protocol):
    """The consumer's status (None: no consumer runs)."""

    @property
    def status(self) -> KafkaStatus | None: ...


class StatusBoard:
    """The directory of documents; any process may publish and read."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def from_environment(cls) -> StatusBoard | None:
        """The board of the supervisor that started this process, or None (a process
        started alone: ``serve --single-process``, ``project``, ``consume``)."""
        path = os.environ.get(STATUS_DIR_ENV)
        return cls(Path(path)) if path else None

    def publish(self, name: str, doc: dict[str, Any]) -> None:
        path = self.directory / f"{name}.json"
        scratch = path.with_name(f".{name}.{os.getpid()}.tmp")
        scratch.write_bytes(orjson.dumps({**doc, "published_at": time.time()}))
        os.replace(scratch, path)  # atomic on POSIX: readers see a whole document

    def read(self, name: str) -> dict[str, Any] | None:
        try:
            doc: dict[str, Any] = orjson.loads((self.directory / f"{name}.json").read_bytes())
        except FileNotFoundError:
            return None
        return doc

    def runs(self, process: str) -> bool:
        """Whether the supervisor runs ``process`` (its table lists it)."""
        return process in (self.read("processes") or {})


class Publisher:
    """A thread publishing ``snapshot()`` under ``name`` every PUBLISH_SECONDS, and
    once more when stopped (so the last figures outlive the process)."""

    def __init__(
        self, board: StatusBoard, name: str, snapshot: Callable[[], dict[str, Any]]
    ) -> None:
        self.board = board
        self.name = name
        self.snapshot = snapshot
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"embrasure-{name}-status")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.board.publish(self.name, self.snapshot())
            if self._stop.wait(PUBLISH_SECONDS):
                self.board.publish(self.name, self.snapshot())
                return


# -- retention ----------------------------------------------------------------------------


def retention_doc(state: RetentionState) -> dict[str, Any]:
    return dataclasses.asdict(state)


class RemoteRetention:
    """The retention process's passes, as RetentionLoop.snapshot() answers them."""

    def __init__(self, board: StatusBoard) -> None:
        self.board = board

    def snapshot(self) -> RetentionState | None:
        if not self.board.runs("retention"):
            return None
        doc = self.board.read("retention")
        if doc is None:  # nothing reported yet
            return RetentionState()
        last = doc.get("last")
        fields = {f.name for f in dataclasses.fields(RetentionState)}
        state = RetentionState(**{k: v for k, v in doc.items() if k in fields and k != "last"})
        state.last = PassReport(**last) if last is not None else None
        return state


# -- kafka ---------------------------------------------------------------------------------


def kafka_doc(status: KafkaStatus) -> dict[str, Any]:
    return {
        "outcomes": dict(status.outcomes),
        "lag": [[topic, partition, behind] for (topic, partition), behind in status.lag.items()],
        "broker_error": status.broker_error,
        "paused": status.paused,
        "committed_batches": status.committed_batches,
    }


class RemoteKafka:
    """The consumer process's status, as KafkaConsumer.status answers it."""

    def __init__(self, board: StatusBoard) -> None:
        self.board = board

    @property
    def status(self) -> KafkaStatus | None:
        from embrasure.receiver.kafka import KafkaStatus

        if not self.board.runs("kafka"):
            return None
        doc = self.board.read("kafka")
        if doc is None:  # the consumer has not reported yet
            return KafkaStatus(broker_error="the Kafka consumer process has not started yet")
        return KafkaStatus(
            outcomes=collections.Counter(doc["outcomes"]),
            lag={(topic, partition): behind for topic, partition, behind in doc["lag"]},
            broker_error=doc["broker_error"],
            paused=doc["paused"],
            committed_batches=doc["committed_batches"],
        )


# -- the processes ---------------------------------------------------------------------------


class Processes:
    """The supervisor's table, as /readyz and /metrics show it."""

    def __init__(self, board: StatusBoard) -> None:
        self.board = board

    def table(self) -> dict[str, dict[str, Any]]:
        doc = self.board.read("processes") or {}
        doc.pop("published_at", None)
        return doc

    def starting(self) -> list[str]:
        """The read processes not serving yet: a start takes a second or two, and many
        more at ``--read-nice`` on a busy machine, during which the reads forwarded to
        them wait."""
        return [
            name
            for name, row in self.table().items()
            if row.get("serves")
            and (row["pid"] is None or self.board.read(serving(row["pid"])) is None)
        ]


def serving(pid: int) -> str:
    """The document a read process publishes once it serves (``announce_serving``)."""
    return f"serving-{pid}"


def announce_serving(board: StatusBoard) -> None:
    board.publish(serving(os.getpid()), {})
