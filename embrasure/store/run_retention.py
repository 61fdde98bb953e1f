"""SQL of --retain-runs (lifecycle/run_retention.py), both backends: runs whose latest
eventTime is before the horizon leave the graph with their per-run rows, and the horizon
is recorded beside the log (docs/operations.md#retention-and-the-archive).

What goes: the ``runs`` row, its ``run_io`` rows, its ``events`` rows, and the facets
of the run and of its inputs and outputs (entity ``run<SEP>id`` and the keys under it:
projector/shapes.py ``run_entity``). What stays: datasets, jobs, services, edges (with
their first and last seen and run counts), column edges, the current job and dataset
facets, each data-quality check's latest result (``dataset_checks``), the io sets, and
each job's latest run, which no horizon trims (a job page always shows its last run).
Rows shared by content that only the trimmed rows named go after them, in transactions
of their own: the shapes no event names (``delete_unnamed_shapes``, with the facet sets
no shape names then), and the facet values no facets or facet_sets row names
(``delete_unnamed_values``); a run's own values (a nominalTime, a parent run) and a
job's per-run shapes would otherwise stay for good (docs/architecture.md#storage).
"""

from __future__ import annotations

from collections.abc import Sequence

from embrasure.store.connection import Connection
from embrasure.store.rows import SEP
from embrasure.store.sql import MAX_PARAMS

AFTER_SEP = chr(ord(SEP) + 1)  # keys starting 'x<SEP>' sort below 'x<AFTER_SEP>'
RunCursor = tuple[str, str, str]  # job ns, job name, latest key: where a pass goes on
# Candidates a delete_unnamed_values statement takes: a parameter each, under SQLite's
# limit (32,766 since 3.32) and PostgreSQL's (65,535). Each statement scans the facet
# tables once whatever its candidates, so the more it takes the fewer scans a pass makes:
# in the soak (bench/README.md) a pass's 1,500 to 7,100 candidates took one statement
# holding the write lock 477 ms at p50, where 300 a statement held it ~206 ms each.
UNNAMED_PER_STATEMENT = 30_000


