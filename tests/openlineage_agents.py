"""The OpenLineage JVM agents from Maven Central, for the live producer tests (issue 20).

``agent_jar("spark")`` resolves ``io.openlineage:openlineage-spark_2.13`` (and
``agent_jar("flink")`` ``io.openlineage:openlineage-flink``) through Maven into a cache,
once: ``~/.cache/embrasure/openlineage-<agent>-<version>/`` (or under
``$EMBRASURE_AGENT_CACHE``), as tests/kafka_broker.py does for Kafka's jars. Both agent
jars are shaded (their poms declare no dependencies), so one jar each is the whole agent;
Spark and Flink themselves come from PyPI (pyspark, apache-flink).

The version: 1.53.0, the newest Maven Central serves of either (its
``maven-metadata.xml`` names 1.53.0 latest; 1.54.0, openlineage-python's version pinned
in pyproject, answers 404 for both jars on 2026-12-01).

Run by hand: ``python tests/openlineage_agents.py [spark|flink…]`` resolves them and
prints each jar's path.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from maven_cache import mvn, resolving

AGENT_VERSION = "1.53.0"
ARTIFACTS = {
    "spark": "io.openlineage:openlineage-spark_2.13",  # Scala 2.13: what pyspark 4 runs on
    "flink": "io.openlineage:openlineage-flink",
}
CACHE = Path(os.environ.get("EMBRASURE_AGENT_CACHE", Path.home() / ".cache" / "embrasure"))
# The plugin's own version, named: Debian's Maven 3.8 defaults to 2.8, whose `copy`
# cannot run outside a project.
_COPY = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy"


class AgentUnavailable(RuntimeError):
    """Java or Maven is missing, or the jar could not be resolved: the cause, one line."""


def agent_jar(agent: str) -> Path:
    """The agent's jar, resolved through Maven on first use."""
    coordinates = ARTIFACTS[agent]
    artifact = coordinates.split(":")[1]
    folder = CACHE / f"openlineage-{agent}-{AGENT_VERSION}"
    jar = folder / f"{artifact}-{AGENT_VERSION}.jar"
    if jar.exists():
        return jar
    for tool in ("mvn", "java"):
        if shutil.which(tool) is None:
            raise AgentUnavailable(f"{tool} is not on PATH: the {agent} agent needs it")
    with resolving(folder):
        if jar.exists():
            return jar
        partial = folder / "partial"
        failed = mvn(folder, _COPY, f"-Dartifact={coordinates}:{AGENT_VERSION}",
                     f"-DoutputDirectory={partial}")  # fmt: skip
        if failed:
            raise AgentUnavailable(f"mvn could not resolve {coordinates}:{AGENT_VERSION}: {failed}")
        (partial / jar.name).replace(jar)  # whole, or absent: never a half-written jar
        shutil.rmtree(partial, ignore_errors=True)
    return jar


if __name__ == "__main__":
    try:
        for name in sys.argv[1:] or list(ARTIFACTS):
            print(agent_jar(name))
    except AgentUnavailable as exc:
        sys.exit(f"openlineage_agents: {exc}")
