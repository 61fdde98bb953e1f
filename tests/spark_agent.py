"""Real Spark jobs with the real openlineage-spark agent, reporting to live Embrasure
servers (issue 20; docs/producers/spark.md).

``session`` starts one SparkSession in ``local[2]`` from pyspark (PyPI) with the agent jar
(tests/openlineage_agents.py, Maven Central) loaded as ``--jars`` does (``spark.jars``),
``spark.extraListeners`` set and the agent's HTTP transport pointed at each server given:
one server, the plain ``http`` transport; several (a SQLite one and a PostgreSQL one), the
Java client's ``composite`` transport of one ``http`` transport per server, so that one
session's jobs reach both backends (the transport each server sees is the same ``http``
transport, configured the same way). ``run_jobs`` runs the four jobs the issue names:

1. ``csv_to_parquet``: a CSV folder read with a schema, written as parquet;
2. ``totals_table``: that parquet joined to a second CSV, grouped and aggregated, written
   with ``saveAsTable`` (a ``spark_catalog`` table: the agent adds a TABLE symlink);
3. ``insert_select``: SQL ``INSERT INTO … SELECT`` with expressions and a filter, into a
   table made by ``CREATE TABLE``;
4. ``failing``: a write whose ``assert_true`` fails on one row: the query fails.

``python tests/spark_agent.py --record`` runs them against a server of its own and writes
what the agent sent, read back from ``GET /api/v1/events``, to
tests/data/producers/spark_agent_capture.jsonl (the fixture the replay tests use).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

import openlineage_agents

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PYSPARK_VERSION = "4.0.5"  # the newest 4.0.x: openlineage-spark 1.53.0 supports 3.x - 4.0
APP_NAME = "embrasure_agent_test"
NAMESPACE = "spark-embrasure"  # spark.openlineage.namespace: the jobs' namespace
PROVIDER_KEY = "spark-agent"
LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"

ORDERS_CSV = """order_id,customer_id,amount,status
1,10,120.5,shipped
2,10,35.0,cancelled
3,11,980.0,shipped
4,12,15.25,pending
5,11,1200.0,shipped
6,12,60.0,shipped
"""
CUSTOMERS_CSV = """customer_id,name,country
10,Ada,FR
11,Grace,US
12,Linus,FI
"""
ORDERS_SCHEMA = "order_id INT, customer_id INT, amount DOUBLE, status STRING"
CUSTOMERS_SCHEMA = "customer_id INT, name STRING, country STRING"
FAIL_MESSAGE = "amount over 1000"


class SparkUnavailable(RuntimeError):
    """pyspark, Java or the agent is missing: the cause, one line."""


@dataclass(frozen=True)
class Layout:
    """Where the jobs read and write, under one root folder: every dataset name the agent
    sends is one of these paths (namespace ``file``), or a table of the warehouse."""

    root: Path

    @property
    def raw_orders(self) -> str:
        return str(self.root / "raw" / "orders")

    @property
    def raw_customers(self) -> str:
        return str(self.root / "raw" / "customers")

    @property
    def lake_orders(self) -> str:
        return str(self.root / "lake" / "orders")

    @property
    def rejected(self) -> str:
        return str(self.root / "lake" / "rejected")

    @property
    def warehouse(self) -> str:
        return str(self.root / "warehouse")

    def table(self, name: str) -> str:
        """A spark_catalog table's location (its dataset name)."""
        return f"{self.warehouse}/{name}"


def transport_conf(urls: dict[str, str], copy: Path | None = None) -> dict[str, str]:
    """The agent's transport settings for these servers (name → base URL); with ``copy``,
    a ``file`` transport beside them writes every event there too, one a line, the bytes
    the agent sends (what ``record`` keeps: a server refuses some, see docs/producers/spark.md)."""

    def http(prefix: str, url: str) -> dict[str, str]:
        return {
            f"{prefix}.type": "http",
            f"{prefix}.url": url,
            f"{prefix}.endpoint": "/api/v1/lineage",
            f"{prefix}.urlParams.provider_key": PROVIDER_KEY,
            f"{prefix}.timeoutInMillis": "10000",
        }

    base = "spark.openlineage.transport"
    if len(urls) == 1 and copy is None:
        return http(base, next(iter(urls.values())))
    conf = {
        f"{base}.type": "composite",
        # A refusal by one server must not keep the event from the others (the agent
        # logs it, as it would with one server).
        f"{base}.continueOnFailure": "true",
        f"{base}.withThreadPool": "false",  # each event sent before the next is built
    }
    for name, url in urls.items():
        conf.update(http(f"{base}.transports.{name}", url))
    if copy is not None:
        conf.update({f"{base}.transports.copy.type": "file",
                     f"{base}.transports.copy.location": str(copy)})  # fmt: skip
    return conf


def spark_conf(urls: dict[str, str], layout: Layout, copy: Path | None = None) -> dict[str, str]:
    jar = openlineage_agents.agent_jar("spark")
    return {
        "spark.master": "local[2]",
        "spark.app.name": APP_NAME,
        "spark.jars": str(jar),  # what spark-submit --jars sets
        "spark.extraListeners": LISTENER,
        "spark.openlineage.namespace": NAMESPACE,
        **transport_conf(urls, copy),
        "spark.sql.warehouse.dir": layout.warehouse,
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.driver.memory": "1g",
        # The session's own scratch (and Derby's, should anything ask) under the root.
        "spark.local.dir": str(layout.root / "scratch"),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={layout.root / 'derby'}",
    }


