"""Versioned schema migrations, one source for every dialect.

Each step is SQL written once with a few ``{tokens}`` for what the dialects spell
differently. The runner records applied versions in ``embrasure_schema``. It runs under a
lock held for the whole upgrade (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: an advisory
transaction lock), so several processes starting at once never race: the first upgrades,
the others wait and then find nothing to do.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from embrasure.errors import SchemaError
from embrasure.store import schema

# PostgreSQL: the storage parameters of a table retention deletes from all the time (run
# trims, body trims within a day's partition). Autovacuum visits a table once its dead
# rows pass 20% of it by default, and until a visit the space of deleted rows is not
# reused, so the table grows by a fifth between visits: the PostgreSQL soak grew 4.9% per
# 10 minutes at a steady load, 1.4-2.4% at 1% (bench/README.md, the PostgreSQL soaks). At
# 1% a visit follows each minute's trims (autovacuum_naptime).
# https://www.postgresql.org/docs/current/routine-vacuuming.html#AUTOVACUUM
CHURNED_PARAMETERS = "autovacuum_vacuum_scale_factor = 0.01"
CHURNED = f" WITH ({CHURNED_PARAMETERS})"
CHURNED_TABLES = ("runs", "run_io", "events", "shapes", "facet_sets", "facets", "facet_values")

DIALECT_TOKENS: dict[str, dict[str, str]] = {
    "sqlite": {
        "serial_pk": "INTEGER PRIMARY KEY AUTOINCREMENT",
        # An interned id (schema.py, names): the rowid itself, reused after a delete.
        "id_pk": "INTEGER PRIMARY KEY",
        "blob": "BLOB",
        "bigint": "INTEGER",
        "greatest": "max",
        "least": "min",
        # Tables with small rows and a composite or text key keep their rows in the key's
        # b-tree (one b-tree to search and write instead of two).
        "without_rowid": " WITHOUT ROWID",
        # The sorted union of two JSON arrays of strings (column edge subtypes), written
        # as the projector writes them (compact, like orjson).
        "union_json_arrays": "(SELECT json_group_array(value) FROM (SELECT value FROM"
        " json_each(subtypes) UNION SELECT value FROM json_each(excluded.subtypes)"
        " ORDER BY value))",
        "functions": "",
        "bodies_key": "seq",
        "bodies_partitions": "",
        "churned": "",
    },
    "postgresql": {
        "serial_pk": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        "id_pk": "INTEGER GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        "blob": "BYTEA",
        "bigint": "BIGINT",
        "greatest": "GREATEST",
        "least": "LEAST",
        "without_rowid": "",
        # The same text as SQLite's: to_json escapes a string as orjson does (short forms
        # for \b \f \n \r \t, \u00XX for other control characters, nothing else), and
        # string_agg joins without the space json_agg would put after each comma.
        "union_json_arrays": "(SELECT '[' || string_agg(to_json(v)::text, ','"
        ' ORDER BY v COLLATE "C")'
        " || ']' FROM (SELECT json_array_elements_text(subtypes::json)"
        " UNION SELECT json_array_elements_text(excluded.subtypes::json)) AS u(v))",
        # SQLite's instr(), so that the read queries are one text for both dialects
        # (lower case: its arguments take the caller's collation, see render).
        "functions": ";\nCREATE FUNCTION instr(haystack text, needle text) RETURNS integer"
        " LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT strpos(haystack, needle)'",
        # Bodies in a table partitioned by receipt time (a partition per UTC day, made
        # ahead by postgres.py): retention drops a day's partition rather than deleting
        # its rows one by one (docs/operations.md#retention-and-the-archive). The
        # partition key is part of every unique key; rows no day partition takes (a
        # clock far off, a day not made yet) land in the DEFAULT one.
        "bodies_key": "seq, received_at",
        "bodies_partitions": " PARTITION BY RANGE (received_at);\n"
        "CREATE TABLE delivery_bodies_default PARTITION OF delivery_bodies DEFAULT" + CHURNED,
        "churned": CHURNED,
    },
}


def render(sql: str, dialect: str, **extra: str) -> list[str]:
    """Schema SQL → the dialect's statements. On PostgreSQL every TEXT column compares
    and sorts in the "C" collation (by code point), as SQLite's BINARY does and as the
    projector sorts in Python: whatever the database's locale, keys, merge rules and
    listings order text the same way on both backends (and lower() folds ASCII only,
    as SQLite's does)."""
    text = sql.format(**DIALECT_TOKENS[dialect], **extra)
    if dialect == "postgresql":
        text = re.sub(r"\bTEXT\b", 'TEXT COLLATE "C"', text)
    return schema.split_statements(text)


@dataclasses.dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str
    # Graph tables added to the served generation, ``{g}`` its prefix: a new table the
    # next generations get from schema.GRAPH_TABLES, so no reprojection is needed.
    served_generation: str = ""
    # The dialects it applies to; the others record the version and change nothing.
    dialects: tuple[str, ...] = ("sqlite", "postgresql")
    # Done by the store itself, not by SQL (in its dialects): ``apply`` stops before it,
    # and the store records it with ``record`` once done.
    by_store: bool = False

    def statements(self, dialect: str) -> list[str]:
        return render(self.sql, dialect) if dialect in self.dialects else []

    def served_statements(self, dialect: str, prefix: str) -> list[str]:
        """``served_generation`` for the generation of ``prefix``: none on another
        dialect, as ``statements``."""
        return render(self.served_generation, dialect, g=prefix) if dialect in self.dialects else []


# The tables of the graph's own that are not a generation's (on SQLite they live in the
# graph's file: store/sqlite_files.py): which generation is served, the run horizon, the
# notifications outbox. Written once here for the migrations that made them and for a
# graph file made anew.
GRAPH_META = (
    """
        CREATE TABLE graph_meta (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            generation INTEGER NOT NULL,     -- the served generation of graph tables
            graph_version INTEGER NOT NULL   -- schema.GRAPH_VERSION it was built by
        );
        INSERT INTO graph_meta (id, generation, graph_version) VALUES (1, 1, """
    + str(schema.GRAPH_VERSION)
    + ");\n"
    + schema.GRAPH_TABLES.replace("{g}", schema.prefix(1))
    + ";\nINSERT INTO g1_position (id, seq) VALUES (1, 0)"
)
RUN_HORIZON = """
        -- Runs whose latest eventTime is before the horizon left the graph (--retain-runs,
        -- lifecycle/run_retention.py). Kept beside the log, not in a graph generation:
        -- a reprojection trims the runs the log brings back, and asOf before it is a 422.
        CREATE TABLE run_horizon (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            horizon_key TEXT NOT NULL,       -- an eventTime key (projector/times.py)
            set_at TEXT NOT NULL
        )
    """
OUTBOX = """
        -- The outbox: one row per (subscription, cause), inserted in the projection's
        -- transaction that saw the cause, so order, duplicates, several projectors and
        -- reprojection never make a second one (projector/causes.py).
        CREATE TABLE notifications (
            subscription_id TEXT NOT NULL,
            cause TEXT NOT NULL,             -- the cause's stable key
            notification_id TEXT NOT NULL UNIQUE,  -- webhook-id: receivers drop repeats
            kind TEXT NOT NULL,              -- check.failed, check.recovered
            body TEXT NOT NULL,              -- the JSON sent, less its delivery fields
            decided_at TEXT NOT NULL,
            state TEXT NOT NULL,             -- pending, sent, superseded, failed
            attempts INTEGER NOT NULL,
            next_at TEXT NOT NULL,           -- when to try (again)
            last_error TEXT,
            done_at TEXT,
            PRIMARY KEY (subscription_id, cause)
        );
        CREATE INDEX notifications_due ON notifications (state, next_at);
    """
GRAPH_OWN_TABLES = ("graph_meta", "run_horizon", "notifications")


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "delivery log",
        """
        CREATE TABLE deliveries (
            seq {serial_pk},                 -- log position: the projector's order
            delivery_id TEXT NOT NULL UNIQUE,
            provider_key TEXT NOT NULL,
            idempotency_key TEXT,
            dedupe_key TEXT NOT NULL,        -- 'key:'+Idempotency-Key or 'sha256:'+hash
            body_sha256 TEXT NOT NULL,
            received_at TEXT NOT NULL,       -- RFC 3339 UTC, microseconds
            route TEXT NOT NULL,             -- 'single' or 'batch'
            body {blob} NOT NULL,            -- the request body, byte for byte
            item_count INTEGER NOT NULL,
            invalid_item_count INTEGER NOT NULL,
            rejections TEXT NOT NULL,        -- JSON [[index, kind, reason], ...]
            state TEXT NOT NULL
        );
        CREATE UNIQUE INDEX deliveries_identity ON deliveries (provider_key, dedupe_key);
        CREATE INDEX deliveries_by_provider ON deliveries (provider_key, seq)
        {functions}
    """,
    ),
)

