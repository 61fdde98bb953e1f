"""Marquez, fetched with Maven (or built from its source) and started on a fresh
PostgreSQL database.

``python bench/peers/marquez_server.py check`` gets Marquez (``--version``, default
0.50.0) into ``~/.cache/embrasure/marquez-VERSION/lib`` (``EMBRASURE_MARQUEZ_CACHE`` names
another parent directory; once the jars are there nothing is fetched again), starts
``marquez.MarquezApp server`` on a new database of the local PostgreSQL
(``EMBRASURE_BENCH_PG``, as bench/backends.py), asks ``GET /api/v1/namespaces``, stops it
and drops the database. ``serve`` does the same and keeps it running until Ctrl-C;
``fetch`` only fetches. bench/peers/marquez.py imports ``marquez_database`` and
``start_marquez``.

Getting it: first a generated pom naming ``io.github.marquezproject:marquez-api`` and
``mvn -q dependency:copy-dependencies`` (Maven resolves the versions Marquez's published
pom pins). The Maven Central reached here has no marquez-api, so then, given a Marquez
git checkout (``--marquez-source DIR`` or ``EMBRASURE_MARQUEZ_SOURCE``), the server is
compiled from the release's tag with the dependencies of its own build
(bench/peers/marquez_build.py); ``ORIGIN`` in the cache says which it was. Needs ``mvn``
and Java 17 or later on PATH; without either, or without marquez-api and a checkout, it
says so in one line and exits 2 (nothing is installed here).

The configuration written (``marquez-PORT.yml`` beside the server's log) uses Marquez's
own keys for 0.50.0 (``MarquezConfig``): ``db`` (Dropwizard's DataSourceFactory),
``migrateOnStartup: true`` (the Flyway migrations create the schema on the empty
database), ``search.enabled: false`` (no OpenSearch here; with it on every POST would
also index the event), ``graphql.enabled: false``; loopback ports; the request log off
and the log level WARN, as Embrasure runs in the benches (``--log-level warning``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

import httpx

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR) not in sys.path:  # run as a script: bench/ holds the shared harness
    sys.path.insert(0, str(BENCH_DIR))

import servers  # noqa: E402

from peers import marquez_build  # noqa: E402

VERSION = "0.50.0"
GROUP, ARTIFACT = "io.github.marquezproject", "marquez-api"
MAIN_CLASS = "marquez.MarquezApp"
JAVA_MAJOR = 17  # Marquez 0.50.0 is built for Java 17 (sourceCompatibility)
# Dropwizard's pool defaults to 100 connections; the shared PostgreSQL here allows 100 in
# all, and other processes use it. 32 is more than the 64-connection ingest keeps busy on
# 2 cores (Embrasure's pool is 10 by default).
DB_POOL = 32
START_TIMEOUT_S = 240.0  # a fresh database runs every Flyway migration first
SOURCE_HELP = "a Marquez git checkout, built where Maven Central lacks marquez-api"
COMPLETE_MARK = ".complete"  # written last: a fetch cut short is fetched again

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.embrasure.bench</groupId>
  <artifactId>marquez-classpath</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <!-- pinned: the super-POM's default version depends on the Maven installed -->
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>3.6.1</version>
      </plugin>
    </plugins>
  </build>
</project>
"""

CONFIG = """server:
  applicationConnectors:
    - type: http
      bindHost: 127.0.0.1
      port: {port}
      httpCompliance: RFC7230_LEGACY
  adminConnectors:
    - type: http
      bindHost: 127.0.0.1
      port: {admin_port}
  requestLog:
    appenders: []
db:
  driverClass: org.postgresql.Driver
  url: {jdbc_url}
  user: {user}
  password: "{password}"
  maxSize: {pool}
migrateOnStartup: true
graphql:
  enabled: false
search:
  enabled: false
logging:
  level: WARN
  appenders:
    - type: console
"""


