"""Real Flink jobs with the real openlineage-flink agent, reporting to live Embrasure
servers (issue 20; docs/producers/flink.md).

Flink is apache-flink from PyPI (PyFlink, which carries Flink's jars), in a venv of its
own: it pins py4j 0.10.9.7 where pyspark 4.0.5 pins 0.10.9.9, so the two cannot share
the project's. ``scripts/test`` makes it, ``.venv-flink`` (or ``$EMBRASURE_FLINK_PYTHON``
names its Python). ``run`` puts the agent jar (tests/openlineage_agents.py, Maven Central)
beside PyFlink's own jars in a lib folder of its own and runs tests/flink_job.py in that
Python with the Flink configuration of ``settings``: the listener factory, the agent's
``openlineage.*`` keys, a REST port, given to the job's TableEnvironment.

Three things make it work, each found by trying (docs/producers/flink.md says what was
seen without them):

- ``FLINK_HOME`` set: without it PyFlink's ``_find_flink_home`` (pyflink/find_flink_home.py)
  overwrites ``FLINK_LIB_DIR`` with its own lib folder, and the agent jar is not on the
  gateway JVM's class path;
- the settings on the TableEnvironment's configuration, not in config.yaml: the local
  executor creates the listeners from the environment's configuration, which config.yaml's
  keys do not reach in PyFlink's local mode;
- ``openlineage.flink.enableDetachedJobTracking``: Flink 2.0 creates two listeners per job,
  one in the client (the job-created event, so the START) and one in the job manager (the
  status changes); the default listener's job-manager half has no job id and drops them
  (``JobId is not set, skipping event``); the detached one rebuilds the run id from the
  job's id and start time (Flink's REST API, hence ``rest.port``).

One server: the plain ``http`` transport; several (a SQLite one and a PostgreSQL one), the
Java client's ``composite`` of one ``http`` each, as tests/spark_agent.py does.
``python tests/flink_agent.py --record`` runs the jobs against a server of its own and
writes what the agent sent (its ``file`` transport's copy) to
tests/data/producers/flink_agent_capture.jsonl, the fixture the replay tests use.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import openlineage_agents

FLINK_VERSION = "2.0.2"  # openlineage-flink 1.53.0's Flink 2 listener is built on 2.0
ROOT = Path(__file__).resolve().parents[1]
JOB = Path(__file__).resolve().parent / "flink_job.py"
NAMESPACE = "flink-embrasure"
PROVIDER_KEY = "flink-agent"
FACTORY = "io.openlineage.flink.listener.OpenLineageJobStatusChangedListenerFactory"
# tests/flink_job.py's jobs, in order: three batch jobs, then a streaming one, cancelled.
JOBS = ("generate_orders", "large_orders", "failing_cast", "stream_ticks")
FAILING, STREAMING = "failing_cast", "stream_ticks"
# The tables, as the agent names them: Flink's catalog path, namespace "" (what Flink's
# planner gives tables whose connector has no lineage vertex of its own: datagen, files).
TABLE_NAMESPACE = ""
TABLES = {
    name: f"default_catalog.default_database.{name}"
    for name in ("orders", "generated_orders", "large_orders", "status_codes", "ticks",
                 "tick_files")
}  # fmt: skip
# What the streaming job adds: a checkpoint a second, and the agent's checkpoint tracker
# polling each second (60 by default) — each new count is a RUNNING event.
STREAMING_SETTINGS = {
    "execution.checkpointing.interval": "1s",
    "openlineage.trackingIntervalInSeconds": "1",
}


class FlinkUnavailable(RuntimeError):
    """The Flink venv, Java or the agent is missing: the cause, one line."""


def flink_python() -> Path:
    python = Path(os.environ.get("EMBRASURE_FLINK_PYTHON", ROOT / ".venv-flink" / "bin" / "python"))
    if not python.exists():
        raise FlinkUnavailable(f"no Flink venv ({python}): scripts/test makes .venv-flink")
    if shutil.which("java") is None:
        raise FlinkUnavailable("java is not on PATH: Flink needs a JVM")
    return python


def flink_home(python: Path) -> Path:
    done = subprocess.run(
        [str(python), "-c", "import pyflink, os; print(os.path.dirname(pyflink.__file__))"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise FlinkUnavailable(f"{python} has no pyflink: {done.stderr.strip()[-200:]}")
    return Path(done.stdout.strip())


def transport(urls: dict[str, str], copy: Path | None = None) -> dict[str, str]:
    """The agent's transport to these servers (name → base URL); with ``copy``, a ``file``
    transport beside them writes every event there too, one a line, as sent."""

    def http(prefix: str, url: str) -> dict[str, str]:
        return {
            f"{prefix}.type": "http",
            f"{prefix}.url": url,
            f"{prefix}.endpoint": "/api/v1/lineage",
            f"{prefix}.urlParams.provider_key": PROVIDER_KEY,
            f"{prefix}.timeoutInMillis": "10000",
        }

    base = "openlineage.transport"
    if len(urls) == 1 and copy is None:
        return http(base, next(iter(urls.values())))
    out = {
        f"{base}.type": "composite",
        f"{base}.continueOnFailure": "true",  # one server's refusal keeps no event from another
        f"{base}.withThreadPool": "false",
    }
    for name, url in urls.items():
        out.update(http(f"{base}.transports.{name}", url))
    if copy is not None:
        out.update({f"{base}.transports.copy.type": "file",
                    f"{base}.transports.copy.location": str(copy)})  # fmt: skip
    return out


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def settings(urls: dict[str, str], rest_port: int, copy: Path | None = None) -> dict[str, str]:
    """The Flink configuration the jobs run with: the listener, the agent's settings."""
    return {
        "execution.job-status-changed-listeners": FACTORY,
        "openlineage.flink.enableDetachedJobTracking": "true",
        "openlineage.job.namespace": NAMESPACE,
        **transport(urls, copy),
        # The job manager's REST API, which the detached listener reads the job's start
        # time from: a port of its own (Flink's mini cluster picks a random one otherwise,
        # and the listener would look at 8081).
        "rest.address": "localhost",
        "rest.port": str(rest_port),
        "parallelism.default": "1",
        "restart-strategy.type": "none",  # the failing job fails at once
    }