MIGRATIONS += (
    Migration(
        2,
        "projected graph, generation 1",
        GRAPH_META,
    ),
)

MIGRATIONS += (
    Migration(
        3,
        "bearer tokens; the backlog index",
        """
        -- The log past the projector's position, counted without reading the bodies:
        -- item_count follows the body in each row, so the table itself would be read
        -- through every body's overflow pages (receiver/backpressure.py, every second).
        CREATE INDEX deliveries_backlog
            ON deliveries (seq, item_count, invalid_item_count, received_at);
        CREATE TABLE tokens (
            token_id TEXT PRIMARY KEY,       -- public: the part of the token after emb_
            digest TEXT NOT NULL,            -- hex SHA-256 of the whole token; never the token
            scopes TEXT NOT NULL,            -- space-separated, as OAuth scopes (RFC 6749 §3.3)
            provider_key TEXT,               -- deliveries of this token carry it
            name TEXT NOT NULL,
            created_at TEXT NOT NULL,
            revoked_at TEXT
        );
    """,
    ),
)

MIGRATIONS += (
    Migration(
        4,
        "admin hide and unhide",
        "",
        # Empty in every existing graph: no log before this version holds an admin entry.
        # (A new database has it already: migration 2 creates the current graph tables.)
        served_generation=schema.HIDDEN_TABLE,
    ),
)