def missing(line: str) -> NoReturn:
    """A tool the fetch or the server needs is absent: one line, exit status 2."""
    print(line, file=sys.stderr, flush=True)
    raise SystemExit(2)


def require_mvn() -> None:
    if shutil.which("mvn") is None:
        missing("marquez: mvn is not on PATH (it fetches marquez-api from Maven Central)")


def require_java() -> None:
    """A Java of at least JAVA_MAJOR on PATH, or exit 2 saying what was found."""
    if shutil.which("java") is None:
        missing(f"marquez: java is not on PATH (Marquez needs Java {JAVA_MAJOR})")
    shown = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    found = re.search(r'version "(\d+)', shown)
    if found is None or int(found.group(1)) < JAVA_MAJOR:
        first = shown.splitlines()[0] if shown else "no version"
        missing(f"marquez: Java {JAVA_MAJOR} or later is needed, found {first}")


def cache_dir(version: str = VERSION) -> Path:
    parent = os.environ.get("EMBRASURE_MARQUEZ_CACHE")
    base = Path(parent) if parent else Path.home() / ".cache" / "embrasure"
    return base / f"marquez-{version}"


def fetch(version: str = VERSION, source: Path | None = None) -> Path:
    """The directory of Marquez's jar and its runtime dependencies, made when absent:
    from Maven Central, or, where it lacks marquez-api, built from ``source`` (a Marquez
    git checkout; default EMBRASURE_MARQUEZ_SOURCE) by bench/peers/marquez_build.py."""
    lib = cache_dir(version) / "lib"
    if (lib / COMPLETE_MARK).exists():
        return lib
    require_mvn()
    require_java()
    shutil.rmtree(lib, ignore_errors=True)
    lib.mkdir(parents=True)
    origin = _from_central(version, lib)
    if origin is None:
        source = source or _source_from_env()
        if source is None or not marquez_build.known(version):
            missing(
                f"marquez: Maven Central here has no {GROUP}:{ARTIFACT}:{version}; build it"
                " from source: --marquez-source DIR (or EMBRASURE_MARQUEZ_SOURCE), a git"
                " clone of github.com/MarquezProject/marquez"
                + ("" if marquez_build.known(version) else f" (only {VERSION} is known)")
            )
        origin = marquez_build.build(version, source, lib)
    jars = sorted(p.name for p in lib.glob("*.jar"))
    (lib.parent / "ORIGIN").write_text(origin + "\n")
    (lib / COMPLETE_MARK).write_text("\n".join(jars) + "\n")
    return lib


def origin(version: str = VERSION) -> str:
    """Where the cached Marquez came from (Maven Central, or built from which commit)."""
    path = cache_dir(version) / "ORIGIN"
    return path.read_text().strip() if path.exists() else "unknown"


def _source_from_env() -> Path | None:
    value = os.environ.get("EMBRASURE_MARQUEZ_SOURCE")
    return Path(value) if value else None


