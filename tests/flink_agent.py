"""A real Flink job with the real openlineage-flink agent, reporting to a live Embrasure
server (issue 20; docs/producers/flink.md).

Flink is apache-flink from PyPI (PyFlink, which carries Flink's jars), in a venv of its
own: it pins py4j 0.10.9.7 where pyspark 4.0.5 pins 0.10.9.9, so the two cannot share
the project's. ``scripts/test`` makes it, ``.venv-flink`` (or ``$EMBRASURE_FLINK_PYTHON``
names its Python). ``run`` installs the agent as a Flink installation would: a lib folder
holding PyFlink's jars and the agent jar (``FLINK_LIB_DIR``), and a configuration folder
whose ``config.yaml`` is PyFlink's with the listener and the OpenLineage settings added
(``FLINK_CONF_DIR``); then tests/flink_job.py runs in that Python.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import openlineage_agents

FLINK_VERSION = "2.0.2"  # openlineage-flink 1.53.0's Flink 2 listener is built on 2.0
ROOT = Path(__file__).resolve().parents[1]
JOB = Path(__file__).resolve().parent / "flink_job.py"
NAMESPACE = "flink-embrasure"
PROVIDER_KEY = "flink-agent"
FACTORY = "io.openlineage.flink.listener.OpenLineageJobStatusChangedListenerFactory"


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


def transport(urls: dict[str, str]) -> dict[str, str]:
    """The agent's transport to these servers (name → base URL): one, ``http``; several,
    ``composite`` of one ``http`` each (as tests/spark_agent.py does)."""

    def http(prefix: str, url: str) -> dict[str, str]:
        return {
            f"{prefix}.type": "http",
            f"{prefix}.url": url,
            f"{prefix}.endpoint": "/api/v1/lineage",
            f"{prefix}.urlParams.provider_key": PROVIDER_KEY,
        }

    base = "openlineage.transport"
    if len(urls) == 1:
        return http(base, next(iter(urls.values())))
    out = {f"{base}.type": "composite", f"{base}.continueOnFailure": "false",
           f"{base}.withThreadPool": "false"}  # fmt: skip
    for name, url in urls.items():
        out.update(http(f"{base}.transports.{name}", url))
    return out


def settings(urls: dict[str, str]) -> dict[str, str]:
    """What config.yaml gains: the listener, and the agent's settings."""
    return {
        "execution.job-status-changed-listeners": FACTORY,
        "execution.attached": "true",  # the listener hears the job end
        **transport(urls),
        "openlineage.job.namespace": NAMESPACE,
    }


@dataclass(frozen=True)
class FlinkRun:
    returncode: int
    output: str  # the job's stdout and stderr
    work: Path


def run(urls: dict[str, str], work: Path, timeout: float = 300.0) -> FlinkRun:
    python = flink_python()
    home = flink_home(python)
    try:
        jar = openlineage_agents.agent_jar("flink")
    except openlineage_agents.AgentUnavailable as exc:
        raise FlinkUnavailable(str(exc)) from None
    lib, conf = work / "flink-lib", work / "flink-conf"
    lib.mkdir(parents=True)
    for item in [*(home / "lib").glob("*.jar"), jar]:
        (lib / item.name).symlink_to(item)
    shutil.copytree(home / "conf", conf)
    with (conf / "config.yaml").open("a") as out:
        out.write("\n# tests/flink_agent.py: openlineage-flink\n")
        out.writelines(f"{key}: {value}\n" for key, value in settings(urls).items())
    env = {**os.environ, "FLINK_LIB_DIR": str(lib), "FLINK_CONF_DIR": str(conf)}
    done = subprocess.run(
        [str(python), str(JOB), str(work / "data")],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    return FlinkRun(done.returncode, done.stdout + done.stderr, work)
