"""A bounded Flink SQL job, run by tests/flink_agent.py with the Flink venv's Python
(apache-flink from PyPI pins py4j 0.10.9.7, pyspark 4.0.5 py4j 0.10.9.9: they cannot share
a venv). Not a pytest module: ``python tests/flink_job.py WORK`` with the OpenLineage
settings already in the Flink configuration (FLINK_CONF_DIR) and the agent jar in
Flink's lib folder (FLINK_LIB_DIR), as a Flink installation would have them.

Two jobs, one after the other, in batch mode: ``datagen`` (100 rows) → CSV files, then
those CSV files → a filtered, computed copy.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyflink.table import EnvironmentSettings, TableEnvironment


def main(work: Path) -> None:
    env = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
    env.get_config().set("parallelism.default", "1")
    generated, copied = work / "generated", work / "copied"
    env.execute_sql(
        "CREATE TABLE orders (order_id BIGINT, amount DOUBLE, status STRING) WITH ("
        "'connector' = 'datagen', 'number-of-rows' = '100',"
        "'fields.order_id.kind' = 'sequence', 'fields.order_id.start' = '1',"
        "'fields.order_id.end' = '100', 'fields.amount.min' = '1', 'fields.amount.max' = '500',"
        "'fields.status.length' = '6')"
    )
    for name, path in (("generated_orders", generated), ("large_orders", copied)):
        env.execute_sql(
            f"CREATE TABLE {name} (order_id BIGINT, amount DOUBLE, status STRING) WITH ("
            f"'connector' = 'filesystem', 'path' = 'file://{path}', 'format' = 'csv')"
        )
    env.execute_sql("INSERT INTO generated_orders SELECT * FROM orders").wait()
    env.execute_sql(
        "INSERT INTO large_orders SELECT order_id, amount * 2, upper(status) "
        "FROM generated_orders WHERE amount > 250"
    ).wait()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
