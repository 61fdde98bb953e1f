"""Column lineage derived from a job's SQL, for outputs that declare none
(docs/projection.md#column-lineage-derived-from-sql).

When an output dataset of an event carries no ``columnLineage`` facet and the job carries a
``sql`` facet (SQLJobFacet 1-1-0: ``query``, optional ``dialect``), the query is parsed
with openlineage-sql (the OpenLineage project's own Rust parser, the one its Airflow and
Spark integrations use) and the column mappings it finds become facts marked
``derived="sql"``. A declared fact for the same edge always wins (column_lineage.merge_edges).

The reading is a pure function of the event, like every projection stage:

- Dialect: the facet's ``dialect``; else the scheme of the event's dataset namespaces and
  ``dataSource`` URIs, through ``DIALECTS`` (one distinct answer, else generic).
- Tables: each table the parser names is matched to the SAME event's datasets by name —
  exact, then by trailing components (``public.orders`` matches ``shop.public.orders``),
  case-sensitive before case-insensitive, TABLE symlink names counting as names. Targets are
  matched among the outputs, sources among the inputs
  (docs/projection.md#column-lineage-derived-from-sql). A name matching several datasets is
  never guessed: a warning, and no edge through it.
- Target: the query's one written table (``descendant.origin`` when the parser gives one);
  a query that writes no table (a dbt model's compiled SELECT) feeds the event's output
  when it has exactly one. A query writing several tables is not attributed.
- Columns: a name the parser invents for an unnamed expression (``_0``) is dropped; where
  the dataset has a ``schema`` facet, a column must be in it (exact, or the one
  case-insensitive match) — the parser attributes an unqualified column of a join to the
  first table and names the SELECT's columns, not an INSERT's column list, so the schema
  is the check on both.
- Class: openlineage-sql 1.54.0 gives no transformation metadata (its ColumnMeta has only
  ``name`` and ``origin``), so every derived mapping is "no metadata at all" → expression.

Anything that goes wrong — unparseable SQL, the parser raising or panicking — is a warning
on the item, never a quarantine. Parsing is the projector's most expensive per-content
step, so results are memoised per (query, dialect) in a bounded LRU (``parse_sql``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import openlineage_sql

from embrasure.model import ColumnFact, DatasetFacts, DatasetId
from embrasure.projector.column_lineage import schema_fields

DERIVED = "sql"  # ColumnFact.derived, the API's edge "derived"
GENERIC = "generic"

# Dataset namespace schemes (OpenLineage naming conventions, spec/naming-conventions.md,
# "Dataset Naming": postgres://, redshift://, snowflake://, bigquery, mysql://,
# mssql://, sqlserver:// (Azure Synapse), trino://, hive://, awsathena://, dbfs://,
# unitycatalog://, fabric-warehouse://) and SQLJobFacet ``dialect`` strings seen from
# producers, mapped to the names openlineage_sql.parse accepts (bigquery, databricks,
# snowflake, postgres, redshift, hive, mysql, mssql, sqlite, ansi, generic; it reads any
# other name as generic). Engines it has no dialect for (Trino, Presto, Athena, DB2,
# Oracle, Teradata…) use generic, which accepts ANSI quoting and most syntax.
DIALECTS: dict[str, str] = {
    "postgres": "postgres",
    "postgresql": "postgres",
    "redshift": "redshift",
    "snowflake": "snowflake",
    "bigquery": "bigquery",
    "mysql": "mysql",
    "mariadb": "mysql",
    "mssql": "mssql",
    "sqlserver": "mssql",
    "tsql": "mssql",
    "fabric-warehouse": "mssql",  # Microsoft Fabric Warehouse speaks T-SQL
    "hive": "hive",
    "databricks": "databricks",
    "spark": "databricks",  # Spark SQL: Databricks SQL is its dialect
    "sparksql": "databricks",
    "dbfs": "databricks",
    "unitycatalog": "databricks",
    "sqlite": "sqlite",
    "ansi": "ansi",
    "generic": GENERIC,
    "trino": GENERIC,
    "presto": GENERIC,
    "awsathena": GENERIC,  # Athena runs Trino/Presto SQL
    "athena": GENERIC,
}

# Past this many characters a query is not parsed (a warning says so). Parsing is about
# linear in the text — measured here 0.13 ms for a 400-character query
# (bench/results/sql_lineage.md), 3.9 ms for a 4.7 KB 200-column INSERT, 116 ms for 237 KB
# of 50 of them — and facet data may be 1 MiB per event, so one hostile or generated
# query could otherwise cost ~0.5 s of the projector's time for every distinct text.
# 200,000 characters (~100 ms) is far above hand-written or dbt-compiled models.
MAX_SQL_CHARS = 200_000

# Distinct (query, dialect) parse results remembered per process: as many as the
# pipeline's per-content memo (pipeline.MEMO_SIZE, a platform's job count), since a job's
# SQL usually repeats in every run while its dataset facets (row counts…) do not. An entry
# is small (table and column names, a 16-byte digest for the key): measured 3.8 KB for a
# 10-column INSERT over a join, so 4,096 entries are ~16 MB for such queries.
CACHE_SIZE = 4096

# Dialects whose catalogs store identifiers in lower case whatever the query's spelling:
# Hive's metastore does, so a column written ``transactionTYPe`` is ``transactiontype``
# (the Hive integration's own columnLineage facets say so). Elsewhere the spelling is kept
# unless a schema facet spells it (folding depends on quoting, which the parser hides).
LOWER_CASE_DIALECTS = frozenset({"hive"})

_UNNAMED = re.compile(r"_\d+")  # the parser's name for an unnamed expression: _0, _1…
_WARN_NAMES = 5  # names listed in one warning before "+N more"


@dataclasses.dataclass(frozen=True, slots=True)
class ParsedSql:
    """What the parser found, as plain data (so it can be cached and shared)."""

    out_tables: tuple[str, ...]  # qualified names, e.g. "db.schema.table"
    # (target table or None for "the written table", target column,
    #  ((source table or None, source column), ...))
    lineage: tuple[tuple[str | None, str, tuple[tuple[str | None, str], ...]], ...]
    error: str | None = None  # the query cannot be parsed: the parser's first error
    failure: str | None = None  # the parser raised: its exception


_cache: OrderedDict[tuple[bytes, str], ParsedSql] = OrderedDict()
_cache_lock = threading.Lock()  # projector threads may share the process
cache_stats = {"hits": 0, "misses": 0}


def parse_sql(query: str, dialect: str) -> ParsedSql:
    """openlineage_sql.parse of ``query``, memoised per (query, dialect) in a bounded LRU.

    Never raises: an exception of the parser (a Rust panic arrives as pyo3's
    PanicException, a BaseException) becomes ``failure``."""
    digest = hashlib.blake2b(query.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    key = (digest, dialect)
    with _cache_lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            cache_stats["hits"] += 1
            return found
    result = _parse(query, dialect)
    with _cache_lock:
        cache_stats["misses"] += 1
        _cache[key] = result
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return result


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
        cache_stats.update(hits=0, misses=0)


def _first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _parse(query: str, dialect: str) -> ParsedSql:
    try:
        meta: Any = openlineage_sql.parse([query], dialect=dialect)
        errors = list(meta.errors)
        if errors:
            return ParsedSql((), (), error=_first_line(str(errors[0].message)))
        out_tables = tuple(dict.fromkeys(str(t.qualified_name) for t in meta.out_tables))
        lineage = tuple(
            (
                _table(row.descendant.origin),
                str(row.descendant.name),
                tuple((_table(col.origin), str(col.name)) for col in row.lineage),
            )
            for row in meta.column_lineage
        )
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # a Rust panic arrives as pyo3 PanicException
        return ParsedSql((), (), failure=f"{type(exc).__name__}: {_first_line(str(exc))}")
    return ParsedSql(out_tables, lineage)


def _table(meta: Any) -> str | None:
    return None if meta is None else str(meta.qualified_name)


# -- dialect ---------------------------------------------------------------------------------


def _scheme(uri: str) -> str:
    return (uri.split("://", 1)[0] if "://" in uri else uri).strip().lower()


def dialect_of(sql_facet: Mapping[str, Any], datasets: Iterable[DatasetFacts]) -> str:
    """The openlineage_sql dialect for a query: the SQLJobFacet's ``dialect`` (any
    spelling in DIALECTS, else generic); without one, the one dialect that the datasets'
    namespace schemes and dataSource URIs agree on; generic when none or several."""
    named = sql_facet.get("dialect")
    if isinstance(named, str) and named.strip():
        return DIALECTS.get(named.strip().lower(), GENERIC)
    found: set[str] = set()
    for d in datasets:
        uris = [d.id.namespace]
        source = d.facets.get("dataSource")
        if isinstance(source, dict) and isinstance(source.get("uri"), str):
            uris.append(source["uri"])
        for uri in uris:
            dialect = DIALECTS.get(_scheme(uri))
            if dialect is not None:
                found.add(dialect)
    return found.pop() if len(found) == 1 else GENERIC


# -- matching --------------------------------------------------------------------------------


class _Names:
    """The event's datasets of one role, by every name they answer to (their own and
    their TABLE symlinks')."""

    def __init__(self, datasets: Sequence[DatasetFacts]) -> None:
        self._names: list[tuple[str, DatasetId]] = []
        for d in datasets:
            self._names.append((d.id.name, d.id))
            self._names += [(s.target.name, d.id) for s in d.symlinks if s.type == "TABLE"]

    def match(self, table: str) -> list[DatasetId]:
        """Exact name, else trailing components; case-sensitive before case-insensitive.
        The first rule that finds any dataset decides: one is a match, several ambiguous."""
        for trailing in (False, True):
            for fold in (False, True):
                want = table.casefold() if fold else table
                found = sorted(
                    {
                        ident
                        for name, ident in self._names
                        if _same(name.casefold() if fold else name, want, trailing)
                    }
                )
                if found:
                    return found
        return []


