"""Interned identities: the column tables store small integers for names.

On a column-heavy platform ``column_edges`` and ``fields`` hold millions of rows, each
naming datasets, a job and fields whose text is repeated in every row and again in
every index. They store instead the ids of ``names`` (a dataset or job identity as
sent) and ``field_names`` (docs/architecture.md#storage). Only this module knows: the
projector writes ``ColumnEdgeRow`` / ``FieldRow`` records and the read API gets them
back, named, from one SQL text for both backends. Ids are internal to a generation (a
rebuild may number them otherwise) and are never handed out.

Writes intern in the projection transaction: the names a batch needs are looked up,
the missing ones inserted (``ON CONFLICT DO NOTHING``: on PostgreSQL a concurrent
projector inserting the same name makes this one wait for its commit) and looked up
again. The ids a transaction learns are its own until it commits (it alone may roll
them back); then they join the store's ``InternCache`` for that generation, so the
next batches, which name mostly the same columns again, translate a row by dict
lookups and query nothing. A committed id stays right for the life of
the generation's tables: nothing deletes from ``names`` or ``field_names``, and a
generation's number is only used again for a rebuild's tables, which the store that
creates them starts with an empty cache (``InternCaches.keep_only``). Reads join the ids
back to names; a lookup by names searches ``names`` first, then the table's index on
those ids, so no read scans the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any, NamedTuple, TypeVar

from embrasure.store.connection import Connection
from embrasure.store.rows import INTERNED
from embrasure.store.schema import COLUMNS, plain_time_text, time_text_sql

T = TypeVar("T")
Key = tuple[Any, ...]

# A row's columns, by position: fields' (ns, name, field); column edges' eight names
# (tgt ns, name, field, src ns, name, field, job ns, name), derived, then values, their
# times at 13 to 16 (rows.ColumnEdgeRow).
_PAIR = itemgetter(0, 1)
_THIRD = itemgetter(2)
_SOURCE = itemgetter(3, 4)
_SOURCE_FIELD = itemgetter(5)
_JOB = itemgetter(6, 7)
_FIRST_KEY, _FIRST_TEXT, _LAST_KEY, _LAST_TEXT = (itemgetter(i) for i in range(13, 17))


class Ref(NamedTuple):
    """An interned reference: the table of ids and the stored column holding one."""

    table: str  # names / field_names
    column: str  # the stored column


class Named(NamedTuple):
    """How an interned table's logical columns are read: each is ``alias.column``,
    ``e`` being the table itself and every other alias a ``Ref`` joined on its id."""

    refs: dict[str, Ref]  # alias → what it joins
    columns: dict[str, tuple[str, str]]  # logical column → (alias, column)
    shown: dict[str, str]  # a column read by an expression instead

    def expression(self, column: str) -> str:
        return self.shown.get(column) or ".".join(self.columns[column])


def _named(
    refs: dict[str, Ref],
    names: dict[str, tuple[str, str]],
    table: str,
    shown: dict[str, str] | None = None,
) -> Named:
    keys, values = COLUMNS[table]
    return Named(refs, {c: names.get(c, ("e", c)) for c in keys + values}, shown or {})


# Column edges' times: a text is stored NULL when it is the key's plain text (the text
# of most of them), schema.time_text_sql.
_PLAIN_TEXTS = {
    f"{end}_text": time_text_sql(f"e.{end}_key", f"e.{end}_text") for end in ("first", "last")
}


NAMED: dict[str, Named] = {
    "column_edges": _named(
        {
            "t": Ref("names", "tgt"),
            "tf": Ref("field_names", "tgt_field"),
            "s": Ref("names", "src"),
            "sf": Ref("field_names", "src_field"),
            "j": Ref("names", "job"),
        },
        {
            "tgt_ns": ("t", "ns"),
            "tgt_name": ("t", "name"),
            "tgt_field": ("tf", "field"),
            "src_ns": ("s", "ns"),
            "src_name": ("s", "name"),
            "src_field": ("sf", "field"),
            "job_ns": ("j", "ns"),
            "job_name": ("j", "name"),
        },
        "column_edges",
        _PLAIN_TEXTS,
    ),
    "fields": _named(
        {"d": Ref("names", "ds"), "f": Ref("field_names", "field")},
        {"ns": ("d", "ns"), "name": ("d", "name"), "field": ("f", "field")},
        "fields",
    ),
}
assert set(NAMED) == set(INTERNED)


def named_sql(
    prefix: str, table: str, picked: Sequence[str], match: Sequence[str], rows: int
) -> str:
    """SELECT of the logical ``picked`` columns of an interned table whose ``match``
    columns equal one of ``rows`` VALUES rows (every row, in key order, when ``match``
    is empty). The joins are written in loop order (``CROSS JOIN``, see sql.py): the
    VALUES, the names they match, the table by its index on those ids, then the names
    of the rest."""
    named = NAMED[table]
    where = {c: i for i, c in enumerate(match)}
    matched = {named.columns[c][0] for c in match} - {"e"}
    wanted = {named.columns[c][0] for c in picked} - {"e"} - matched
    joins: list[str] = []
    if match:
        marks = "(" + ", ".join("?" for _ in match) + ")"
        joins.append(f"(VALUES {', '.join(marks for _ in range(rows))}) AS v")
        for alias in sorted(matched):
            on = " AND ".join(
                f"{alias}.{column} = v.column{where[c] + 1}"
                for c, (a, column) in named.columns.items()
                if a == alias and c in where
            )
            joins.append(f"{prefix}{named.refs[alias].table} AS {alias} ON {on}")
        by_id = [f"e.{named.refs[a].column} = {a}.id" for a in sorted(matched)]
        by_id += [
            f"{named.expression(c)} = v.column{i + 1}"
            for c, i in where.items()
            if named.columns[c][0] == "e"
        ]
        joins.append(f"{prefix}{table} AS e ON {' AND '.join(by_id)}")
    else:
        joins.append(f"{prefix}{table} AS e")
    for alias in sorted(wanted):
        ref = named.refs[alias]
        joins.append(f"{prefix}{ref.table} AS {alias} ON {alias}.id = e.{ref.column}")
    select = ", ".join(named.expression(c) for c in picked)
    sql = f"SELECT {select} FROM " + " CROSS JOIN ".join(joins)
    if not match:
        sql += " ORDER BY " + ", ".join(named.expression(c) for c in COLUMNS[table][0])
    return sql


def select_named(
    conn: Connection,
    prefix: str,
    table: str,
    picked: Sequence[str],
    match: Sequence[str],
    values: Iterable[Sequence[object]],
    make: Callable[[Any], T],
    max_params: int,
) -> list[T]:
    """``named_sql`` run over ``values``, up to ``max_params`` parameters a statement."""
    if not match:
        return [make(r) for r in conn.execute(named_sql(prefix, table, picked, (), 0))]
    wanted = list(dict.fromkeys(tuple(v) for v in values))
    per_query = max(1, max_params // len(match))
    out: list[T] = []
    for start in range(0, len(wanted), per_query):
        chunk = wanted[start : start + per_query]
        sql = named_sql(prefix, table, picked, match, len(chunk))
        out.extend(make(r) for r in conn.execute(sql, [x for key in chunk for x in key]))
    return out


def distinct_named(conn: Connection, prefix: str, table: str, picked: Sequence[str]) -> list[Key]:
    """The distinct values of logical ``picked`` columns, sorted: distinct ids first
    (ids and names are one to one), then their names."""
    named = NAMED[table]
    if set(picked) & named.shown.keys():
        raise ValueError(f"distinct values of {sorted(named.shown)} are not read")
    aliases = sorted({named.columns[c][0] for c in picked} - {"e"})
    inner = sorted(
        {named.refs[a].column for a in aliases}
        | {named.columns[c][1] for c in picked if named.columns[c][0] == "e"}
    )
    joins = [f"(SELECT DISTINCT {', '.join(inner)} FROM {prefix}{table}) AS e"]
    for alias in aliases:
        ref = named.refs[alias]
        joins.append(f"{prefix}{ref.table} AS {alias} ON {alias}.id = e.{ref.column}")
    listed = ", ".join(".".join(named.columns[c]) for c in picked)
    sql = f"SELECT {listed} FROM " + " CROSS JOIN ".join(joins) + f" ORDER BY {listed}"
    return [tuple(r) for r in conn.execute(sql)]


class InternCache:
    """One generation's committed ids, kept across projection transactions."""

    # Enough for every column a large platform names; past it the cache starts over
    # rather than grow without bound (ids are read again from the tables as needed).
    LIMIT = 1_000_000

    def __init__(self) -> None:
        self.names: dict[Key, int] = {}
        self.fields: dict[str, int] = {}  # a field's name → field_names.id
        # Rows as stored of the tables in KEPT, known to be in them: not inserted again.
        self.kept: dict[str, set[Key]] = {}

    def add(
        self,
        names: dict[Key, int],
        fields: dict[str, int],
        kept: dict[str, set[Key]],
    ) -> None:
        """What a transaction learned, once it has committed."""
        known = sum(len(rows) for rows in self.kept.values())
        if max(len(self.names) + len(names), known) > self.LIMIT:
            self.names, self.fields, self.kept = {}, {}, {}
        self.names.update(names)
        self.fields.update(fields)
        for table, rows in kept.items():
            self.kept.setdefault(table, set()).update(rows)


