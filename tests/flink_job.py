"""Bounded Flink SQL jobs, run by tests/flink_agent.py with the Flink venv's Python
(apache-flink from PyPI pins py4j 0.10.9.7, pyspark 4.0.5 py4j 0.10.9.9: they cannot share
a venv). Not a pytest module: ``python tests/flink_job.py WORK SETTINGS`` where SETTINGS is
a JSON object of Flink configuration keys (the listener and the ``openlineage.*`` keys
among them), set on the TableEnvironment's own configuration: that is the configuration
PyFlink's local executor creates the job status listeners from (config.yaml's keys never
reach it; docs/producers/flink.md).

Three jobs, one after the other, in batch mode, each its own Flink job (``pipeline.name``):

1. ``generate_orders``: ``datagen`` (100 rows) → CSV files;
2. ``large_orders``: those CSV files → a filtered, computed copy (CSV);
3. ``failing_cast``: the CSV files → a table whose column is ``CAST('code-' || status AS
   INT)``, never a number: the cast fails at run time (a NumberFormatException) and so
   does the job.

Prints ``FAILED: <the cause>`` for the third job's error, as Python saw it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyflink.common import Configuration
from pyflink.table import EnvironmentSettings, TableEnvironment

COLUMNS = "order_id BIGINT, amount DOUBLE, status STRING"


def environment(settings: dict[str, str]) -> TableEnvironment:
    conf = Configuration()
    for key, value in settings.items():
        conf.set_string(key, value)
    built = EnvironmentSettings.new_instance().in_batch_mode().with_configuration(conf).build()
    return TableEnvironment.create(built)


def files(env: TableEnvironment, name: str, path: Path, columns: str = COLUMNS) -> None:
    env.execute_sql(
        f"CREATE TABLE {name} ({columns}) WITH ("
        f"'connector' = 'filesystem', 'path' = 'file://{path}', 'format' = 'csv')"
    )


def run(env: TableEnvironment, name: str, sql: str) -> None:
    env.get_config().set("pipeline.name", name)  # the Flink job's name: the agent's job name
    env.execute_sql(sql).wait()


def main(work: Path, settings: dict[str, str]) -> None:
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


if __name__ == "__main__":
    main(Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text()))