def _same(name: str, table: str, trailing: bool) -> bool:
    return name.endswith("." + table) if trailing else name == table


class _Columns:
    """A dataset's column names from its schema facet; without one, any name goes."""

    def __init__(self, d: DatasetFacts, lower: bool) -> None:
        self._lower = lower
        self._fields = set(schema_fields(d))
        self._folded: dict[str, list[str]] = {}
        for f in sorted(self._fields):
            self._folded.setdefault(f.casefold(), []).append(f)

    def spell(self, column: str) -> str | None:
        if not self._fields:
            return column.lower() if self._lower else column
        if column in self._fields:
            return column
        found = self._folded.get(column.casefold(), [])
        return found[0] if len(found) == 1 else None


def _label(d: DatasetId) -> str:
    return f"{d.namespace}:{d.name}"


def _listed(names: Iterable[str]) -> str:
    names = sorted(set(names))
    shown = ", ".join(names[:_WARN_NAMES])
    return shown + (f" (+{len(names) - _WARN_NAMES} more)" if len(names) > _WARN_NAMES else "")


# -- derivation ------------------------------------------------------------------------------


def derive(
    job_facets: Mapping[str, Any], datasets: Sequence[DatasetFacts]
) -> tuple[tuple[ColumnFact, ...], tuple[str, ...]]:
    """Column facts (``derived="sql"``) from the job's sql facet for the event's outputs
    that carry no columnLineage facet, and warnings. Sorted, so equal events give equal
    results; a function of the event alone (the cache changes only the cost)."""
    facet = job_facets.get("sql")
    if not isinstance(facet, dict) or facet.get("_deleted") is True:
        return (), ()
    query = facet.get("query")
    outputs = [d for d in datasets if d.role == "output"]
    open_outputs = {d.id for d in outputs if "columnLineage" not in d.facets}
    if not isinstance(query, str) or not query.strip() or not open_outputs:
        return (), ()
    dialect = dialect_of(facet, datasets)
    prefix = "SQL column lineage not derived"
    if len(query) > MAX_SQL_CHARS:
        return (), (
            f"{prefix}: the query is {len(query):,} characters, over the {MAX_SQL_CHARS:,} "
            "that are parsed",
        )
    parsed = parse_sql(query, dialect)
    if parsed.error is not None:
        return (), (f"{prefix}: the query cannot be parsed as {dialect} SQL: {parsed.error}",)
    if parsed.failure is not None:
        return (), (f"{prefix}: the SQL parser failed on the {dialect} query: {parsed.failure}",)
    inputs = [d for d in datasets if d.role == "input"]
    return _facts(parsed, outputs, inputs, open_outputs, dialect in LOWER_CASE_DIALECTS)


