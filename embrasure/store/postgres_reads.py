"""PostgreSQL: reads of the delivery log and the served graph generation.

The read queries are SQLiteReader's, unchanged: they are plain SQL that both dialects
run (the connection translates placeholders, postgres_conn.translate; the schema gives
PostgreSQL SQLite's ``instr`` and byte-order text, migrations.render). A query that
needs a different text on PostgreSQL is overridden here.
"""

from __future__ import annotations

from embrasure.store.sqlite_reads import SQLiteReader


class PostgresReader(SQLiteReader):
    """A read inside one REPEATABLE READ transaction (PostgresStore.reader)."""