MIGRATIONS += (
    Migration(
        5,
        "running totals of the log",
        """
        -- Per delivery, the totals of the log up to it (log_sql.record_totals writes them at
        -- append): the backlog past any position is a difference of two rows, where
        -- counting it meant reading every unprojected delivery's index entry each second.
        CREATE TABLE delivery_totals (
            seq {bigint} PRIMARY KEY,        -- deliveries.seq
            items {bigint} NOT NULL,         -- items to project (not rejected on receipt)
            pending {bigint} NOT NULL,       -- deliveries with an item to project
            rejected {bigint} NOT NULL       -- deliveries with every item rejected on receipt
        );
        INSERT INTO delivery_totals (seq, items, pending, rejected)
            SELECT seq, SUM(item_count - invalid_item_count) OVER w,
                SUM(CASE WHEN item_count > invalid_item_count THEN 1 ELSE 0 END) OVER w,
                SUM(CASE WHEN item_count > invalid_item_count THEN 0 ELSE 1 END) OVER w
            FROM deliveries WINDOW w AS (ORDER BY seq)
    """,
    ),
)

MIGRATIONS += (
    Migration(
        6,
        "compressed log bodies",
        """
        -- zstd dictionaries trained from the log (store/compression.py); never deleted:
        -- every body names the one it was compressed with.
        CREATE TABLE log_dictionaries (
            dict_id {serial_pk},
            created_at TEXT NOT NULL,
            samples INTEGER NOT NULL,        -- how many bodies it was trained from
            content {blob} NOT NULL
        );
        -- The bodies, out of the deliveries rows: a delivery's row (receipt, dedupe key,
        -- state) stays for good, its body leaves when retention archives it.
        CREATE TABLE delivery_bodies (
            seq {bigint} NOT NULL,           -- deliveries.seq
            received_at TEXT NOT NULL,       -- deliveries.received_at (the partition key)
            dict_id INTEGER,                 -- NULL as received, 0 zstd, N log_dictionaries
            size {bigint} NOT NULL,          -- bytes as received
            body {blob} NOT NULL,
            PRIMARY KEY ({bodies_key})
        ){bodies_partitions};
        -- Existing bodies move as they are; `embrasure db upgrade` compresses them after.
        INSERT INTO delivery_bodies (seq, received_at, dict_id, size, body)
            SELECT seq, received_at, NULL, length(body), body FROM deliveries;
        ALTER TABLE deliveries DROP COLUMN body
    """,
    ),
)

MIGRATIONS += (
    Migration(
        7,
        "archived log segments",
        """
        -- The archive segments whose bodies left delivery_bodies (lifecycle/retention.py).
        -- Bodies leave in seq order: every body up to MAX(last_seq) is in one of these.
        CREATE TABLE log_segments (
            name TEXT PRIMARY KEY,           -- the segment's name in the archive manifest
            first_seq {bigint} NOT NULL,
            last_seq {bigint} NOT NULL,
            delivery_count INTEGER NOT NULL, -- deliveries it holds
            sha256 TEXT NOT NULL,            -- hex SHA-256 of the segment file
            archived_at TEXT NOT NULL        -- when its bodies left the database
        );
        CREATE UNIQUE INDEX log_segments_by_seq ON log_segments (last_seq)
    """,
    ),
)

MIGRATIONS += (
    Migration(
        8,
        "the run horizon",
        RUN_HORIZON,
    ),
)