# Tables whose rows are only ever inserted, and never deleted while their generation
# lives (run retention deletes runs, shapes and values, never these): a row known to be
# in one need not be inserted again: a job's later shapes name the fields its first
# stored. (On bench/query.py's platform, every event a new job, it spares little: of the
# 29.1 fields rows an event at scale 0.3, 1.2 were known; measured 2026-12-08.)
KEPT = frozenset({"fields", "datasets"})


class InternCaches:
    """A store's caches, one per generation prefix (dict operations are atomic under
    the GIL, so projection threads may share them)."""

    def __init__(self) -> None:
        self._caches: dict[str, InternCache] = {}

    def of(self, prefix: str) -> InternCache:
        return self._caches.setdefault(prefix, InternCache())

    def forget(self, prefix: str) -> None:
        """Called when a generation's tables are dropped."""
        self._caches.pop(prefix, None)

    def keep_only(self, prefix: str) -> None:
        """Called when a rebuild creates tables: ``prefix`` is the served generation's,
        and every other generation's tables are new (or a crashed rebuild's, dropped)."""
        self._caches = {p: c for p, c in self._caches.items() if p == prefix}


class Interner:
    """One projection transaction's ids: names → ids, inserting the missing ones. The
    ids it learns reach ``cache`` only through ``committed``."""

    def __init__(
        self, conn: Connection, prefix: str, max_params: int, cache: InternCache | None = None
    ) -> None:
        self.conn = conn
        self.prefix = prefix
        self.max_params = max_params
        self.cache = InternCache() if cache is None else cache
        # Learned in this transaction, not yet committed.
        self._names: dict[Key, int] = {}
        self._fields: dict[str, int] = {}
        self._kept: dict[str, set[Key]] = {}

    def committed(self) -> None:
        """The transaction committed: what it learned is true for later ones too."""
        self.cache.add(self._names, self._fields, self._kept)
        self._names, self._fields, self._kept = {}, {}, {}

    def unseen(self, table: str, rows: Sequence[Key]) -> list[Key]:
        """Of rows (as stored) about to be inserted if missing, those not known to be in
        ``table`` already (a table of KEPT; any other's are all returned)."""
        if table not in KEPT:
            return list(rows)
        known = self.cache.kept.get(table, set())
        learned = self._kept.setdefault(table, set())
        # Set operations, not a loop: a transaction of the platform offers ~170,000 fields
        # (their order does not matter: a batch of inserts of missing rows).
        out = set(rows).difference(known, learned)
        learned.update(out)
        return list(out)

    def _ids(self, table: str, wanted: set[Any], create: bool) -> dict[Any, int]:
        """The ids of ``wanted`` (those that exist, unless ``create``), keyed by name: an
        identity's ``(ns, name)``, a field's name itself."""
        shared: dict[Any, int]
        known: dict[Any, int]
        columns: tuple[str, ...]
        if table == "names":
            shared, known, columns = self.cache.names, self._names, ("ns", "name")
        else:
            shared, known, columns = self.cache.fields, self._fields, ("field",)
        out = {k: shared[k] for k in wanted if k in shared}
        missing = sorted(k for k in wanted if k not in out and k not in known)
        out.update((k, known[k]) for k in wanted if k in known)
        if not missing:
            return out
        width = len(columns)
        listed = ", ".join(columns)
        picked = ", ".join(f"v.column{i + 1}" for i in range(width))
        match = " AND ".join(f"t.{c} = v.column{i + 1}" for i, c in enumerate(columns))
        per_query = max(1, self.max_params // width)
        row_marks = "(" + ", ".join("?" for _ in columns) + ")"
        for start in range(0, len(missing), per_query):
            chunk = missing[start : start + per_query]
            values = "VALUES " + ", ".join(row_marks for _ in chunk)
            params = [x for key in chunk for x in key] if width > 1 else chunk
            if create:
                # Only the names not there yet: PostgreSQL takes an identity value for
                # every row offered, even one the conflict then skips. Sorted, so two
                # projectors wait for each other's new names in one order. The WHERE
                # also keeps SQLite from reading ``SELECT … ON CONFLICT`` as a join.
                self.conn.execute(
                    f"INSERT INTO {self.prefix}{table} ({listed}) SELECT {picked}"
                    f" FROM ({values}) AS v WHERE NOT EXISTS (SELECT 1 FROM"
                    f" {self.prefix}{table} AS t WHERE {match})"
                    f" ON CONFLICT ({listed}) DO NOTHING",
                    params,
                )
            found = self.conn.execute(
                f"SELECT {picked}, t.id FROM ({values}) AS v"
                f" CROSS JOIN {self.prefix}{table} AS t ON {match}",
                params,
            )
            if width > 1:
                learned = {tuple(r[:-1]): int(r[-1]) for r in found}
            else:
                learned = {r[0]: int(r[1]) for r in found}
            known.update(learned)
            out.update(learned)
        return out

    # The per-row work below is done by C loops (map, zip, set) rather than Python ones:
    # a transaction of bench/query.py's platform interns ~150,000 column edges and
    # ~170,000 fields inside the write lock. Measured at scale 0.3 (2026-12-08): a field
    # row 3.2 -> 1.7 us, a column edge 3.7 -> 2.7 us; the projector pair 1,250 -> 1,340
    # events/s (three alternated runs each).
    def stored(self, table: str, rows: Sequence[Key], create: bool = True) -> list[Key]:
        """Rows of ``table`` by name → as stored, their names interned; with ``create``
        false, keys (to delete) → as stored, one naming something never interned left
        out (nothing stores it)."""
        if table == "column_edges":
            return self._column_edges(rows, create)
        datasets = list(map(_PAIR, rows))
        fields = list(map(_THIRD, rows))
        names = self._ids("names", set(datasets), create)
        ids = self._ids("field_names", set(fields), create)
        if create:
            return list(
                zip(map(ids.__getitem__, fields), map(names.__getitem__, datasets), strict=True)
            )
        return [
            (ids[f], names[d])
            for d, f in zip(datasets, fields, strict=True)
            if d in names and f in ids
        ]

    def _column_edges(self, rows: Sequence[Key], create: bool) -> list[Key]:
        # Column by column: each of the five interned columns one map over the rows, the
        # rest taken as they are; a time's text is stored NULL when it is its key's
        # plain text (schema.time_text_sql), made once per key. (A cache of each row's
        # five ids by its eight names, kept here before, cost 3.5 us a new row: on the
        # platform every row is new.)
        targets, sources, jobs = (
            list(map(_PAIR, rows)),
            list(map(_SOURCE, rows)),
            list(map(_JOB, rows)),
        )
        target_fields, source_fields = list(map(_THIRD, rows)), list(map(_SOURCE_FIELD, rows))
        ids = self._ids("names", {*targets, *sources, *jobs}, create)
        field_ids = self._ids("field_names", {*target_fields, *source_fields}, create)
        if not create:  # keys to delete: one naming something never interned names no row
            return [
                (ids[t], field_ids[tf], ids[s], field_ids[sf], ids[j], r[8])
                for r, t, tf, s, sf, j in zip(
                    rows, targets, target_fields, sources, source_fields, jobs, strict=True
                )
                if t in ids and s in ids and j in ids and tf in field_ids and sf in field_ids
            ]
        heads = (
            map(ids.__getitem__, targets),
            map(field_ids.__getitem__, target_fields),
            map(ids.__getitem__, sources),
            map(field_ids.__getitem__, source_fields),
            map(ids.__getitem__, jobs),
        )
        first_keys, last_keys = list(map(_FIRST_KEY, rows)), list(map(_LAST_KEY, rows))
        shown = {k: plain_time_text(k) for k in {*first_keys, *last_keys} if k is not None}.get
        first_texts = [
            None if t == shown(k) else t
            for k, t in zip(first_keys, map(_FIRST_TEXT, rows), strict=True)
        ]
        last_texts = [
            None if t == shown(k) else t
            for k, t in zip(last_keys, map(_LAST_TEXT, rows), strict=True)
        ]
        values = (map(itemgetter(i), rows) for i in range(8, 13))
        return list(
            zip(*heads, *values, first_keys, first_texts, last_keys, last_texts, strict=True)
        )
