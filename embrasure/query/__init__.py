"""The read side: the served graph as JSON — entities, lineage walks, column lineage,
impact, search, asOf, export (docs/architecture.md, docs/queries.md)."""
