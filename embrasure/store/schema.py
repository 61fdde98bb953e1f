"""The projected graph's tables, written once for every dialect and every generation.

The graph is derived data: a function of the delivery log. It lives in a *generation* of
tables named with a prefix (``g1_runs``, ``g2_runs``…); ``graph_meta`` names the served one.
``embrasure reproject`` builds the next generation beside the served one and swaps the
pointer at the end (docs/architecture.md#reprojection-a-new-generation-then-a-swap), so
readers never see a half-built graph. A change to these tables is made by bumping
GRAPH_VERSION: the next start reprojects.

Times are stored twice: ``*_key`` sorts (fixed-width UTC text, '' for an unknown time,
which sorts before every known time — docs/projection.md#validation) and ``*_text`` is shown.
Dataset identities are stored as sent (the column tables by interned ids:
store/interned.py); aliases resolve through ``canonical`` when read, so an alias learned
later re-points everything learned earlier with no rewrite.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from embrasure.store.rows import GRAPH_ROWS, INTERNED, columns_of

# The version of these tables and of the projection rules that fill them. A graph built by
# another version is rebuilt from the log on start (worker.py), so a change to a table, or
# to a rule that changes what old events project to, bumps it. 9: history written on
# change — events name a shared shape; facet_history gave way to facet_sets. 10: a plain
# projected item has no items row (its kind is in deliveries.kinds, items.event_id is
# gone); facets name their value by hash in facet_values (compressed when large), ranked
# by it; the column tables name identities and fields by interned ids (names,
# field_names). 11: what each run did (docs/projection.md#what-each-run-did) — the dataset
# facets a run sent are kept per run (facets of ``input_dataset``/``output_dataset``),
# input and output facets honour ``_deleted``, run_io carries its run's latest eventTime
# (run_key) and is indexed by dataset in that order, dataset_checks keeps the latest
# result of each data-quality check of a dataset. 12: what a run sent about a dataset is
# keyed under the run's own facet key (projector/shapes.py ``run_entity``), so
# --retain-runs deletes a run's facets in one range. 13: a FAIL outranks a run's other
# terminal events (projector/runs.py: openlineage-spark's FAIL then COMPLETE of a failed
# query). 14: the dataset facets a run sent are its events' shapes' (facet_sets under
# ``input_dataset``/``output_dataset``, projector/shapes.py ``sent_entity``), read back
# through the run's events, no longer a facets row a run, dataset and name; facet_sets
# has no index on (entity, name): asOf reads a job's jobType through the job's shapes.
GRAPH_VERSION = 14

# Admin hide / unhide (docs/operations.md#hiding-datasets-jobs-and-namespaces), from the
# log's administrative entries: the latest entry for an entity (by log position) decides.
# Added to existing generations by migration 4.
HIDDEN_TABLE = """
CREATE TABLE IF NOT EXISTS {g}hidden (
    kind TEXT NOT NULL,                    -- dataset / job / namespace
    ns TEXT NOT NULL,
    name TEXT NOT NULL,                    -- '' for a namespace
    hidden INTEGER NOT NULL,               -- 1 hidden, 0 shown again
    seq {bigint} NOT NULL,                 -- the deciding entry's log position
    at TEXT NOT NULL,                      -- when the admin asked (RFC 3339 UTC)
    by_token TEXT,                         -- the admin's token ("name (id)"), none: auth off
    reason TEXT,
    PRIMARY KEY (kind, ns, name)
){without_rowid}
"""

# Tags on datasets, fields and jobs, and tag definitions (the Marquez API's tags,
# docs/marquez.md#sources-and-tags), from the log's administrative entries like hides:
# the latest entry for a (kind, namespace, name, field, tag), by log position, decides.
# Added to existing generations by migration 12.
TAGS_TABLE = """
CREATE TABLE IF NOT EXISTS {g}tags (
    kind TEXT NOT NULL,                    -- dataset / field / job / tag (a definition)
    ns TEXT NOT NULL,                      -- '' for a definition
    name TEXT NOT NULL,                    -- the tag's own name for a definition
    field TEXT NOT NULL,                   -- '' but for a field
    tag TEXT NOT NULL,
    present INTEGER NOT NULL,              -- 1 tagged (defined), 0 untagged
    seq {bigint} NOT NULL,                 -- the deciding entry's log position
    description TEXT,                      -- a definition's
    PRIMARY KEY (kind, ns, name, field, tag)
){without_rowid}
"""

GRAPH_TABLES = (
    """