class RunTrimming:
    """The run-retention statements of a projection transaction (base.ProjectionTx);
    a backend's ProjectionTx lists this class among its bases."""

    conn: Connection
    prefix: str

    def trimmable_runs(
        self, horizon_key: str, limit: int, after: RunCursor | None = None
    ) -> tuple[list[str], RunCursor | None]:
        """Up to ``limit`` runs whose latest eventTime key is before ``horizon_key`` and
        whose job has a later run (each job's latest run stays), from ``after`` on in
        the order of the ``runs_job`` index (job, latest key); and where the next call
        starts (None when none was found).

        Read along that index from where the last transaction of the pass stopped, not
        sorted by latest key: runs has no index on latest_key alone, so that sort read
        the whole table in every transaction of the pass. The cursor is inclusive: the
        runs taken at it are deleted with the batch, and the ones left there (not
        trimmable, or past ``limit``) are looked at again."""
        g = self.prefix
        start = after or ("", "", "")
        rows = self.conn.execute(
            f"SELECT r.run_id, r.job_ns, r.job_name, r.latest_key FROM {g}runs r"
            " WHERE (r.job_ns, r.job_name, r.latest_key) >= (?, ?, ?) AND r.latest_key < ?"
            # A later run of the job: the index range from this run's key on.
            f" AND EXISTS (SELECT 1 FROM {g}runs l WHERE l.job_ns = r.job_ns"
            " AND l.job_name = r.job_name AND l.latest_key >= r.latest_key"
            " AND (l.latest_key > r.latest_key OR l.run_id > r.run_id))"
            " ORDER BY r.job_ns, r.job_name, r.latest_key LIMIT ?",
            (*start, horizon_key, limit),
        ).fetchall()
        if not rows:
            return [], None
        _, job_ns, job_name, latest_key = rows[-1]
        return [r[0] for r in rows], (str(job_ns), str(job_name), str(latest_key))

    def run_facet_values(self, run_ids: Sequence[str]) -> frozenset[bytes]:
        """The facet values the runs' facets name: once the runs are gone, the
        candidates of ``delete_unnamed_values``."""
        if not run_ids:
            return frozenset()
        terms, params = _run_facets(run_ids)
        rows = self.conn.execute(
            f"SELECT DISTINCT value_hash FROM {self.prefix}facets WHERE {terms}", params
        ).fetchall()
        return frozenset(bytes(r[0]) for r in rows if r[0] is not None)

    def count_events(self, run_ids: Sequence[str]) -> int:
        """How many events rows the runs have. Rows of a run are only ever added
        (projector/apply.py) until a trim deletes them all, so the same count read
        twice means the same rows."""
        if not run_ids:
            return 0
        marks = ", ".join("?" for _ in run_ids)
        row = self.conn.execute(
            f"SELECT count(*) FROM {self.prefix}events WHERE run_id IN ({marks})", list(run_ids)
        ).fetchone()
        return int(row[0])

    def delete_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the runs and their per-run rows."""
        if not run_ids:
            return
        if len(run_ids) > MAX_PARAMS // 3:
            raise ValueError(f"{len(run_ids)} runs: a statement takes {MAX_PARAMS // 3}")
        g = self.prefix
        # A statement per table, not one per run, and none that returns rows: the pass's
        # thread holds the write lock through its statements and may wait for the GIL
        # again after each one and after each row (store/pacing.py). What the rows name
        # was read before the lock (lifecycle/run_retention.py ``plan_step``).
        marks = ", ".join("?" for _ in run_ids)
        for table in ("runs", "run_io", "events"):
            self.conn.execute(f"DELETE FROM {g}{table} WHERE run_id IN ({marks})", list(run_ids))
        terms, params = _run_facets(run_ids)
        self.conn.execute(f"DELETE FROM {g}facets WHERE {terms}", params)

    def delete_unnamed_shapes(self, keys: Sequence[bytes]) -> set[bytes]:
        """Delete those of ``keys`` no event names, then the facet sets they named that
        no shape names; return the values those facet sets named. A shape is what an
        event names apart from its run and time, and its key covers the job and dataset
        facets (an input's or output's own facets, outputStatistics, are the run's), so
        a job whose table gets a new version every run (the version facet of a Delta or
        Iceberg table) makes one a run: kept, they would grow the graph by a row a run
        for good. The io sets stay: one per distinct set
        of edges (they do not grow by the run), and asOf walks the graph through them
        to the edges ``trimmed_edges`` holds what removed runs gave (query/as_of.py).
        Every lookup is by an index (events_shape, shapes_facets); a late event with
        the same content stores the shape and its sets again (projector/apply.py
        ``_insert_shapes``)."""
        if not keys:
            return set()
        if len(keys) > UNNAMED_PER_STATEMENT:
            raise ValueError(f"{len(keys)} candidates: a statement takes {UNNAMED_PER_STATEMENT}")
        g = self.prefix
        self.exclude_content_readers()
        gone = self.conn.execute(
            f"WITH candidates (k) AS (VALUES {', '.join('(?)' for _ in keys)})"
            f" DELETE FROM {g}shapes WHERE shape_key IN (SELECT k FROM candidates)"
            f" AND NOT EXISTS (SELECT 1 FROM {g}events e WHERE e.shape_key = {g}shapes.shape_key)"
            " RETURNING facets_key",
            list(keys),
        ).fetchall()
        sets = sorted({bytes(r[0]) for r in gone if r[0] is not None})
        named: set[bytes] = set()
        for start in range(0, len(sets), UNNAMED_PER_STATEMENT):
            chunk = sets[start : start + UNNAMED_PER_STATEMENT]
            rows = self.conn.execute(
                f"WITH candidates (k) AS (VALUES {', '.join('(?)' for _ in chunk)})"
                f" DELETE FROM {g}facet_sets WHERE facets_key IN (SELECT k FROM candidates)"
                f" AND NOT EXISTS (SELECT 1 FROM {g}shapes s"
                f" WHERE s.facets_key = {g}facet_sets.facets_key) RETURNING value_hash",
                chunk,
            ).fetchall()
            named.update(bytes(r[0]) for r in rows)
        return named

    def exclude_content_readers(self) -> None:
        """Until this transaction ends, keep other projection transactions from finding
        a facet value or a shape stored (``stored_keys``, ``load``) that this one may
        delete as unnamed. SQLite:
        nothing to do, its write lock admits one transaction at a time."""

    def delete_unnamed_values(self, hashes: Sequence[bytes]) -> None:
        """Delete those of ``hashes`` no facets or facet_sets row names. Neither table is
        indexed by value hash (an index would cost about what the values save), so the
        statement scans both once: the pass gathers the candidates of many run trims
        and hands them here at most ``UNNAMED_PER_STATEMENT`` at a time, one statement
        and one transaction each."""
        if not hashes:
            return  # and no lock to wait for (PostgreSQL: exclude_content_readers)
        if len(hashes) > UNNAMED_PER_STATEMENT:
            raise ValueError(f"{len(hashes)} candidates: a statement takes {UNNAMED_PER_STATEMENT}")
        g = self.prefix
        self.exclude_content_readers()
        marks = ", ".join("(?)" for _ in hashes)
        # The candidates once, as a table the two scans probe (a parameter each). SQLite
        # computes a NOT IN subquery once into a table of its own, so each facet table is
        # scanned once (a correlated NOT EXISTS would scan it per candidate: nothing
        # indexes value_hash). PostgreSQL has a statement of its own (postgres_graph.py).
        c = "(SELECT h FROM candidates)"
        self.conn.execute(
            f"WITH candidates (h) AS (VALUES {marks})"
            f" DELETE FROM {g}facet_values WHERE hash IN {c}"
            f" AND hash NOT IN (SELECT value_hash FROM {g}facets WHERE value_hash IN {c})"
            f" AND hash NOT IN (SELECT value_hash FROM {g}facet_sets WHERE value_hash IN {c})",
            list(hashes),
        )

    def record_run_horizon(self, horizon_key: str, now: str) -> str:
        """Move the recorded horizon up to ``horizon_key`` (never down); the horizon."""
        self.conn.execute(
            "INSERT INTO run_horizon (id, horizon_key, set_at) VALUES (1, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET horizon_key = excluded.horizon_key,"
            " set_at = excluded.set_at WHERE excluded.horizon_key > run_horizon.horizon_key",
            (horizon_key, now),
        )
        return run_horizon(self.conn) or horizon_key


def _run_facets(run_ids: Sequence[str]) -> tuple[str, list[str]]:
    """The WHERE terms, and their parameters, of the runs' facets rows: a run's own
    (entity 'run<SEP>id') and what it sent about the datasets it used
    ('run<SEP>id<SEP>input<SEP>ns<SEP>name', projector/shapes.py ``run_entity``), one
    range of the facets key per run, two index lookups."""
    terms = " OR ".join("entity = ? OR (entity >= ? AND entity < ?)" for _ in run_ids)
    params = []
    for run_id in run_ids:
        own = SEP.join(("run", run_id))
        params += [own, own + SEP, own + AFTER_SEP]
    return terms, params


def run_horizon(conn: Connection) -> str | None:
    """The recorded run horizon (an eventTime key), None before any --retain-runs pass."""
    row = conn.execute("SELECT horizon_key FROM run_horizon WHERE id = 1").fetchone()
    return None if row is None else str(row[0])