MIGRATIONS += (
    Migration(
        9,
        "SQLite bodies keyed by seq alone",
        """
        -- received_at is PostgreSQL's partition key (log_sql.BodySQL); in SQLite's rowid
        -- table it was 28 bytes a body for nothing. Copied in seq order, so the rows are
        -- packed into whole pages (ALTER TABLE … DROP COLUMN would rewrite each in place).
        CREATE TABLE delivery_bodies_9 (
            seq INTEGER PRIMARY KEY,         -- deliveries.seq
            dict_id INTEGER,                 -- NULL as received, 0 zstd, N log_dictionaries
            size INTEGER NOT NULL,           -- bytes as received
            body BLOB NOT NULL
        );
        INSERT INTO delivery_bodies_9 (seq, dict_id, size, body)
            SELECT seq, dict_id, size, body FROM delivery_bodies ORDER BY seq;
        DROP TABLE delivery_bodies;
        ALTER TABLE delivery_bodies_9 RENAME TO delivery_bodies
    """,
        dialects=("sqlite",),
    ),
)

MIGRATIONS += (
    Migration(
        10,
        "Kafka coordinates",
        """
        -- Where each delivery of route 'kafka' came from (receiver/kafka.py): shown with
        -- the delivery and its quarantined items. A row per message, never trimmed, like
        -- the deliveries rows beside it.
        CREATE TABLE kafka_messages (
            seq {bigint} PRIMARY KEY,        -- deliveries.seq
            topic TEXT NOT NULL,
            msg_partition INTEGER NOT NULL,
            msg_offset {bigint} NOT NULL,
            msg_key {blob}                   -- NULL: the message had no key
        )
    """,
    ),
)

MIGRATIONS += (
    Migration(
        11,
        "autovacuum of the tables retention trims",
        "",
        # The served generation's tables get what new generations are created with
        # (CHURNED); so do the body partitions made from now on (log_sql.make_body_partition).
        # The ones made already keep PostgreSQL's default until retention drops them.
        served_generation=";\n".join(
            f"ALTER TABLE {{g}}{table} SET ({CHURNED_PARAMETERS})" for table in CHURNED_TABLES
        ),
        dialects=("postgresql",),
    ),
)

MIGRATIONS += (
    Migration(
        12,
        "tags",
        "",
        # Empty in every existing graph: no log before this version holds a tag entry.
        served_generation=schema.TAGS_TABLE,
    ),
)

MIGRATIONS += (
    Migration(
        13,
        "grants; who appended each delivery; the server's secrets",
        """
        -- docs/security.md#grants: who may use which scope on which namespaces.
        CREATE TABLE grants (
            grant_id TEXT PRIMARY KEY,
            who TEXT NOT NULL,               -- group:NAME, subject:SUB, client:ID, token:ID
            scope TEXT NOT NULL,             -- ingest, read or admin
            namespaces TEXT NOT NULL,        -- a glob: airflow-prod/*, finance.*, *
            created_at TEXT NOT NULL,
            created_by TEXT                  -- who added it (NULL: auth was off)
        );
        -- Secrets the server makes for itself and every process shares: the key that
        -- signs the web UI's session cookies (access/sign_in.py).
        CREATE TABLE server_secrets (
            name TEXT PRIMARY KEY,
            value TEXT NOT NULL,             -- hex
            created_at TEXT NOT NULL
        );
        -- docs/security.md#audit: the authenticated writer of a delivery (none while
        -- auth is off, nor for Kafka's).
        CREATE TABLE delivery_writers (
            seq {bigint} PRIMARY KEY,
            kind TEXT NOT NULL,              -- token or jwt
            subject TEXT NOT NULL,
            issuer TEXT NOT NULL,
            token_id TEXT NOT NULL
        );
    """,
    ),
)

MIGRATIONS += (
    Migration(
        14,
        "notification subscriptions and their outbox",
        """
        -- docs/notifications.md: who wants to hear of what, and where to send it.
        CREATE TABLE subscriptions (
            subscription_id TEXT PRIMARY KEY,
            target TEXT NOT NULL,            -- dataset, job or namespace
            namespace TEXT NOT NULL,
            name TEXT NOT NULL,              -- '' for a namespace
            events TEXT NOT NULL,            -- space-separated: check.failed check.recovered
            url TEXT NOT NULL,               -- the receiver's webhook
            secret TEXT NOT NULL,            -- whsec_…, the Standard Webhooks signing key
            created_at TEXT NOT NULL,
            created_by TEXT,                 -- who added it (NULL: auth was off)
            format TEXT NOT NULL             -- standard (Standard Webhooks) or slack
        );
    """
        + OUTBOX,
    ),
)