CREATE TABLE {g}position (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq {bigint} NOT NULL                  -- the last delivery projected
);
CREATE TABLE {g}deliveries (
    seq {bigint} PRIMARY KEY,              -- deliveries.seq
    projected INTEGER NOT NULL,
    quarantined INTEGER NOT NULL,
    edges_created INTEGER NOT NULL,
    kinds TEXT NOT NULL                    -- its plain items' kinds, [[kind, count], …]
);
-- Items that are not plain (projected without warnings): quarantined, warned, replayed.
-- A plain one (nearly all) has no row, so the table does not grow with every event.
CREATE TABLE {g}items (
    seq {bigint} NOT NULL,
    idx INTEGER NOT NULL,
    kind TEXT,
    outcome TEXT NOT NULL,                 -- projected / quarantined
    reason TEXT,
    retriable INTEGER NOT NULL,
    warnings TEXT NOT NULL,                -- JSON array of strings
    PRIMARY KEY (seq, idx)
){without_rowid};
-- Quarantined items only: what the quarantine listing reads, newest delivery first.
CREATE INDEX {g}items_quarantined ON {g}items (seq, idx) WHERE outcome = 'quarantined';
CREATE TABLE {g}failures (
    seq {bigint} PRIMARY KEY,              -- a delivery the projector failed on
    attempts INTEGER NOT NULL,
    error TEXT NOT NULL
);
-- One row per event, and what asOf reads (docs/queries.md#asof): everything an event
-- names apart from its run and time is its shape, stored once per distinct shape. A
-- rowid table, unlike its neighbours: each of its indexes then ends in a rowid of a few
-- bytes instead of the 64-character event id a WITHOUT ROWID table would repeat in each.
CREATE TABLE {g}events (
    event_id TEXT PRIMARY KEY,             -- SHA-256 of the canonical JSON
    event_type TEXT,
    time_key TEXT NOT NULL,
    time_text TEXT,
    run_id TEXT,
    seq {bigint} NOT NULL,                 -- where it was first seen (raw event reads)
    idx INTEGER NOT NULL,
    shape_key {blob} NOT NULL              -- shapes.shape_key
){churned};
CREATE INDEX {g}events_time ON {g}events (time_key);
-- asOf reads every event of a run or a shape and keeps those up to T: no time in these.
CREATE INDEX {g}events_run ON {g}events (run_id);
CREATE INDEX {g}events_shape ON {g}events (shape_key);
CREATE TABLE {g}shapes (                   -- what an event names apart from its run and
    shape_key {blob} PRIMARY KEY,          -- time (a job's runs share one): BLAKE2b-128 of
    kind TEXT NOT NULL,                    -- the others and the identities and fields named
    job_ns TEXT, job_name TEXT,
    io_key {blob},                         -- io_sets.io_key: the edges it names
    facets_key {blob}                      -- facet_sets.facets_key: its job and dataset facets
){without_rowid}{churned};
CREATE INDEX {g}shapes_job ON {g}shapes (job_ns, job_name);
CREATE INDEX {g}shapes_io ON {g}shapes (io_key);
CREATE INDEX {g}shapes_facets ON {g}shapes (facets_key);
CREATE TABLE {g}io_sets (                  -- the job ↔ dataset edges one event names:
    io_key {blob} NOT NULL,                -- a job's runs name the same set, so it is
    job_ns TEXT NOT NULL, job_name TEXT NOT NULL,  -- stored once per distinct set
    ds_ns TEXT NOT NULL, ds_name TEXT NOT NULL,
    direction TEXT NOT NULL,
    static INTEGER NOT NULL,
    PRIMARY KEY (io_key, job_ns, job_name, ds_ns, ds_name, direction, static)
){without_rowid};
CREATE INDEX {g}io_sets_ds ON {g}io_sets (ds_ns, ds_name);
CREATE INDEX {g}io_sets_job ON {g}io_sets (job_ns, job_name);
CREATE TABLE {g}facet_sets (               -- the job and dataset facet values one event
    facets_key {blob} NOT NULL,            -- sends, one per (entity, name): stored once
    entity TEXT NOT NULL,                  -- per distinct set, as io_sets. Read by key
                                           -- only: asOf from a job's shapes, a run's view
                                           -- of a dataset from its events' shapes
    name TEXT NOT NULL,
    value_hash {blob} NOT NULL,            -- facet_values.hash
    PRIMARY KEY (facets_key, entity, name)
){without_rowid}{churned};
CREATE TABLE {g}datasets (
    ns TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (ns, name)
){without_rowid};
-- The column tables hold millions of rows on a column-heavy platform, each naming two
-- datasets, two fields and a job: they name them by these small integers, interned by
-- the store (store/interned.py), and reads join the names back (docs/architecture.md#storage).
CREATE TABLE {g}names (                    -- a dataset or job identity as sent
    id {id_pk},
    ns TEXT NOT NULL, name TEXT NOT NULL,
    UNIQUE (ns, name)
);
CREATE TABLE {g}field_names (              -- every field name once: search scans these
    id {id_pk},                            -- (hundreds) rather than every dataset's fields
    field TEXT NOT NULL UNIQUE
);
CREATE TABLE {g}fields (                   -- a dataset's field, named by its schema facet
    field INTEGER NOT NULL,                -- or column lineage: field_names.id, first, as
    ds INTEGER NOT NULL,                   -- search finds the datasets of a field name;
    PRIMARY KEY (field, ds)                -- names.id
){without_rowid};
CREATE TABLE {g}links (
    a_ns TEXT NOT NULL, a_name TEXT NOT NULL,
    b_ns TEXT NOT NULL, b_name TEXT NOT NULL,
    kind TEXT NOT NULL,                    -- TABLE / RENAME (a renamed to b) / LOCATION
    type TEXT,                             -- a LOCATION's symlink type as sent
    first_key TEXT NOT NULL,               -- earliest eventTime declaring it ('' unknown)
    PRIMARY KEY (a_ns, a_name, b_ns, b_name, kind)
){without_rowid};
CREATE INDEX {g}links_b ON {g}links (b_ns, b_name);
CREATE TABLE {g}canonical (
    ns TEXT NOT NULL, name TEXT NOT NULL,  -- an identity in a group of more than one
    c_ns TEXT NOT NULL, c_name TEXT NOT NULL,
    renamed INTEGER NOT NULL,
    PRIMARY KEY (ns, name)
){without_rowid};
CREATE INDEX {g}canonical_c ON {g}canonical (c_ns, c_name);
CREATE TABLE {g}jobs (
    ns TEXT NOT NULL, name TEXT NOT NULL,
    run_events INTEGER NOT NULL,           -- 1 once a RunEvent named it
    job_events_out INTEGER NOT NULL,       -- 1 once a JobEvent with outputs named it
    job_events_in INTEGER NOT NULL,        -- 1 once a JobEvent without outputs named it
    PRIMARY KEY (ns, name)
){without_rowid};
CREATE TABLE {g}runs (
    run_id TEXT PRIMARY KEY,
    job_ns TEXT NOT NULL, job_name TEXT NOT NULL,
    state TEXT,
    started_key TEXT, started_text TEXT,
    ended_key TEXT, ended_text TEXT,
    latest_key TEXT NOT NULL,
    parent_run_id TEXT, parent_job_ns TEXT, parent_job_name TEXT,
    root_run_id TEXT, root_job_ns TEXT, root_job_name TEXT,
    -- The events the job, the state and the parent are taken from (runs.py), ranked by
    -- eventTime then event id. The ids only rank, so they are kept as their 32 bytes
    -- (which sort as the hex does), not 64 characters each.
    job_key TEXT NOT NULL, job_event {blob} NOT NULL,
    win_terminal INTEGER NOT NULL,         -- the state's: terminal?, eventTime, event id
    win_key TEXT NOT NULL, decided_by {blob} NOT NULL,
    parent_key TEXT, parent_event {blob}
){without_rowid}{churned};
CREATE INDEX {g}runs_job ON {g}runs (job_ns, job_name, latest_key);
CREATE INDEX {g}runs_parent ON {g}runs (parent_run_id);
CREATE TABLE {g}edges (
    job_ns TEXT NOT NULL, job_name TEXT NOT NULL,
    ds_ns TEXT NOT NULL, ds_name TEXT NOT NULL,
    direction TEXT NOT NULL,               -- 'in': dataset → job, 'out': job → dataset
    static INTEGER NOT NULL,               -- declared by a JobEvent
    first_key TEXT, first_text TEXT,
    last_key TEXT, last_text TEXT,
    run_count INTEGER NOT NULL,
    last_run_key TEXT NOT NULL,            -- the run that named it last: eventTime key
    last_run TEXT NOT NULL,                -- ('' unknown), then runId; '' '' for none
    PRIMARY KEY (job_ns, job_name, ds_ns, ds_name, direction, static)
){without_rowid};
CREATE INDEX {g}edges_ds ON {g}edges (ds_ns, ds_name, direction);
CREATE TABLE {g}trimmed_edges (            -- what runs --retain-runs removed gave an
    job_ns TEXT NOT NULL, job_name TEXT NOT NULL,  -- edge: asOf after the horizon reads
    ds_ns TEXT NOT NULL, ds_name TEXT NOT NULL,    -- it beside the events left
    direction TEXT NOT NULL,
    first_key TEXT, first_text TEXT,
    last_key TEXT, last_text TEXT,
    run_count INTEGER NOT NULL,
    last_run_key TEXT NOT NULL, last_run TEXT NOT NULL,
    last_state TEXT,
    PRIMARY KEY (job_ns, job_name, ds_ns, ds_name, direction)
){without_rowid};
CREATE INDEX {g}trimmed_edges_ds ON {g}trimmed_edges (ds_ns, ds_name);
CREATE TABLE {g}run_io (
    run_id TEXT NOT NULL,
    job_ns TEXT NOT NULL, job_name TEXT NOT NULL,  -- the job of the event naming it
    ds_ns TEXT NOT NULL, ds_name TEXT NOT NULL,
    direction TEXT NOT NULL,
    version TEXT, version_key TEXT,        -- the version from the latest event naming it
    run_key TEXT NOT NULL,                 -- its run's runs.latest_key (sync_run_keys)
    PRIMARY KEY (run_id, job_ns, job_name, ds_ns, ds_name, direction)
){without_rowid}{churned};
-- A dataset's runs newest first (GET /api/v1/datasets/runs) read this index backwards,
-- a page at a time, however many runs the dataset has: no sort.
CREATE INDEX {g}run_io_ds ON {g}run_io (ds_ns, ds_name, direction, run_key, run_id);
-- Each dataset's data-quality checks (projector/quality.py), as sent, each one's latest
-- result: lineage and impact mark a node with a failed one without reading facet values.
CREATE TABLE {g}dataset_checks (
    ds_ns TEXT NOT NULL, ds_name TEXT NOT NULL,
    check_id TEXT NOT NULL,                -- [assertion, column, name] as canonical JSON
    check_key TEXT NOT NULL,               -- eventTime key of its latest result ('' unknown)
    check_hash {blob} NOT NULL,            -- that assertion's hash
    failed INTEGER NOT NULL,               -- 1: it said success false
    PRIMARY KEY (ds_ns, ds_name, check_id)
){without_rowid};
-- An entity's current facets: the winning value by hash (its JSON once in facet_values,
-- however many runs, datasets or versions send it) and the latest deletion marker's time
-- (docs/architecture.md#storage). Small rows, so no rowid: the key is stored once.
CREATE TABLE {g}facets (
    entity TEXT NOT NULL,                  -- 'dataset:ns\x1fname', 'job:…', 'run:id', …
    name TEXT NOT NULL,
    value_key TEXT,                        -- eventTime key of the winning value
    value_hash {blob},                     -- facet_values.hash; NULL: deletion markers only
    deleted_key TEXT,                      -- eventTime key of the latest `_deleted: true`
    PRIMARY KEY (entity, name)
){without_rowid}{churned};
-- A rowid table: a value may be kilobytes even compressed, too large for a WITHOUT ROWID
-- b-tree's cells.
CREATE TABLE {g}facet_values (
    hash {blob} PRIMARY KEY,               -- BLAKE2b-128 of the canonical JSON
    encoding INTEGER NOT NULL,             -- 0: the canonical JSON as UTF-8, 1: zstd of it
    value {blob} NOT NULL
){churned};
CREATE TABLE {g}column_edges (           -- datasets and the job: names.id; fields:
    tgt INTEGER NOT NULL, tgt_field INTEGER NOT NULL,  -- field_names.id
    src INTEGER NOT NULL, src_field INTEGER NOT NULL,
    job INTEGER NOT NULL,                  -- '' '' when no job is known
    derived TEXT NOT NULL,                 -- '' declared, 'sql' parsed from the job's SQL
    kind TEXT NOT NULL,                    -- mapping / indirect
    class TEXT,                            -- direct / expression / aggregate (mappings)
    masked INTEGER NOT NULL,
    subtypes TEXT NOT NULL,                -- JSON array, sorted
    first_key TEXT, first_text TEXT, last_key TEXT, last_text TEXT,
    PRIMARY KEY (tgt, tgt_field, src, src_field, job, derived)
){without_rowid};
CREATE INDEX {g}column_edges_src ON {g}column_edges (src, src_field);
"""
    + HIDDEN_TABLE
    + ";"
    + TAGS_TABLE
)


TABLES = (
    "position",
    "deliveries",
    "items",
    "failures",
    "events",
    "shapes",
    "io_sets",
    "facet_sets",
    "datasets",
    "names",
    "fields",
    "field_names",
    "links",
    "canonical",
    "jobs",
    "runs",
    "edges",
    "trimmed_edges",
    "run_io",
    "dataset_checks",
    "facets",
    "facet_values",
    "column_edges",
    "hidden",
    "tags",
)


# The indexes only reads use: the projection's own writes look rows up by their keys
# (and links by either end, so links_b stays). A rebuild (projector/worker.py
# ``reproject``) creates its generation without them and builds each once the log is
# folded: one sorted build instead of an entry kept in place by every transaction. In a
# rebuild of the bench platform run_io_ds alone (a new entry at the end of each of ~3,000
# datasets' runs, every transaction) was 47% of the pages a 2,000-event transaction
# wrote (bench/README.md, "Reproject").
DEFERRED_INDEXES = frozenset(
    {
        "items_quarantined",
        "events_time",
        "events_run",
        "events_shape",
        "shapes_job",
        "shapes_io",
        "shapes_facets",
        "io_sets_ds",
        "io_sets_job",
        "canonical_c",
        "runs_job",
        "runs_parent",
        "edges_ds",
        "trimmed_edges_ds",
        "run_io_ds",
        "column_edges_src",
    }
)
_INDEX_NAME = re.compile(r"CREATE INDEX (\w+) ON ")


def deferred_split(statements: list[str], prefix: str) -> tuple[list[str], list[str]]:
    """A generation's rendered statements → (those a rebuild runs first, the
    DEFERRED_INDEXES it builds at the end)."""
    first: list[str] = []
    deferred: list[str] = []
    for statement in statements:
        found = _INDEX_NAME.match(statement)
        name = found.group(1).removeprefix(prefix) if found else None
        (deferred if name in DEFERRED_INDEXES else first).append(statement)
    return first, deferred


def split_statements(text: str) -> list[str]:
    """SQL text → statements. ``--`` comments go first (they may hold a ';'); the schema
    holds no string literal with ``--`` or ';' in it."""
    text = re.sub(r"--[^\n]*", "", text)
    return [s.strip() for s in text.split(";") if s.strip()]


def prefix(generation: int) -> str:
    return f"g{generation}_"


# A run's parent link: its parent run and job, and the root of the hierarchy.
PARENT_COLUMNS = (
    "parent_run_id",
    "parent_job_ns",
    "parent_job_name",
    "root_run_id",
    "root_job_ns",
    "root_job_name",
)

# Every graph table as (key columns, value columns), from its record (store/rows.py): the
# store reads and writes rows of them generically, so the projector's merge rules stay in
# the projector and the SQL here.
COLUMNS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    name: columns_of(table) for name, table in GRAPH_ROWS.items()
}
# The columns as the database has them: a table's record's, or for the tables whose
# identities are interned (rows.INTERNED), its stored record's. Writes and merge rules
# work on these; the value columns are the same.
STORED_COLUMNS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    name: columns_of(INTERNED.get(name, table)) for name, table in GRAPH_ROWS.items()
}


# -- merged rows ----------------------------------------------------------------------------
# How a merged table joins a new row into the stored one: the SET list of ``INSERT … ON
# CONFLICT (key) DO UPDATE``, so a batch the projector has folded merges with what is stored
# in one statement per row, without reading it first. Each rule is the same join as the
# projector's Python merge (named beside it); tests check both agree on random rows. Every
# rule is commutative, associative and idempotent, which makes the graph independent of
# arrival order (docs/architecture.md#order-independence). Unqualified names are the stored
# row, ``excluded.`` the new one; SET expressions all see the stored row as it was.


def _later(
    columns: tuple[str, ...],
    rank: tuple[str, ...],
    present: str = "",
    newer: str = ">",
    shown: Mapping[str, Callable[[str], str]] | None = None,
) -> dict[str, str]:
    """``columns`` taken together from whichever row ranks higher by ``rank`` (a row
    value); a row whose ``present`` column (default: the first of ``rank``) is NULL has
    nothing to offer. ``newer='<'`` takes the lower rank instead (an earliest time).
    ``shown`` ranks a column by an expression of it instead (given the row's prefix:
    '' or 'excluded.')."""
    present = present or rank[0]
    shown = shown or {}
    stored = ", ".join(shown[c]("") if c in shown else c for c in rank)
    new = ", ".join(shown[c]("excluded.") if c in shown else f"excluded.{c}" for c in rank)
    takes_new = (
        f"excluded.{present} IS NOT NULL AND ({present} IS NULL OR ({new}) {newer} ({stored}))"
    )
    return {c: f"CASE WHEN {takes_new} THEN excluded.{c} ELSE {c} END" for c in columns}


def _span(plain_texts: bool = False) -> dict[str, str]:
    """graph_rows.EdgeSpan.add: the earliest and the latest eventTime (key, then text).
    ``plain_texts``: a NULL text is the key's plain one (``time_text_sql``)."""
    shown = {f"{end}_text": _text_of(end) for end in ("first", "last")} if plain_texts else None
    return {
        **_later(("first_key", "first_text"), ("first_key", "first_text"), "", "<", shown),
        **_later(("last_key", "last_text"), ("last_key", "last_text"), "", ">", shown),
    }


# A time's text as projector/times.py writes it when the source sent no trailing zeros
# in its fraction: the key (UTC, always 9 fraction digits) with them cut, and the '.'
# when none is left ("…:00.159000000Z" → "…:00.159Z", "…:00.000000000Z" → "…:00Z").
# The column tables store NULL for such a text (nearly all of them) and read it back
# with this expression; any other text (".150Z" sent as such) is stored: an exact inverse.
def time_text_sql(key: str, text: str) -> str:
    return f"COALESCE({text}, rtrim(rtrim(substr({key}, 1, 29), '0'), '.') || 'Z')"


def plain_time_text(key: str) -> str:
    """``time_text_sql``'s text for a stored NULL, in Python."""
    return key[:29].rstrip("0").rstrip(".") + "Z"


def _text_of(end: str) -> Callable[[str], str]:
    """The text of the span's ``end`` (first / last) of a row ('' or 'excluded.')."""
    return lambda row: time_text_sql(f"{row}{end}_key", f"{row}{end}_text")


_MAPPING = "(kind = 'mapping' OR excluded.kind = 'mapping')"


def _class_rank(column: str) -> str:
    # column_lineage.CLASSES order: aggregate > expression > direct.
    return (
        f"CASE {column} WHEN 'aggregate' THEN 3 WHEN 'expression' THEN 2"
        f" WHEN 'direct' THEN 1 ELSE 0 END"
    )


MERGES: dict[str, dict[str, str]] = {
    # graph_rows.Contributions.add_event: a flag, once set, stays set.
    "jobs": {
        c: f"{{greatest}}({c}, excluded.{c})"
        for c in ("run_events", "job_events_out", "job_events_in")
    },
    # A link is as old as the earliest event declaring it ('' — unknown — is older).
    "links": {"first_key": "{least}(first_key, excluded.first_key)"},
    # EdgeSpan, and run_count: the caller sends only runs new to the edge.
    # The latest run naming it (eventTime key, then runId).
    "edges": {
        **_span(),
        "run_count": "run_count + excluded.run_count",
        **_later(("last_run_key", "last_run"), ("last_run_key", "last_run")),
    },
    # runs.merge_run_states, and the job and parent from the latest event naming them
    # (eventTime key, then event id).
    "runs": {
        **_later(("job_ns", "job_name", "job_key", "job_event"), ("job_key", "job_event")),
        **_later(
            ("state", "ended_key", "ended_text", "win_terminal", "win_key", "decided_by"),
            ("win_terminal", "win_key", "decided_by"),
        ),
        **_later(("started_key", "started_text"), ("started_key", "started_text"), newer="<"),
        "latest_key": "{greatest}(latest_key, excluded.latest_key)",
        **_later(
            (*PARENT_COLUMNS, "parent_key", "parent_event"),
            ("parent_key", "parent_event"),
            "parent_event",
        ),
    },
    # The version named by the latest event (eventTime key, then version).
    # lifecycle/run_retention.removed_edges: as edges, the state with the last run.
    "trimmed_edges": {
        **_span(),
        "run_count": "run_count + excluded.run_count",
        **_later(("last_run_key", "last_run", "last_state"), ("last_run_key", "last_run")),
    },
    # The run's latest eventTime: the greatest seen (sync_run_keys then copies the runs
    # row's, which is the greatest of all).
    "run_io": {
        **_later(("version", "version_key"), ("version_key", "version"), "version"),
        "run_key": "{greatest}(run_key, excluded.run_key)",
    },
    # quality.later_check: a check's latest result by eventTime key, then assertion hash.
    "dataset_checks": _later(("check_key", "check_hash", "failed"), ("check_key", "check_hash")),
    # facets.merge_slots: the best value, ranked by (eventTime, value hash), and the latest
    # deletion marker's eventTime. The Python rank's last part, the event id, is not
    # stored: it only decides between records whose stored columns are equal.
    "facets": {
        **_later(("value_key", "value_hash"), ("value_key", "value_hash"), "value_hash"),
        **_later(("deleted_key",), ("deleted_key",)),
    },
    # projector/admin.py: the latest administrative entry in the log decides.
    "hidden": _later(("hidden", "seq", "at", "by_token", "reason"), ("seq",)),
    "tags": _later(("present", "seq", "description"), ("seq",)),
    # column_lineage.merge_edges (derived is part of the key).
    "column_edges": {
        "kind": f"CASE WHEN {_MAPPING} THEN 'mapping' ELSE 'indirect' END",
        "class": f"CASE WHEN {_MAPPING} THEN CASE WHEN {_class_rank('excluded.class')}"
        f" > {_class_rank('class')} THEN excluded.class ELSE class END END",
        "masked": "{greatest}(masked, excluded.masked)",
        "subtypes": "CASE WHEN subtypes = excluded.subtypes THEN subtypes"
        " ELSE {union_json_arrays} END",
        **_span(plain_texts=True),  # stored NULL when plain (store/interned.py)
    },
}
