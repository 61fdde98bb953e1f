"""Bounded Flink SQL jobs, run by tests/flink_agent.py with the Flink venv's Python
(apache-flink from PyPI pins py4j 0.10.9.7, pyspark 4.0.5 py4j 0.10.9.9: they cannot share
a venv). Not a pytest module: ``python tests/flink_job.py WORK SETTINGS`` where SETTINGS is
a JSON object ``{"batch": {…}, "streaming": {…}}`` of Flink configuration keys (the
listener and the ``openlineage.*`` keys among them), set on each TableEnvironment's own
configuration: that is the configuration PyFlink's local executor creates the job status
listeners from (config.yaml's keys never reach it; docs/producers/flink.md).

Four jobs, one after the other, each its own Flink job (``pipeline.name``); three in batch
mode:

1. ``generate_orders``: ``datagen`` (100 rows) → CSV files;
2. ``large_orders``: those CSV files → a filtered, computed copy (CSV);
3. ``failing_cast``: the CSV files → a table whose column is ``CAST('code-' || status AS
   INT)``, never a number: the cast fails at run time (a NumberFormatException) and so
   does the job.

and one in streaming mode, with checkpoints every second:

4. ``stream_ticks``: an unbounded ``datagen`` (5 rows a second) → CSV files, cancelled
   after ``STREAM_SECONDS``.

Prints ``FAILED: <the cause>`` for the third job's error, as Python saw it, and
``CANCELLED: stream_ticks`` once the fourth is.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

from pyflink.common import Configuration
from pyflink.table import EnvironmentSettings, TableEnvironment

COLUMNS = "order_id BIGINT, amount DOUBLE, status STRING"
STREAM_SECONDS = 6.0  # the streaming job's life: several checkpoints, tracked each second


def environment(settings: dict[str, str], streaming: bool = False) -> TableEnvironment:
    conf = Configuration()
    for key, value in settings.items():
        conf.set_string(key, value)
    builder = EnvironmentSettings.new_instance()
    builder = builder.in_streaming_mode() if streaming else builder.in_batch_mode()
    return TableEnvironment.create(builder.with_configuration(conf).build())


def files(env: TableEnvironment, name: str, path: Path, columns: str = COLUMNS) -> None:
    env.execute_sql(
        f"CREATE TABLE {name} ({columns}) WITH ("
        f"'connector' = 'filesystem', 'path' = 'file://{path}', 'format' = 'csv')"
    )


def run(env: TableEnvironment, name: str, sql: str) -> None:
    env.get_config().set("pipeline.name", name)  # the Flink job's name: the agent's job name
    env.execute_sql(sql).wait()


def batch(work: Path, settings: dict[str, str]) -> None:
    env = environment(settings)
    env.execute_sql(
        f"CREATE TABLE orders ({COLUMNS}) WITH ("
        "'connector' = 'datagen', 'number-of-rows' = '100',"
        "'fields.order_id.kind' = 'sequence', 'fields.order_id.start' = '1',"
        "'fields.order_id.end' = '100', 'fields.amount.min' = '1', 'fields.amount.max' = '500',"
        "'fields.status.length' = '6')"
    )
    files(env, "generated_orders", work / "generated")
    files(env, "large_orders", work / "large")
    files(env, "status_codes", work / "codes", "order_id BIGINT, status_code INT")
    run(env, "generate_orders", "INSERT INTO generated_orders SELECT * FROM orders")
    run(
        env,
        "large_orders",
        "INSERT INTO large_orders SELECT order_id, amount * 2, upper(status) "
        "FROM generated_orders WHERE amount > 250",
    )
    try:
        run(
            env,
            "failing_cast",
            "INSERT INTO status_codes SELECT order_id, CAST('code-' || status AS INT) "
            "FROM generated_orders",
        )
    except Exception as exc:  # py4j's Py4JJavaError: the job failed
        lines = str(exc).strip().splitlines()
        cause = next((line for line in lines if "NumberFormatException" in line), lines[0])
        print("FAILED:", cause.strip()[:300])
    else:
        raise SystemExit("the failing job did not fail")


def streaming(work: Path, settings: dict[str, str]) -> None:
    env = environment(settings, streaming=True)
    env.execute_sql(
        "CREATE TABLE ticks (tick_id BIGINT, reading DOUBLE) WITH ("
        "'connector' = 'datagen', 'rows-per-second' = '5')"
    )
    files(env, "tick_files", work / "ticks", "tick_id BIGINT, reading DOUBLE")
    env.get_config().set("pipeline.name", "stream_ticks")
    result = env.execute_sql("INSERT INTO tick_files SELECT * FROM ticks")
    client = result.get_job_client()
    assert client is not None
    time.sleep(STREAM_SECONDS)
    client.cancel().result()
    with contextlib.suppress(Exception):  # how Python sees a cancelled job's end
        result.wait()
    print("CANCELLED: stream_ticks")


def main(work: Path, settings: dict[str, dict[str, str]]) -> None:
    batch(work, settings["batch"])
    streaming(work, settings["streaming"])


if __name__ == "__main__":
    main(Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text()))
