"""Marquez's server built from its source with Maven, where Maven Central lacks it.

The Maven Central reached from this workplace answers 404 for every version of
``io.github.marquezproject:marquez-api`` (checked 2026-12-01: the artifact's
maven-metadata.xml is not there), while every library Marquez depends on is. So
bench/peers/marquez_server.py falls back to this: the two modules the server is made of
(``api`` and ``clients/java``, and the repository's ``lombok.config``) are taken from a
Marquez checkout at the release's tag (``git archive``), and compiled by a generated pom
that names the same dependencies at the same versions as Marquez's Gradle build of that
tag (``build.gradle``, ``api/build.gradle``, ``clients/java/build.gradle``), with the same
compiler settings (release 17, ``-parameters``: Dropwizard binds the configuration to
constructor parameters by name; Lombok as annotation processor). Nothing of Marquez is
kept in this repository: the checkout is the caller's (``--marquez-source`` or
``EMBRASURE_MARQUEZ_SOURCE``, a clone of github.com/MarquezProject/marquez).
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from pathlib import Path

# Marquez 0.50.0's runtime dependencies, as its Gradle files at that tag pin them.
DEPENDENCIES = {
    "0.50.0": [
        *(
            ("io.dropwizard", f"dropwizard-{m}", "2.1.12")
            for m in ("core", "jdbi3", "json-logging", "http2", "assets", "jackson")
        ),
        *(
            ("io.prometheus", m, "0.16.0")
            for m in ("simpleclient", "simpleclient_dropwizard", "simpleclient_hotspot")
        ),
        ("io.prometheus", "simpleclient_servlet", "0.16.0"),
        ("io.openlineage", "openlineage-java", "1.13.1"),
        *(("org.jdbi", f"jdbi3-{m}", "3.40.0") for m in ("core", "jackson2", "postgres")),
        ("org.jdbi", "jdbi3-sqlobject", "3.40.0"),
        ("com.google.guava", "guava", "32.1.3-jre"),
        ("org.dhatim", "dropwizard-sentry", "2.1.6"),
        ("io.sentry", "sentry", "6.34.0"),
        ("org.flywaydb", "flyway-core", "8.5.13"),
        ("org.postgresql", "postgresql", "42.6.0"),
        ("com.graphql-java", "graphql-java", "20.9"),
        ("com.graphql-java-kickstart", "graphql-java-servlet", "12.0.0"),
        ("org.opensearch.client", "opensearch-rest-client", "2.15.0"),
        ("org.opensearch.client", "opensearch-java", "2.6.0"),
        ("org.slf4j", "slf4j-api", "1.7.36"),  # clients/java
        ("org.apache.commons", "commons-lang3", "3.14.0"),
        ("org.apache.httpcomponents", "httpclient", "4.5.14"),
    ]
}
LOMBOK = {"0.50.0": "1.18.34"}
PARTS = ("api/src/main", "clients/java/src/main", "lombok.config")

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.embrasure.bench</groupId>
  <artifactId>marquez-from-source</artifactId>
  <version>{version}</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
{dependencies}
    <dependency>
      <groupId>org.projectlombok</groupId><artifactId>lombok</artifactId>
      <version>{lombok}</version><scope>provided</scope>
    </dependency>
  </dependencies>
  <build>
    <sourceDirectory>src/api/src/main/java</sourceDirectory>
    <resources>
      <resource><directory>src/api/src/main/resources</directory></resource>
      <resource><directory>src/clients/java/src/main/resources</directory></resource>
    </resources>
    <plugins>
      <plugin>
        <groupId>org.codehaus.mojo</groupId>
        <artifactId>build-helper-maven-plugin</artifactId>
        <version>3.5.0</version>
        <executions>
          <execution>
            <id>marquez-java-client</id>
            <phase>generate-sources</phase>
            <goals><goal>add-source</goal></goals>
            <configuration>
              <sources><source>src/clients/java/src/main/java</source></sources>
            </configuration>
          </execution>
        </executions>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-compiler-plugin</artifactId>
        <version>3.13.0</version>
        <configuration>
          <compilerArgs><arg>-parameters</arg></compilerArgs>
          <annotationProcessorPaths>
            <path>
              <groupId>org.projectlombok</groupId><artifactId>lombok</artifactId>
              <version>{lombok}</version>
            </path>
          </annotationProcessorPaths>
        </configuration>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>3.6.1</version>
      </plugin>
    </plugins>
  </build>
</project>
"""


def known(version: str) -> bool:
    return version in DEPENDENCIES


def pom(version: str) -> str:
    lines = [
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in DEPENDENCIES[version]
    ]
    return POM.format(version=version, dependencies="\n".join(lines), lombok=LOMBOK[version])


def _export(source: Path, tag: str, dest: Path) -> str:
    """The parts of ``source`` (a git repository, bare or not) at ``tag`` into ``dest``;
    the tag's commit."""
    git = ["git", "-C", str(source)]
    found = subprocess.run([*git, "rev-parse", f"{tag}^{{commit}}"], capture_output=True, text=True)
    if found.returncode != 0:
        raise RuntimeError(f"{source} has no tag {tag}: {found.stderr.strip()}")
    archive = subprocess.run([*git, "archive", tag, *PARTS], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return found.stdout.strip()


def build(version: str, source: Path, lib: Path) -> str:
    """Compile Marquez ``version`` from ``source`` and put its jar and its runtime
    dependencies in ``lib``; returns where it came from, for the report."""
    work = lib.parent / "build"
    shutil.rmtree(work, ignore_errors=True)
    (work / "src").mkdir(parents=True)
    commit = _export(source, version, work / "src")
    (work / "pom.xml").write_text(pom(version))
    print(f"building Marquez {version} ({commit[:12]}) from {source} with Maven", flush=True)
    argv = ["mvn", "-q", "-B", "-f", str(work / "pom.xml"), "package", "-DskipTests"]
    argv += ["dependency:copy-dependencies", f"-DoutputDirectory={lib}", "-DincludeScope=runtime"]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"mvn failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr}")
    jar = work / "target" / f"marquez-from-source-{version}.jar"
    shutil.copy(jar, lib / f"marquez-api-{version}-from-source.jar")
    return f"built from source, tag {version} (commit {commit[:12]}), dependencies from Maven"