MIGRATIONS += (
    Migration(
        15,
        "subscriptions to what lies downstream of a dataset",
        """
        -- docs/notifications.md#subscribing: a dataset subscription also hears of what
        -- lies this many datasets downstream of it (0: the dataset alone).
        ALTER TABLE subscriptions ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
    """,
    ),
)

MIGRATIONS += (
    Migration(
        16,
        "subscriptions to a dataset's freshness",
        """
        -- docs/notifications.md#freshness: a dataset subscription hears when the dataset
        -- was not written for this many seconds (0: never).
        ALTER TABLE subscriptions ADD COLUMN stale_after INTEGER NOT NULL DEFAULT 0;
    """,
    ),
)

MIGRATIONS += (
    Migration(
        17,
        "the graph in a file of its own",
        "",
        # SQLite: the graph's tables (GRAPH_OWN_TABLES and every generation's) leave the
        # log's file for one beside it, so that appends and projections each have a
        # write lock of their own (store/sqlite_files.py moves them). From here on, a
        # migration that changes those tables on SQLite must change them in that file.
        dialects=("sqlite",),
        by_store=True,
    ),
)

MIGRATIONS += (
    Migration(
        18,
        "web UI sessions kept by the server",
        """
        -- docs/security.md#signing-in-to-the-web-ui: a session is a row, so signing out,
        -- an admin, the idle timeout and the absolute lifetime end it on every process at
        -- once. The cookie holds a random id; the row, its SHA-256 (access/sign_in.py).
        CREATE TABLE sessions (
            digest TEXT PRIMARY KEY,
            subject TEXT NOT NULL,
            issuer TEXT NOT NULL,
            name TEXT NOT NULL,
            groups TEXT NOT NULL,            -- one per line
            csrf TEXT NOT NULL,
            created_at BIGINT NOT NULL,      -- seconds since the epoch
            seen_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL,
            ended_at BIGINT,
            ended_by TEXT
        );
        CREATE INDEX sessions_subject ON sessions (subject);
    """,
    ),
)

BODIES_MOVED = 6  # after it, the store compresses the bodies it moved (compress_bodies)
GRAPH_FILE = 17  # the SQLite store moves its graph to a file of its own
LATEST = MIGRATIONS[-1].version

SCHEMA_TABLE = """
    CREATE TABLE IF NOT EXISTS embrasure_schema (
        version INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        applied_at TEXT NOT NULL
    )
"""


def upgrade(execute: Execute, dialect: str, name: str, allowed: bool, now: str) -> list[int]:
    """Inside the caller's locked transaction: create the version table, check the
    database's version against this code's, and apply what is missing (an empty
    database always; an older one only when the upgrade is ``allowed``). ``name`` names
    the database in errors. Returns the versions applied."""
    execute(SCHEMA_TABLE, ())
    row = execute("SELECT COALESCE(MAX(version), 0) FROM embrasure_schema", ())
    current = int(row.fetchone()[0])  # type: ignore[attr-defined]
    if current > LATEST:
        raise SchemaError(
            f"{name} has schema version {current}, newer than this Embrasure's {LATEST}:"
            " upgrade Embrasure"
        )
    if 0 < current < LATEST and not allowed:
        raise SchemaError(
            f"{name} has schema version {current}, this Embrasure needs {LATEST}: run"
            f" `embrasure db upgrade --db {name}`"
        )
    return apply(execute, dialect, current, now)


def pending(current: int) -> list[Migration]:
    return [m for m in MIGRATIONS if m.version > current]


Execute = Callable[[str, tuple[object, ...]], object]


def apply(execute: Execute, dialect: str, current: int, now: str) -> list[int]:
    """Apply the steps newer than ``current`` through ``execute`` (inside the caller's
    locked transaction); return the versions applied."""
    applied = []
    for migration in pending(current):
        if migration.by_store and dialect in migration.dialects:
            break  # the store's to do, then to record
        for statement in migration.statements(dialect):
            execute(statement, ())
        if migration.served_generation:
            row = execute("SELECT generation FROM graph_meta", ())
            prefix = schema.prefix(int(row.fetchone()[0]))  # type: ignore[attr-defined]
            for statement in migration.served_statements(dialect, prefix):
                execute(statement, ())
        record(execute, migration, now)
        applied.append(migration.version)
    return applied


def record(execute: Execute, migration: Migration, now: str) -> None:
    """Record ``migration`` as applied (inside the caller's locked transaction)."""
    execute(  # shared SQL: a PostgreSQL connection translates the placeholders
        "INSERT INTO embrasure_schema (version, name, applied_at) VALUES (?, ?, ?)",
        (migration.version, migration.name, now),
    )