def session(urls: dict[str, str], layout: Layout, copy: Path | None = None) -> SparkSession:
    """A new SparkSession reporting to ``urls``; SparkUnavailable says what is missing."""
    if shutil.which("java") is None:
        raise SparkUnavailable("java is not on PATH: Spark needs a JVM (Java 17)")
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SparkUnavailable(f"pyspark is not installed ({exc})") from None
    try:
        conf = spark_conf(urls, layout, copy)
    except openlineage_agents.AgentUnavailable as exc:
        raise SparkUnavailable(str(exc)) from None
    layout.root.mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _write_inputs(layout: Layout) -> None:
    for folder, text in ((layout.raw_orders, ORDERS_CSV), (layout.raw_customers, CUSTOMERS_CSV)):
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "part-00000.csv").write_text(text)


def run_jobs(spark: SparkSession, layout: Layout) -> str:
    """The four jobs, in order; returns the failing job's error text as Python saw it."""
    _write_inputs(layout)
    # 1. CSV → parquet.
    orders = spark.read.schema(ORDERS_SCHEMA).option("header", True).csv(layout.raw_orders)
    orders.write.mode("overwrite").parquet(layout.lake_orders)

    # 2. A join and an aggregation, written as a spark_catalog table.
    from pyspark.sql import functions as f

    lake = spark.read.parquet(layout.lake_orders)
    customers = spark.read.schema(CUSTOMERS_SCHEMA).option("header", True)
    people = customers.csv(layout.raw_customers)
    totals = (
        lake.join(people, "customer_id")
        .groupBy("country")
        .agg(f.sum("amount").alias("total_amount"), f.count("order_id").alias("order_count"))
    )
    totals.write.mode("overwrite").saveAsTable("customer_totals")

    # 3. SQL INSERT … SELECT with expressions, into a table made for it.
    lake.createOrReplaceTempView("orders")
    spark.sql(
        "CREATE TABLE order_facts (order_id INT, amount_eur DOUBLE, status_code STRING) "
        "USING parquet"
    )
    spark.sql(
        "INSERT INTO order_facts "
        "SELECT order_id, round(amount * 0.92, 2) AS amount_eur, upper(status) AS status_code "
        "FROM orders WHERE status <> 'cancelled'"
    )

    # 4. A job that fails: one amount is over 1000.
    # (assert_true's own type is VOID, which parquet refuses before any row is read.)
    failing = spark.sql(
        "SELECT order_id, coalesce(CAST(assert_true(amount < 1000, "
        f"'{FAIL_MESSAGE}') AS DOUBLE), amount) AS amount FROM orders"
    )
    try:
        failing.write.mode("overwrite").parquet(layout.rejected)
    except Exception as exc:  # py4j's Py4JJavaError, or pyspark's own error classes
        return str(exc)
    raise AssertionError("the failing job did not fail")


def wait_projected(url: str, timeout: float = 120.0) -> dict[str, Any]:
    """The server's overview once its projection backlog is empty."""
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=url, timeout=30) as http:
        while True:
            overview: dict[str, Any] = http.get("/api/v1/overview").json()
            if overview["backlog"]["deliveries"] == 0 or time.monotonic() > deadline:
                return overview
            time.sleep(0.1)


def served_events(url: str) -> list[dict[str, Any]]:
    """Every event the server stored, by eventTime (``GET /api/v1/events``, paged)."""
    out: list[dict[str, Any]] = []
    cursor: str | None = None
    with httpx.Client(base_url=url, timeout=30) as http:
        while True:
            params = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
            page = http.get("/api/v1/events", params=params).json()
            out.extend(e["event"] for e in page["events"])
            cursor = page["next_cursor"]
            if cursor is None:
                return out


@contextlib.contextmanager
def stopped_after(spark: SparkSession) -> Iterator[SparkSession]:
    """Stop the session on the way out: the agent sends the application's COMPLETE then."""
    try:
        yield spark
    finally:
        spark.stop()


CAPTURE_ROOT = Path("/tmp/embrasure-spark-capture")
CAPTURE = Path(__file__).resolve().parent / "data" / "producers" / "spark_agent_capture.jsonl"


def record() -> None:
    """Run the jobs against a server of this script's own and keep what the agent sent."""
    import orjson

    from conftest import ServerProcess

    shutil.rmtree(CAPTURE_ROOT, ignore_errors=True)
    layout = Layout(CAPTURE_ROOT)
    layout.root.mkdir(parents=True)
    server = ServerProcess(layout.root / "embrasure.db").start()
    copy = layout.root / "sent.jsonl"
    try:
        with stopped_after(session({"sqlite": server.url}, layout, copy)) as spark:
            error = run_jobs(spark, layout)
        overview = wait_projected(server.url)
        served = served_events(server.url)
    finally:
        server.stop()
    sent = copy.read_bytes().splitlines()
    CAPTURE.write_bytes(b"".join(line + b"\n" for line in sent))
    print(f"{len(sent)} events sent, {len(served)} stored; to {CAPTURE}; items {overview['items']}")
    assert {orjson.dumps(e) for e in served} <= {orjson.dumps(orjson.loads(s)) for s in sent}
    print(f"the failing job raised: {error.splitlines()[0][:200]}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    os.environ.setdefault("EMBRASURE_LOG_LEVEL", "warning")
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python tests/spark_agent.py --record")
    record()
