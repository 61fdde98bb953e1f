"""Reads of the delivery log and the served graph generation, for both backends.

A ``SQLReader`` lives for one request inside one read transaction, so every query of
the request sees the same snapshot (WAL readers never block the writer). Methods return
typed rows (store/rows.py); shaping them is the read API's job (embrasure/query/).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from embrasure.store.base import GraphReader, Key, Record
from embrasure.store.compression import BodyCodec
from embrasure.store.connection import Connection
from embrasure.store.facet_values import decode
from embrasure.store.interned import distinct_named, select_named
from embrasure.store.log_sql import read_body
from embrasure.store.read_rows import (
    Backlog,
    DeliveryRow,
    EventPlace,
    JobRecency,
    NamespaceRow,
    NamespaceSpan,
    OutcomeTotal,
    QuarantinedItem,
    RunUse,
    SearchHit,
    SentFacet,
    TypeCount,
)
from embrasure.store.rows import (
    INTERNED,
    SEP,
    DatasetRow,
    FacetValueRow,
    ItemRow,
    R,
    RunRow,
    maker,
    table_of,
)
from embrasure.store.run_retention import run_horizon
from embrasure.store.schema import COLUMNS
from embrasure.store.sql import MAX_PARAMS, select_records, select_where_in

DELIVERY_COLUMNS = (
    "d.seq, d.delivery_id, d.provider_key, d.idempotency_key, d.body_sha256, d.received_at,"
    " d.route, d.item_count, d.rejections, d.state"
)
KAFKA_COLUMNS = "k.topic, k.msg_partition, k.msg_offset, k.msg_key"
KAFKA_JOIN = " LEFT JOIN kafka_messages k ON k.seq = d.seq"  # route 'kafka' only
WRITER_COLUMNS = "w.kind, w.subject, w.issuer, w.token_id"
WRITER_JOIN = " LEFT JOIN delivery_writers w ON w.seq = d.seq"  # while auth is on

# The delivery state (docs/queries.md#deliveries-and-quarantine) from the log's receipt
# state and the projection's counts.
STATE_SQL = """CASE
    WHEN d.state = 'quarantined' THEN 'quarantined'
    WHEN p.seq IS NULL THEN 'accepted'
    WHEN p.projected = 0 THEN 'quarantined'
    WHEN p.quarantined = 0 THEN 'projected'
    ELSE 'partially_projected' END"""


class SQLReader(GraphReader):
    def __init__(self, conn: Connection, prefix: str, codec: BodyCodec) -> None:
        self.conn = conn
        self.g = prefix
        self.codec = codec

    # -- generic -------------------------------------------------------------------------

    def rows(
        self, table: type[R], columns: Sequence[str] = (), values: Iterable[Key] = ()
    ) -> list[R]:
        if not columns:
            keys, rest = COLUMNS[table_of(table)]
            if table_of(table) in INTERNED:
                return select_records(self.conn, self.g, table, (), ())
            head = f"SELECT {', '.join(keys + rest)} FROM {self.g}{table_of(table)}"
            make = maker(table)
            return [make(r) for r in self.conn.execute(head + " ORDER BY " + ", ".join(keys))]
        return select_records(self.conn, self.g, table, columns, values)

    def pick(
        self,
        table: Record,
        picked: Sequence[str],
        columns: Sequence[str],
        values: Iterable[Key],
    ) -> list[Key]:
        name = table_of(table)
        if name in INTERNED:
            return select_named(self.conn, self.g, name, picked, columns, values, tuple, MAX_PARAMS)
        return select_where_in(self.conn, self.g + name, picked, columns, values)

    def distinct(self, table: Record, picked: Sequence[str]) -> list[Key]:
        if table_of(table) in INTERNED:
            return distinct_named(self.conn, self.g, table_of(table), picked)
        listed = ", ".join(picked)
        sql = f"SELECT DISTINCT {listed} FROM {self.g}{table_of(table)} ORDER BY {listed}"
        return [tuple(r) for r in self.conn.execute(sql)]

    def facet_values(self, hashes: Iterable[bytes]) -> dict[bytes, str]:
        rows = select_records(self.conn, self.g, FacetValueRow, ("hash",), [(h,) for h in hashes])
        return {bytes(r.hash): decode(r.encoding, r.value) for r in rows}

    # -- deliveries ----------------------------------------------------------------------

    def delivery(self, delivery_id: str) -> DeliveryRow | None:
        row = self.conn.execute(
            f"SELECT {DELIVERY_COLUMNS}, {STATE_SQL}, p.projected, p.quarantined,"
            f" p.edges_created, p.kinds, {KAFKA_COLUMNS}, {WRITER_COLUMNS} FROM deliveries d"
            f" LEFT JOIN {self.g}deliveries p ON p.seq = d.seq{KAFKA_JOIN}{WRITER_JOIN}"
            " WHERE d.delivery_id = ?",
            (delivery_id,),
        ).fetchone()
        return None if row is None else DeliveryRow.of(row)

    def deliveries(
        self,
        provider_key: str | None,
        state: str | None,
        before_seq: int | None,
        limit: int,
        writer: str | None = None,
    ) -> list[DeliveryRow]:
        where: list[str] = []
        params: list[Any] = []
        if provider_key is not None:
            where.append("d.provider_key = ?")
            params.append(provider_key)
        if writer is not None:
            where.append("w.subject = ?")
            params.append(writer)
        if state is not None:
            where.append(f"({STATE_SQL}) = ?")
            params.append(state)
        if before_seq is not None:
            where.append("d.seq < ?")
            params.append(before_seq)
        sql = (
            f"SELECT {DELIVERY_COLUMNS}, {STATE_SQL}, p.projected, p.quarantined,"
            f" p.edges_created, p.kinds, {KAFKA_COLUMNS}, {WRITER_COLUMNS} FROM deliveries d"
            f" LEFT JOIN {self.g}deliveries p ON p.seq = d.seq{KAFKA_JOIN}{WRITER_JOIN}"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY d.seq DESC LIMIT ?"
        )
        return [DeliveryRow.of(r) for r in self.conn.execute(sql, [*params, limit])]

    def items(self, seq: int) -> list[ItemRow]:
        return [
            ItemRow._make(r)
            for r in self.conn.execute(
                f"SELECT seq, idx, kind, outcome, reason, retriable, warnings"
                f" FROM {self.g}items WHERE seq = ? ORDER BY idx",
                (seq,),
            )
        ]

    def quarantined(self, before: tuple[int, int] | None, limit: int) -> list[QuarantinedItem]:
        sql = (
            f"SELECT d.delivery_id, i.idx, i.kind, i.reason, d.received_at, i.seq"
            f" FROM {self.g}items i JOIN deliveries d ON d.seq = i.seq"
            " WHERE i.outcome = 'quarantined'"
        )
        params: list[Any] = []
        if before is not None:
            sql += " AND (i.seq < ? OR (i.seq = ? AND i.idx > ?))"
            params += [before[0], before[0], before[1]]
        sql += " ORDER BY i.seq DESC, i.idx ASC LIMIT ?"
        return [QuarantinedItem._make(r) for r in self.conn.execute(sql, [*params, limit])]

    def body(self, seq: int) -> bytes | None:
        return read_body(self.conn, self.codec, seq)

    def outcome_totals(self) -> list[OutcomeTotal]:
        sql = (
            "SELECT CASE WHEN projected = 0 THEN 'quarantined' WHEN quarantined = 0"
            " THEN 'projected' ELSE 'partially_projected' END AS st,"
            f" COUNT(*), SUM(projected), SUM(quarantined) FROM {self.g}deliveries GROUP BY st"
        )
        return [OutcomeTotal._make(r) for r in self.conn.execute(sql)]

    def backlog(self) -> Backlog:
        # Two rows of the running totals (log_sql.record_totals), and the first delivery past
        # the position with an item to project, from the deliveries_backlog index: no
        # scan of the backlog, however long it is.
        position = f"(SELECT seq FROM {self.g}position)"
        row = self.conn.execute(
            "SELECT t.items - COALESCE(p.items, 0), t.pending - COALESCE(p.pending, 0),"
            " t.rejected - COALESCE(p.rejected, 0)"
            " FROM (SELECT items, pending, rejected FROM delivery_totals"
            " ORDER BY seq DESC LIMIT 1) AS t"
            f" LEFT JOIN delivery_totals p ON p.seq = {position}"
        ).fetchone()
        oldest = self.conn.execute(
            f"SELECT received_at FROM deliveries WHERE seq > {position}"
            " AND item_count > invalid_item_count ORDER BY seq LIMIT 1"
        ).fetchone()
        items, pending, rejected = (0, 0, 0) if row is None else (int(v) for v in row)
        return Backlog(pending, items, None if oldest is None else oldest[0], rejected)

    def recent_run_ids(self, limit: int) -> list[str]:
        # Walks the eventTime index backwards, so it reads about ``limit`` rows.
        rows = self.conn.execute(
            f"SELECT run_id FROM {self.g}events WHERE run_id IS NOT NULL"
            " ORDER BY time_key DESC LIMIT ?",
            (limit,),
        )
        return list(dict.fromkeys(r[0] for r in rows))

    # -- graph -----------------------------------------------------------------------------

    def run_horizon(self) -> str | None:
        return run_horizon(self.conn)

    def runs_of_job(
        self, job: tuple[str, str], before: tuple[str, str] | None, limit: int
    ) -> list[RunRow]:
        keys, rest = COLUMNS["runs"]
        sql = f"SELECT {', '.join(keys + rest)} FROM {self.g}runs WHERE job_ns = ? AND job_name = ?"
        params: list[Any] = list(job)
        if before is not None:
            sql += " AND (latest_key < ? OR (latest_key = ? AND run_id < ?))"
            params += [before[0], before[0], before[1]]
        sql += " ORDER BY latest_key DESC, run_id DESC LIMIT ?"
        return [RunRow._make(r) for r in self.conn.execute(sql, [*params, limit])]

    def sent_facets(self, owners: Sequence[tuple[str, str]]) -> list[SentFacet]:
        g = self.g
        out: list[SentFacet] = []
        per_query = MAX_PARAMS // 2
        for start in range(0, len(owners), per_query):
            chunk = owners[start : start + per_query]
            # From each owner, the run's events (events_run), their shapes, and the set
            # rows under the owner's entity (facet_sets' key): a run's few events, not a
            # scan of the sets.
            sql = (
                "SELECT v.column1, v.column2, f.name, f.value_hash, MAX(e.time_key)"
                f" FROM (VALUES {', '.join('(?, ?)' for _ in chunk)}) AS v"
                f" CROSS JOIN {g}events AS e ON e.run_id = v.column1"
                f" CROSS JOIN {g}shapes AS s ON s.shape_key = e.shape_key"
                f" CROSS JOIN {g}facet_sets AS f"
                " ON f.facets_key = s.facets_key AND f.entity = v.column2"
                " GROUP BY v.column1, v.column2, f.name, f.value_hash"
            )
            rows = self.conn.execute(sql, [x for owner in chunk for x in owner])
            out.extend(SentFacet._make(r) for r in rows)
        return out

    def runs_of_dataset(
        self,
        dataset: tuple[str, str],
        direction: str,
        before: tuple[str, str, str] | None,
        limit: int,
    ) -> list[RunUse]:
        sql = (
            f"SELECT run_key, run_id, direction, version, version_key FROM {self.g}run_io"
            " WHERE ds_ns = ? AND ds_name = ? AND direction = ?"
        )
        params: list[Any] = [*dataset, direction]
        if before is not None:
            key, run_id, before_direction = before
            # Strictly after (key, run_id, before_direction) descending: this direction's
            # row of that same run comes after it when the direction sorts lower.
            same = "<=" if direction < before_direction else "<"
            # ``run_key <= ?`` bounds the index range; the OR alone would not.
            sql += f" AND run_key <= ? AND (run_key < ? OR run_id {same} ?)"
            params += [key, key, run_id]
        sql += " ORDER BY run_key DESC, run_id DESC LIMIT ?"
        return [RunUse._make(r) for r in self.conn.execute(sql, [*params, limit])]

    def page(
        self,
        table: type[R],
        after: Key | None,
        limit: int,
        namespace: str | None = None,
        contains: str | None = None,
    ) -> list[R]:
        name = table_of(table)
        keys, rest = COLUMNS[name]
        clauses: list[str] = []
        args: list[Any] = []
        if namespace is not None:
            clauses.append("ns = ?")
            args.append(namespace)
        if contains:
            clauses.append("instr(lower(name), lower(?)) > 0")
            args.append(contains)
        if after is not None:
            clauses.append(f"({', '.join(keys)}) > ({', '.join('?' for _ in keys)})")
            args += list(after)
        sql = (
            f"SELECT {', '.join(keys + rest)} FROM {self.g}{name}"
            + (" WHERE " + " AND ".join(clauses) if clauses else "")
            + f" ORDER BY {', '.join(keys)} LIMIT ?"
        )
        make = maker(table)
        return [make(r) for r in self.conn.execute(sql, [*args, limit])]

    # -- listings and search ---------------------------------------------------------------

    def jobs_by_recency(
        self,
        namespace: str | None,
        skip_namespaces: Collection[str],
        skip_jobs: Collection[tuple[str, str]],
        states: Collection[str | None] | None,
        offset: int,
        limit: int,
    ) -> tuple[int, list[JobRecency]]:
        g = self.g
        clauses, args = [], []
        if namespace is not None:
            clauses.append("j.ns = ?")
            args.append(namespace)
        if skip_namespaces:
            clauses.append(f"j.ns NOT IN ({', '.join('?' for _ in skip_namespaces)})")
            args += list(skip_namespaces)
        for job in skip_jobs:
            clauses.append("NOT (j.ns = ? AND j.name = ?)")
            args += list(job)
        of_job = f"FROM {g}runs r WHERE r.job_ns = j.ns AND r.job_name = j.name"
        jobs = f"SELECT j.ns, j.name, (SELECT MAX(r.latest_key) {of_job}) AS latest"
        if states is not None:
            jobs += f", (SELECT r.state {of_job} ORDER BY r.latest_key DESC, r.run_id DESC LIMIT 1)"
            jobs += " AS state"
        filters = " WHERE " + " AND ".join(clauses) if clauses else ""
        jobs += f" FROM {g}jobs j{filters}"
        if states is None:
            count, where = f"SELECT COUNT(*) FROM {g}jobs j{filters}", ""
        else:
            # Only jobs with runs, whose latest run's state is one of ``states``.
            known = [s for s in states if s is not None]
            either = [f"state IN ({', '.join('?' for _ in known)})"] if known else []
            either += ["state IS NULL"] if None in states else []
            where = f" WHERE latest IS NOT NULL AND ({' OR '.join(either) or '0 = 1'})"
            args += known
            count = f"SELECT COUNT(*) FROM ({jobs}) AS x{where}"
        (total,) = self.conn.execute(count, args).fetchone()
        sql = (
            f"SELECT ns, name, latest FROM ({jobs}) AS x{where}"
            " ORDER BY latest DESC NULLS LAST, ns, name LIMIT ? OFFSET ?"
        )
        rows = self.conn.execute(sql, [*args, limit, offset])
        return int(total), [JobRecency._make(r) for r in rows]

    def sent_datasets(self, identities: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        # Sent as a dataset: an edge names it, or it has facets of its own — not only
        # named by another's symlinks facet (whose TABLE ends are datasets rows too:
        # projector/shapes.py).
        g, names = self.g, ("ns", "name")
        sent = (
            f"(EXISTS (SELECT 1 FROM {g}edges e WHERE e.ds_ns = t.ns AND e.ds_name = t.name)"
            f" OR EXISTS (SELECT 1 FROM {g}facets f"
            f" WHERE f.entity = 'dataset{SEP}' || t.ns || '{SEP}' || t.name))"
        )
        found = select_where_in(self.conn, f"{g}datasets", names, names, identities, sent)
        return {(str(ns), str(name)) for ns, name in found}

    def datasets_in(
        self, namespace: str, skip: Collection[tuple[str, str]], offset: int, limit: int
    ) -> tuple[int, list[DatasetRow]]:
        sql = f" FROM {self.g}datasets d WHERE d.ns = ?"
        args: list[Any] = [namespace]
        for ns, name in skip:
            sql += " AND NOT (d.ns = ? AND d.name = ?)"
            args += [ns, name]
        (total,) = self.conn.execute("SELECT COUNT(*)" + sql, args).fetchone()
        page = self.conn.execute(
            f"SELECT d.ns, d.name{sql} ORDER BY d.name LIMIT ? OFFSET ?", [*args, limit, offset]
        )
        return int(total), [DatasetRow._make(r) for r in page]

    def namespace_spans(self) -> list[NamespaceSpan]:
        sql = (
            "SELECT ns, MIN(first_key), MAX(last_key) FROM ("
            f"SELECT job_ns AS ns, first_key, last_key FROM {self.g}edges"
            f" UNION ALL SELECT ds_ns, first_key, last_key FROM {self.g}edges) AS e"
            " GROUP BY ns ORDER BY ns"
        )
        return [NamespaceSpan._make(r) for r in self.conn.execute(sql)]

    def namespaces(self, after: str | None, limit: int) -> list[NamespaceRow]:
        sql = (
            f"SELECT ns, SUM(d), SUM(j) FROM (SELECT ns, 1 AS d, 0 AS j FROM {self.g}datasets"
            f" UNION ALL SELECT ns, 0, 1 FROM {self.g}jobs) AS n"
            + (" WHERE ns > ?" if after is not None else "")
            + " GROUP BY ns ORDER BY ns LIMIT ?"
        )
        args: list[Any] = [after] if after is not None else []
        return [NamespaceRow._make(r) for r in self.conn.execute(sql, [*args, limit])]

    def search(self, q: str, limit: int) -> list[SearchHit]:
        # SQLite's lower() folds ASCII only: fold the query the same way, so the match is
        # the same whatever the case of ASCII letters and exact for everything else.
        folded = "".join(c.lower() if c.isascii() else c for c in q)
        rank = (
            "CASE WHEN lower(text) = :q THEN 0"
            " WHEN substr(lower(text), 1, length(:q)) = :q THEN 1 ELSE 2 END"
        )
        sql = f"""
            SELECT kind, ns, name, field, {rank} AS rank FROM (
                SELECT 'dataset' AS kind, ns, name, NULL AS field, name AS text
                    FROM {self.g}datasets WHERE instr(lower(name), :q) > 0
                UNION ALL SELECT 'job', ns, name, NULL, name
                    FROM {self.g}jobs WHERE instr(lower(name), :q) > 0
                UNION ALL SELECT 'field', d.ns, d.name, n.field, n.field
                    FROM {self.g}field_names n CROSS JOIN {self.g}fields f ON f.field = n.id
                    CROSS JOIN {self.g}names d ON d.id = f.ds
                    WHERE instr(lower(n.field), :q) > 0
            ) AS m ORDER BY rank, length(text), kind, ns, name, field LIMIT :limit"""
        return [SearchHit._make(r) for r in self.conn.execute(sql, {"q": folded, "limit": limit})]

    def events(
        self,
        after_key: str | None,
        before_key: str | None,
        cursor: Key | None,
        limit: int,
        descending: bool = False,
        offset: int = 0,
    ) -> list[EventPlace]:
        clauses, args = _time_range(after_key, before_key)
        if cursor is not None:
            clauses.append(f"(e.time_key, e.event_id) {'<' if descending else '>'} (?, ?)")
            args += list(cursor)
        order = " DESC" if descending else ""
        sql = (
            f"SELECT e.event_id, e.time_key, e.time_text, e.seq, e.idx, d.route"
            f" FROM {self.g}events e JOIN deliveries d ON d.seq = e.seq"
            + (" WHERE " + " AND ".join(clauses) if clauses else "")
            + f" ORDER BY e.time_key{order}, e.event_id{order} LIMIT ? OFFSET ?"
        )
        return [EventPlace._make(r) for r in self.conn.execute(sql, [*args, limit, offset])]

    def event_type_counts(self, after_key: str, before_key: str) -> list[TypeCount]:
        clauses, args = _time_range(after_key, before_key)
        sql = (
            f"SELECT e.event_type, COUNT(*) FROM {self.g}events e WHERE "
            + " AND ".join(clauses)
            + " GROUP BY e.event_type"
        )
        return [TypeCount._make(r) for r in self.conn.execute(sql, args)]

    def first_seen_keys(self, kind: str) -> list[str]:
        g = self.g
        # Each source of a time grouped first, then joined to the rows counted: a pass
        # over the edges, the runs (job) or the facets (dataset), and over the events of
        # JobEvent shapes only.
        if kind == "job":
            sql = (
                f"SELECT MIN(k.key) FROM {g}jobs j LEFT JOIN ("
                f"SELECT job_ns AS ns, job_name AS name, MIN(first_key) AS key FROM {g}edges"
                " WHERE first_key <> '' GROUP BY job_ns, job_name"
                " UNION ALL SELECT job_ns, job_name,"
                " MIN(CASE WHEN started_key <> '' THEN started_key ELSE latest_key END)"
                f" FROM {g}runs GROUP BY job_ns, job_name"
                f" UNION ALL SELECT s.job_ns, s.job_name, MIN(e.time_key) FROM {g}shapes s"
                f" JOIN {g}events e ON e.shape_key = s.shape_key WHERE s.kind = 'JobEvent'"
                " GROUP BY s.job_ns, s.job_name"
                ") k ON k.ns = j.ns AND k.name = j.name AND k.key <> ''"
                " GROUP BY j.ns, j.name"
            )
        else:
            sql = (
                f"SELECT MIN(k.key) FROM {g}datasets d LEFT JOIN ("
                f"SELECT ds_ns AS ns, ds_name AS name, MIN(first_key) AS key FROM {g}edges"
                " WHERE first_key <> '' GROUP BY ds_ns, ds_name"
                " UNION ALL SELECT d.ns, d.name, MIN(f.value_key)"
                f" FROM {g}datasets d JOIN {g}facets f"
                f" ON f.entity = 'dataset{SEP}' || d.ns || '{SEP}' || d.name"
                " WHERE f.value_key <> '' GROUP BY d.ns, d.name"
                " UNION ALL SELECT b_ns, b_name, MIN(first_key)"
                f" FROM {g}links WHERE first_key <> '' GROUP BY b_ns, b_name"
                ") k ON k.ns = d.ns AND k.name = d.name"
                " GROUP BY d.ns, d.name"
            )
        return [r[0] or "" for r in self.conn.execute(sql)]

    def count_events(self, after_key: str | None, before_key: str | None) -> int:
        clauses, args = _time_range(after_key, before_key)
        where = " WHERE " + " AND ".join(clauses) if clauses else ""
        row = self.conn.execute(f"SELECT COUNT(*) FROM {self.g}events e{where}", args).fetchone()
        return int(row[0]) if row else 0


def _time_range(after_key: str | None, before_key: str | None) -> tuple[list[str], list[Any]]:
    """The WHERE clauses of ``after_key <= time_key < before_key`` (either end open)."""
    clauses: list[str] = []
    args: list[Any] = []
    if after_key is not None:
        clauses.append("e.time_key >= ?")
        args.append(after_key)
    if before_key is not None:
        clauses.append("e.time_key < ?")
        args.append(before_key)
    return clauses, args