_PREFIX = "SQL column lineage"


@dataclasses.dataclass(slots=True)
class _Found:
    """What the attribution of one parse found: facts, and what it had to leave out."""

    facts: set[ColumnFact] = dataclasses.field(default_factory=set)
    warnings: set[str] = dataclasses.field(default_factory=set)
    off_schema: dict[DatasetId, set[str]] = dataclasses.field(default_factory=dict)
    unnamed: int = 0

    def result(self) -> tuple[tuple[ColumnFact, ...], tuple[str, ...]]:
        warnings = set(self.warnings)
        if self.unnamed:
            warnings.add(f"{_PREFIX}: {self.unnamed} unnamed output expression(s) ignored")
        for ident, names in self.off_schema.items():
            warnings.add(
                f"{_PREFIX}: column(s) {_listed(names)} not in the schema of {_label(ident)}; "
                "ignored"
            )
        return tuple(sorted(self.facts, key=_fact_order)), tuple(sorted(warnings))


class _Event:
    """The event's datasets as the parser's tables and columns are matched to them."""

    def __init__(
        self, outputs: Sequence[DatasetFacts], inputs: Sequence[DatasetFacts], lower: bool
    ) -> None:
        self.outputs = outputs
        self._names = {"output": _Names(outputs), "input": _Names(inputs)}
        self._by_id = {d.id: d for d in (*outputs, *inputs)}
        self._lower = lower
        self._columns: dict[DatasetId, _Columns] = {}

    def dataset(self, table: str, role: str, found: _Found) -> DatasetId | None:
        """The one dataset of ``role`` that ``table`` names; else a warning and None."""
        matched = self._names[role].match(table)
        if len(matched) > 1:
            found.warnings.add(
                f"{_PREFIX}: table {table} matches {len(matched)} of the event's {role}s "
                f"({_listed(_label(f) for f in matched)}); ignored"
            )
            return None
        if not matched:
            found.warnings.add(
                f"{_PREFIX}: table {table} is not among the event's {role}s; ignored"
            )
            return None
        return matched[0]

    def field(self, ident: DatasetId, column: str, found: _Found) -> str | None:
        """The column as the dataset's schema spells it; else noted off-schema and None."""
        if ident not in self._columns:
            self._columns[ident] = _Columns(self._by_id[ident], self._lower)
        spelt = self._columns[ident].spell(column)
        if spelt is None:
            found.off_schema.setdefault(ident, set()).add(column)
        return spelt