@dataclass(frozen=True)
class FlinkRun:
    returncode: int
    output: str  # the job script's stdout and stderr
    log: str  # Flink's own log (the gateway JVM's)

    @property
    def failure(self) -> str:
        """What the failing job raised in Python (``FAILED: …``), or ""."""
        lines = [line for line in self.output.splitlines() if line.startswith("FAILED:")]
        return lines[0] if lines else ""


def run(
    urls: dict[str, str], work: Path, copy: Path | None = None, timeout: float = 300.0
) -> FlinkRun:
    python = flink_python()
    home = flink_home(python)
    try:
        jar = openlineage_agents.agent_jar("flink")
    except openlineage_agents.AgentUnavailable as exc:
        raise FlinkUnavailable(str(exc)) from None
    lib, logs = work / "flink-lib", work / "flink-log"
    lib.mkdir(parents=True)
    logs.mkdir()
    for item in [*(home / "lib").glob("*.jar"), jar]:
        (lib / item.name).symlink_to(item)
    config = work / "flink-settings.json"
    base = settings(urls, free_port(), copy)
    both = {"batch": base, "streaming": {**base, **STREAMING_SETTINGS}}
    config.write_text(json.dumps(both, indent=1))
    env = {
        **os.environ,
        "FLINK_HOME": str(home),  # else PyFlink replaces FLINK_LIB_DIR with its own lib
        "FLINK_LIB_DIR": str(lib),
        "FLINK_LOG_DIR": str(logs),
    }
    done = subprocess.run(
        [str(python), str(JOB), str(work / "data"), str(config)],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    log = "\n".join(p.read_text(errors="replace") for p in sorted(logs.glob("*.log")))
    return FlinkRun(done.returncode, done.stdout + done.stderr, log)


CAPTURE_ROOT = Path("/tmp/embrasure-flink-capture")
CAPTURE = Path(__file__).resolve().parent / "data" / "producers" / "flink_agent_capture.jsonl"


def record() -> None:
    """Run the jobs against a server of this script's own and keep what the agent sent."""
    import orjson

    import spark_agent
    from conftest import ServerProcess

    shutil.rmtree(CAPTURE_ROOT, ignore_errors=True)
    CAPTURE_ROOT.mkdir(parents=True)
    server = ServerProcess(CAPTURE_ROOT / "embrasure.db").start()
    copy = CAPTURE_ROOT / "sent.jsonl"
    try:
        flink = run({"sqlite": server.url}, CAPTURE_ROOT, copy)
        overview = spark_agent.wait_projected(server.url)
        served = spark_agent.served_events(server.url)
    finally:
        server.stop()
    assert flink.returncode == 0, flink.output[-3000:]
    sent = copy.read_bytes().splitlines()
    CAPTURE.write_bytes(b"".join(line + b"\n" for line in sent))
    print(f"{len(sent)} events sent, {len(served)} stored; to {CAPTURE}; items {overview['items']}")
    assert {orjson.dumps(e) for e in served} <= {orjson.dumps(orjson.loads(s)) for s in sent}
    print(f"the failing job raised: {flink.failure}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    os.environ.setdefault("EMBRASURE_LOG_LEVEL", "warning")
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python tests/flink_agent.py --record")
    record()
