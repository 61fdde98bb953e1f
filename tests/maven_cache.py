"""Maven into a cache folder, for the JVM pieces the tests run for real (the Kafka broker,
tests/kafka_broker.py; the OpenLineage agents, tests/openlineage_agents.py)."""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def resolving(folder: Path) -> Iterator[None]:
    """Held while ``folder`` is filled: the suite's workers (pytest-xdist) resolve once."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "resolve.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def mvn(folder: Path, *args: str) -> str | None:
    """Run ``mvn -q -B args`` in ``folder``: None, or its last lines when it failed."""
    done = subprocess.run(
        ["mvn", "-q", "-B", *args], cwd=folder, capture_output=True, text=True, check=False
    )
    if done.returncode == 0:
        return None
    return " / ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