def _default_target(parsed: ParsedSql, event: _Event, found: _Found) -> DatasetId | None:
    """The written table, for rows whose target the parser leaves implicit."""
    if len(parsed.out_tables) == 1:
        return event.dataset(parsed.out_tables[0], "output", found)
    if not parsed.out_tables and len(event.outputs) == 1:
        return event.outputs[0].id
    if parsed.out_tables:
        found.warnings.add(
            f"{_PREFIX} not derived: the query writes {len(parsed.out_tables)} tables "
            f"({_listed(parsed.out_tables)}); its columns cannot be told apart"
        )
    else:
        found.warnings.add(
            f"{_PREFIX} not derived: the query writes no table and the event has "
            f"{len(event.outputs)} outputs"
        )
    return None


def _sources(
    sources: Iterable[tuple[str | None, str]], event: _Event, found: _Found
) -> Iterable[tuple[DatasetId, str]]:
    """The (input dataset, field) of each source column that matches one."""
    for source_table, source_column in sources:
        if source_table is None:
            continue  # a column the parser could not tie to a table
        source = event.dataset(source_table, "input", found)
        if source is None:
            continue
        source_field = event.field(source, source_column, found)
        if source_field is not None:
            yield source, source_field


def _derived_fact(
    target: DatasetId, target_field: str, source: DatasetId, source_field: str
) -> ColumnFact:
    return ColumnFact(
        target=target,
        target_field=target_field,
        source=source,
        source_field=source_field,
        kind="mapping",
        # No transformation metadata from the parser: docs/projection.md#column-lineage, "no
        # metadata at all → expression".
        klass="expression",
        masked=False,
        subtypes=(),
        derived=DERIVED,
    )


def _facts(
    parsed: ParsedSql,
    outputs: Sequence[DatasetFacts],
    inputs: Sequence[DatasetFacts],
    open_outputs: set[DatasetId],
    lower: bool,
) -> tuple[tuple[ColumnFact, ...], tuple[str, ...]]:
    if not parsed.lineage:
        return (), ()  # DDL, LOAD, a query of constants: nothing to attribute
    event = _Event(outputs, inputs, lower)
    found = _Found()
    default_target = _default_target(parsed, event, found)
    for target_table, target_column, sources in parsed.lineage:
        target = (
            event.dataset(target_table, "output", found)
            if target_table is not None
            else default_target
        )
        if target is None or target not in open_outputs:
            continue  # unattributed (warned above), or the producer declared its lineage
        if _UNNAMED.fullmatch(target_column):
            found.unnamed += 1
            continue
        target_field = event.field(target, target_column, found)
        if target_field is None:
            continue
        for source, source_field in _sources(sources, event, found):
            found.facts.add(_derived_fact(target, target_field, source, source_field))
    return found.result()


def _fact_order(f: ColumnFact) -> tuple[DatasetId, str, DatasetId, str]:
    return (f.target, f.target_field, f.source, f.source_field)
