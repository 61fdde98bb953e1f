"""A real Apache Kafka broker for the tests and bench/kafka.py (issue 19): one KRaft node
(broker and controller in one process) on 127.0.0.1, run from its Maven Central jars.

``jars()`` resolves ``org.apache.kafka:kafka_2.13`` with its runtime dependencies through
Maven into a cache (once: ``~/.cache/embrasure/kafka-<version>``, or
``$EMBRASURE_KAFKA_CACHE``); ``Broker`` writes a config into a fresh directory, formats
its storage and starts the broker, and ``stop``/``kill`` end it. No mock broker: the
consumer is tested against what large fleets run (docs/producers/kafka.md).

Run by hand: ``python tests/kafka_broker.py`` fetches the jars and starts a broker on a
free port until Ctrl-C.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from maven_cache import mvn, resolving

KAFKA_VERSION = "4.4.0"  # KRaft only since 4.0; the newest Maven Central serves here
CACHE = (
    Path(os.environ.get("EMBRASURE_KAFKA_CACHE", Path.home() / ".cache" / "embrasure"))
    / f"kafka-{KAFKA_VERSION}"
)

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>embrasure.tests</groupId><artifactId>kafka-broker</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId>
      <version>2.24.3</version>
    </dependency>
    <dependency>  <!-- kafka's own pull gives 1.7, which log4j-slf4j2-impl cannot bind -->
      <groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>2.0.17</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId>
      <version>2.24.3</version>
    </dependency>
  </dependencies>
</project>
"""

# The broker's own log goes to a file beside its data, at WARN (its INFO is ~1 MB a run).
_LOG4J2 = """appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d %p %c{{1}}: %m%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
"""


class KafkaUnavailable(RuntimeError):
    """Java or Maven is missing, or the jars could not be resolved: the cause, one line."""


def jars() -> Path:
    """The folder of the broker's jars, resolved through Maven on first use."""
    lib = CACHE / "lib"
    if (CACHE / "complete").exists():
        return lib
    for tool in ("mvn", "java"):
        if shutil.which(tool) is None:
            raise KafkaUnavailable(f"{tool} is not on PATH: the Kafka broker needs it")
    with resolving(CACHE):
        if (CACHE / "complete").exists():
            return lib
        (CACHE / "pom.xml").write_text(_POM.format(version=KAFKA_VERSION))
        failed = mvn(CACHE, "dependency:copy-dependencies", "-DincludeScope=runtime",
                     f"-DoutputDirectory={lib}")  # fmt: skip
        if failed:
            raise KafkaUnavailable(f"mvn could not resolve kafka_2.13 {KAFKA_VERSION}: {failed}")
        (CACHE / "complete").touch()
    return lib


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cluster_id() -> str:
    """A random KRaft cluster id. One that begins with ``-`` reads as a flag to
    kafka-storage's argument parser ("--cluster-id/-t: expected one argument", one id in
    64), which is why Kafka's own ``Uuid.randomUuid`` draws again on such an id."""
    while True:
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster.startswith("-"):
            return cluster


class Broker:
    """One KRaft node in ``work``: ``bootstrap`` is its client address."""

    def __init__(self, work: Path, partitions: int = 4) -> None:
        self.work = work
        self.port, self.controller_port = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.partitions = partitions
        self.proc: subprocess.Popen[bytes] | None = None
        self.config = work / "server.properties"
        self.log_path = work / "broker.log"

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            "java", "-Xms256m", "-Xmx512m", "-XX:+UseSerialGC",
            f"-Dlog4j2.configurationFile={self.work / 'log4j2.properties'}",
            "-cp", f"{jars()}/*", main, *args,
        ]  # fmt: skip

    def format(self) -> None:
        """Write the config and format the storage (once per ``work``)."""
        self.work.mkdir(parents=True, exist_ok=True)
        (self.work / "log4j2.properties").write_text(_LOG4J2.format(path=self.log_path))
        self.config.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port},"
                    f"CONTROLLER://127.0.0.1:{self.controller_port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    f"log.dirs={self.work / 'data'}",
                    f"num.partitions={self.partitions}",
                    # One node: every internal topic has one replica, and a consumer
                    # group forms at once instead of after the default 3 s delay.
                    "offsets.topic.replication.factor=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "auto.create.topics.enable=true",
                    # Room for a message of the receiver's 8 MiB body bound (the default
                    # is 1 MiB), so a test can send an oversized or deeply nested one.
                    "message.max.bytes=10485760",
                ]
            )
            + "\n"
        )
        cluster = _cluster_id()
        done = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(self.config)),
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise KafkaUnavailable(f"kafka storage format failed: {done.stderr.strip()[-300:]}")

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the broker (formatting first on a new ``work``) and wait until it takes
        connections."""
        if not self.config.exists():
            self.format()
        with (self.work / "broker.out").open("ab") as out:  # the child keeps its own
            self.proc = subprocess.Popen(
                self._java("kafka.Kafka", str(self.config)), stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise KafkaUnavailable(f"the broker exited with {self.proc.returncode}: "
                                       f"see {self.work / 'broker.out'}")  # fmt: skip
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                if self._ready():
                    return
            time.sleep(0.2)
        self.kill()
        raise KafkaUnavailable(f"the broker did not answer within {timeout_s:.0f} s")

    def _ready(self) -> bool:
        """The broker answers metadata requests (a listening socket comes earlier)."""
        from confluent_kafka.admin import AdminClient

        try:
            AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=2)
        except Exception:
            return False
        return True

    def create_topic(self, name: str, partitions: int | None = None) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(name, partitions or self.partitions, 1)])
        for future in futures.values():
            future.result(timeout=30)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), as an operator's restart."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


if __name__ == "__main__":
    import tempfile

    broker = Broker(Path(tempfile.mkdtemp(prefix="embrasure-kafka-")))
    try:
        broker.start()
    except KafkaUnavailable as exc:
        sys.exit(f"kafka_broker: {exc}")
    print(f"Kafka {KAFKA_VERSION} on {broker.bootstrap} (data in {broker.work}); Ctrl-C stops it")
    try:
        assert broker.proc is not None
        broker.proc.wait()
    except KeyboardInterrupt:
        broker.stop()