def _from_central(version: str, lib: Path) -> str | None:
    """marquez-api and its dependencies into ``lib``; None when the registry has no such
    artifact (any other failure raises)."""
    pom = lib.parent / "pom.xml"
    pom.write_text(POM.format(group=GROUP, artifact=ARTIFACT, version=version))
    print(f"fetching {GROUP}:{ARTIFACT}:{version} and its dependencies into {lib}", flush=True)
    argv = ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies"]
    argv += [f"-DoutputDirectory={lib}", "-DincludeScope=runtime"]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        # Maven's words for a 404 (the second time, from its local record of the first).
        said = ("Could not find artifact", "Failure to find", "was not found in")
        named = f"{GROUP}:{ARTIFACT}:jar:{version}" in done.stdout
        if named and any(w in done.stdout for w in said):
            print(f"Maven Central has no {GROUP}:{ARTIFACT}:{version}", flush=True)
            return None
        raise RuntimeError(f"mvn failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    if not (lib / f"{ARTIFACT}-{version}.jar").exists():
        raise RuntimeError(f"mvn ran but {ARTIFACT}-{version}.jar is not in {lib}")
    return f"{GROUP}:{ARTIFACT}:{version} from Maven Central"


def jdbc_of(url: str) -> tuple[str, str, str]:
    """(JDBC URL, user, password) of a ``postgresql://user[:password]@host:port/db``."""
    parts = urlsplit(url)
    jdbc = f"jdbc:postgresql://{parts.hostname}:{parts.port or 5432}{parts.path}"
    return jdbc, parts.username or "postgres", parts.password or ""


@contextlib.contextmanager
def marquez_database(work: Path) -> Iterator[str]:
    """A new empty PostgreSQL database (bench/backends.py's), dropped afterwards."""
    import backends  # imports psycopg and the embrasure package: only when wanted

    with backends.database("postgresql", work) as url:
        yield url


def write_config(path: Path, db_url: str, port: int, admin_port: int) -> None:
    jdbc, user, password = jdbc_of(db_url)
    path.write_text(
        CONFIG.format(
            port=port,
            admin_port=admin_port,
            jdbc_url=jdbc,
            user=user,
            password=password,
            pool=DB_POOL,
        )
    )


def start_marquez(work: Path, db_url: str, version: str = VERSION) -> servers.Server:
    """``marquez.MarquezApp server`` on ``db_url`` (PostgreSQL), answering on a free
    loopback port once ``GET /api/v1/namespaces`` answers 200."""
    lib = fetch(version)
    require_java()
    port, admin_port = servers.free_port(), servers.free_port()
    config = work / f"marquez-{port}.yml"
    write_config(config, db_url, port, admin_port)
    log_path = work / f"marquez-{port}.log"
    argv = ["java", "-cp", f"{lib}/*", MAIN_CLASS, "server", str(config)]
    with open(log_path, "wb") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=work)
    server = servers.Server("marquez", proc, f"http://127.0.0.1:{port}", log_path)
    wait_answering(server, START_TIMEOUT_S)
    return server


def wait_answering(server: servers.Server, timeout_s: float) -> float:
    """Seconds until ``GET /api/v1/namespaces`` answers 200 (Marquez has no /healthz on
    its application port)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if server.proc.poll() is not None:
            raise RuntimeError(f"Marquez exited early:\n{server.log_path.read_text()[-4000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(server.url + "/api/v1/namespaces", timeout=2).status_code == 200:
                return time.monotonic() - started
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"Marquez did not answer:\n{server.log_path.read_text()[-4000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("fetch", "check", "serve"))
    parser.add_argument("--version", default=VERSION, help="marquez-api version")
    parser.add_argument("--work", type=Path, default=None, help="log and config directory")
    parser.add_argument("--marquez-source", type=Path, default=None, help=SOURCE_HELP)
    args = parser.parse_args(argv)
    lib = fetch(args.version, args.marquez_source)
    jars = len(list(lib.glob("*.jar")))
    print(f"Marquez {args.version} ({origin(args.version)}): {jars} jars in {lib}")
    if args.command == "fetch":
        return 0
    work = args.work or Path(os.environ.get("TMPDIR", "/tmp")) / "embrasure-marquez"
    work.mkdir(parents=True, exist_ok=True)
    with marquez_database(work) as db_url:
        started = time.monotonic()
        server = start_marquez(work, db_url, args.version)
        try:
            took = time.monotonic() - started
            answer = httpx.get(server.url + "/api/v1/namespaces", timeout=10)
            print(
                f"Marquez at {server.url} on {db_url} (started in {took:.1f} s; log "
                f"{server.log_path}): GET /api/v1/namespaces {answer.status_code} "
                f"{answer.text[:200]}",
                flush=True,
            )
            if args.command == "serve":
                with contextlib.suppress(KeyboardInterrupt):
                    server.proc.wait()
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
